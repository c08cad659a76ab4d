import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { type Host, hostText, parseAuthority } from "../policy/address.js";
import {
  connectionTokens, type Framing, type HeaderList, headerValues, HOP_BY_HOP, HttpError, parseRequestHead,
  type RequestHead, requestFraming, responseHead, transferEncoding,
} from "./http1.js";
import { carries, substitute } from "./placeholders.js";
import { type Injected, searchable, WITHHELD } from "./reflected.js";
import { ClosedError, SocketReader } from "./reader.js";
import { LimitError, outcomeOf, RecordError, TransferError } from "./outcome.js";

export { LimitError } from "./outcome.js";
import { isUpgrade } from "./upgrade.js";
import { intentOf } from "./request-intent.js";
import { type PlainRequest, type PlainState, sendPlain } from "./spliced.js";
import { canonicalPath, PathError } from "../policy/url-path.js";
import { matchEndpoint } from "./endpoint.js";
import { connect } from "./connect.js";
import { NodeForwarder } from "./node-forward.js";
import { TlsForwarder } from "./tls-forward.js";
import { hostHeaderProblem } from "./proxy-head.js";
import { UpstreamPool } from "./upstream-pool.js";
import { resetSocket } from "./engine.js";
import type { Connection, EgressFields, Origin, ProxyContext } from "./proxy-context.js";

export type { Checked, Connection, EgressFields, Origin, ProxyContext } from "./proxy-context.js";

/** Idle upstream connections one client connection keeps, and for how long: shorter than common servers' keep-alive (5 s), so that the gate seldom sends on one the server is closing. */
const POOL_SIZE = 4;
const POOL_IDLE_MS = 4000;

/** Methods for which Node's client would add its own framing if we gave none. */
const NO_DEFAULT_BODY = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"]);






/**
 * The requests on one client connection, one at a time: the next request is
 * not read until the previous one has been answered, so pipelining cannot
 * open more than one upstream connection, and what the gate has not read
 * stays in the kernel. Every allowed request is recorded when it is allowed,
 * before anything is connected, and again, with how it ended, on every path.
 */

export class ProxyConnection implements Connection {
  constructor(
    readonly socket: Socket,
    readonly reader: SocketReader,
    readonly ctx: ProxyContext,
    /** Set inside a tunnel: requests are origin-form, to this destination only, sent over verified TLS (terminated) or plain (origin.plain). */
    private readonly origin?: Origin,
    /** Set inside a tunnel to the relay itself: only provider endpoints are served. */
    private readonly endpointsOnly = false,
  ) {
    this.node = new NodeForwarder(this);
    this.tls = origin && !origin.plain ? new TlsForwarder(this, origin) : undefined;
    this.upstreams = new UpstreamPool(POOL_SIZE, Math.min(POOL_IDLE_MS, ctx.limits.idleMs));
    socket.once("close", () => this.upstreams.close());
  }

  private readonly node: NodeForwarder;
  /**
   * The plain-HTTP decision last made durable on this connection (method, destination, address, rule): a kept
   * connection's next request that is the same decision is sent once its own event is written, without waiting
   * for that event's sync (ARCHITECTURE, "The egress gate": a decision is durable before a byte it allows leaves).
   */
  private durableDecision: string | undefined;
  /** Inside a terminated tunnel: its requests, sent by the gate itself over the tunnel's upstream TLS connection. */
  private readonly tls: TlsForwarder | undefined;
  /** Plain HTTP's upstream connections, kept between this client's requests; they end with it. */
  private readonly upstreams: UpstreamPool;

  /** A connection of its own for the requests inside a tunnel this one opened. */
  inside(socket: Socket, reader: SocketReader, origin: Origin | undefined, endpointsOnly: boolean): ProxyConnection {
    return new ProxyConnection(socket, reader, this.ctx, origin, endpointsOnly);
  }

  /** Ends what this connection still holds upstream (a terminated tunnel's kept connection). */
  close(): void {
    this.tls?.close();
  }

  /** Waits until what has been recorded is durable; nothing may be connected before. */
  async durable(): Promise<void> {
    try {
      await this.ctx.durable();
    } catch (e) {
      throw new RecordError(e);
    }
  }

  async serve(): Promise<void> {
    try {
      while (await this.next()) {
        // one request at a time
      }
    } catch {
      this.socket.destroy();
    }
    this.upstreams.close();
    if (this.socket.destroyed) return;
    // A lingering close: what the client sent after the last answer is read and dropped, for a
    // while, so that its writes finish and it reads the answer, instead of meeting a reset.
    this.socket.end();
    const timer = setTimeout(() => this.socket.destroy(), this.ctx.limits.headerMs);
    try {
      while (await this.reader.read()) {
        // dropped
      }
    } catch {
      this.socket.destroy();
    } finally {
      clearTimeout(timer);
    }
  }

  /** Reads and handles one request; true when the connection may carry another. */
  private async next(): Promise<boolean> {
    let timedOut = false;
    const ms = this.ctx.limits.headerMs;
    // Node's own header timeout needs a listening HTTP server; the gate has none, so it keeps its own.
    const timer = setTimeout(() => ((timedOut = true), this.socket.destroy()), ms);
    let head: RequestHead;
    let raw: Buffer | null = null;
    try {
      raw = await this.reader.readHead(this.ctx.limits.headerBytes);
      if (!raw) return false;
      head = parseRequestHead(raw);
    } catch (e) {
      // What the client sent, for the record (the log cuts it short).
      const asked = raw ? raw.subarray(0, raw.indexOf(10) < 0 ? raw.length : raw.indexOf(10)).toString("latin1").trim() : "(connection)";
      if (timedOut) this.ctx.record({ method: "-", asked, decision: "denied", code: "head-timeout", reason: `the request head was not complete within ${ms} ms`, status: 408 });
      else if (e instanceof HttpError) this.refuse("-", asked, e.status, e.code, e.message);
      else if (e instanceof LimitError) this.ctx.record({ method: "-", asked, decision: "denied", code: "byte-limit", reason: e.message });
      return false;
    } finally {
      clearTimeout(timer);
    }
    if (head.method === "CONNECT") {
      if (this.origin || this.endpointsOnly) return this.refuse("CONNECT", head.target, 400, "nested-connect", "a CONNECT inside a tunnel");
      await connect(this, head);
      return false;
    }
    return this.forward(head);
  }

  refuse(method: string, asked: string, status: number, code: string, reason: string, extra: Partial<EgressFields> = {}): false {
    this.ctx.record({ method, asked, decision: "denied", code, reason, status, ...extra });
    this.reply(status, `vak egress gate: refused: ${reason}\n`);
    return false;
  }

  /**
   * Ends the client's side of a request that failed (plain, terminated TLS, Node's client), and gives the status
   * on its record. Before any of an answer went out, the client is told why (a reply); after, its connection is
   * cut. Where the client frames the answer by the connection's end (untilClose: an HTTP/1.0 client given no
   * length), the cut is a TCP reset: a clean close would end the body there, and the client would take the part
   * it got for the whole. Inside terminated TLS a close without close_notify is such an end too (curl takes
   * one for the end of the body), so there as well the TCP connection under TLS is reset.
   */
  failed(e: unknown, outcome: string, status: number | undefined, untilClose: boolean): number | undefined {
    // A cut in the middle of an answer, or of a connection's bytes (its budget), is a reset: a plain close is a
    // FIN whenever the gate has read all the client sent, and a client may take that for the end.
    if (untilClose || status !== undefined || e instanceof TransferError || (e instanceof LimitError && !e.status)) resetSocket(this.socket);
    else if (e instanceof ClosedError || e instanceof RecordError) this.socket.destroy();
    else {
      status = e instanceof HttpError || e instanceof LimitError ? (e.status ?? 502) : 502;
      this.reply(status, `vak egress gate: ${outcome}\n`);
    }
    return status;
  }

  reply(status: number, text: string): void {
    if (!this.socket.writable) return;
    const body = Buffer.from(text);
    const headers: HeaderList = [["Content-Type", "text/plain; charset=utf-8"], ["Content-Length", String(body.length)], ["Connection", "close"]];
    this.socket.write(responseHead(status, STATUS_CODES[status] ?? "", headers));
    this.socket.end(body);
  }


  /** Absolute-form HTTP (http://host[:port]/path), or origin-form inside a tunnel. */
  private async forward(head: RequestHead): Promise<boolean> {
    const { method } = head;
    const origin = this.origin;
    let asked = head.target;
    let target: { host: Host; port: number };
    let path: string;
    let framing: Framing;
    // A provider endpoint (endpoint.ts): the relay's own address, forwarded to one URL the user named.
    const ep = !origin && this.ctx.endpoints.length ? matchEndpoint(head.target, this.ctx.endpoints) : undefined;
    if (ep && !ep.ok) return this.refuse(method, asked, 404, "endpoint", ep.reason);
    if (this.endpointsOnly && !ep) return this.refuse(method, asked, 404, "endpoint", "inside a tunnel to the relay only provider endpoints are served");
    try {
      if (ep?.ok) {
        target = { host: ep.endpoint.host, port: ep.endpoint.port };
        path = ep.path;
      } else if (origin) {
        target = { host: origin.host, port: origin.port };
        // A target not in origin form is recorded as sent, not glued to the tunnel's origin.
        if (!head.target.startsWith("/")) return this.refuse(method, head.target, 400, "not-origin-form", "inside a tunnel a request names a path on the tunnel's host");
        const [scheme, port] = origin.plain ? ["http", 80] : ["https", 443];
        asked = `${scheme}://${hostText(origin.host)}${origin.port === port ? "" : `:${origin.port}`}${head.target}`;
        path = head.target;
      } else {
        const m = /^http:\/\/([^/?#]*)([^#]*)/i.exec(asked);
        if (!m) {
          const reason = /^https:/i.test(asked) ? "https:// URLs go through CONNECT" : "a proxy request needs an absolute http:// URL";
          return this.refuse(method, asked, 400, "not-a-proxy-request", reason);
        }
        target = parseAuthority(m[1]!, 80);
        path = m[2] ? (m[2].startsWith("/") ? m[2] : `/${m[2]}`) : "/";
      }
      framing = requestFraming(head.headers, head.version);
    } catch (e) {
      if (e instanceof HttpError) return this.refuse(method, asked, e.status, e.code, e.message);
      return this.refuse(method, asked, 400, "bad-destination", `bad destination: ${(e as Error).message}`);
    }
    const overTls = (origin !== undefined && !origin.plain) || ep?.endpoint.scheme === "https";
    const defaultPort = overTls ? 443 : 80;
    // An endpoint's Host names the relay; the gate sends the endpoint's own.
    const hostProblem = ep ? undefined : hostHeaderProblem(head.headers, target, defaultPort, true);
    if (hostProblem) return this.refuse(method, asked, 400, "host-header", hostProblem);
    // Where a grant names paths, the path is decided and sent in its canonical form: the server gets what was checked.
    let checkedPath: string | undefined = ep?.checkedPath;
    if (!ep && this.ctx.pathRules(target.host, target.port)) {
      try {
        const cp = canonicalPath(path);
        checkedPath = cp.path;
        path = cp.path + cp.query;
      } catch (e) {
        if (e instanceof PathError) return this.refuse(method, asked, 400, "path", e.message);
        throw e;
      }
    }
    const c = await this.ctx.check(method, target.host, target.port, intentOf(head, framing), checkedPath, origin);
    if (!c.ok) return this.refuse(method, asked, c.status, c.code, c.reason, { canonical: c.canonical, resolved: c.resolved });
    const upgrade = isUpgrade(head);
    // The Host sent is the canonical form of the one checked; framing is the gate's own, never the client's.
    const headers: HeaderList = [["Host", target.port === defaultPort ? hostText(target.host) : c.canonical]];
    const listed = connectionTokens(head.headers);
    // A secret header for this destination replaces whatever the client put there (its placeholder); in clear
    // text across a network, neither it nor a placeholder's value goes (placeholders.ts, carries).
    const via = { tls: overTls, address: c.address, proxy: this.ctx.upstreamProxy };
    const forTarget = this.ctx.secretHeaders(target.host, target.port);
    const secrets = forTarget.filter((x) => carries(x.hosts, target.host, target.port, via));
    const replaced = new Set(secrets.map((x) => x.header.toLowerCase()));
    const kept: HeaderList = [];
    for (const [name, value] of head.headers) {
      const lower = name.toLowerCase();
      if (lower === "host" || lower === "content-length" || lower === "expect" || HOP_BY_HOP.has(lower) || listed.has(lower) || replaced.has(lower)) continue;
      kept.push([name, value]);
    }
    // Placeholders become values in header values for their own hosts only, after every check above.
    const sub = substitute(kept, head.target, this.ctx.placeholders, target.host, target.port, via);
    const withheld = [...new Set([...sub.withheld, ...forTarget.filter((x) => !secrets.includes(x)).map((x) => x.ref)])];
    // The one place that decides how the answer is relayed: a request the gate put a secret into has its
    // answer searched for the value (reflected.ts), whole and unencoded; any other is passed on as it comes.
    const injected: Injected[] = [
      ...secrets.map((x) => ({ value: x.value, placeholder: x.placeholder ?? WITHHELD })),
      ...this.ctx.placeholders.filter((p) => sub.used.includes(p.ref)),
    ];
    const reflect = injected.length ? injected : undefined;
    if (reflect && upgrade)
      return this.refuse(method, asked, 403, "secret-unsearched", "a WebSocket that carries a gate-held secret is refused: its frames are not searched, so a host that reflects the secret would hand it to the command");
    headers.push(...(reflect ? searchable(sub.headers) : sub.headers));
    for (const x of secrets) headers.push([x.header, x.value]);
    const refs = [...secrets.map((x) => x.ref), ...sub.used];
    const allowed = {
      method, asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed" as const, reason: `granted by ${c.rule}`,
      ...(origin && !origin.plain ? { tls: "terminated" as const } : {}),
      ...(refs.length ? { secrets: refs } : {}),
      ...(withheld.length ? { withheld } : {}),
      ...(upgrade ? { upgrade: "websocket" } : {}),
      ...(ep ? { endpoint: ep.endpoint.variable } : {}),
    };
    this.ctx.record(allowed); // on the record, durably (below), before a byte leaves
    if (framing.kind === "chunked") headers.push(["Transfer-Encoding", transferEncoding(framing.codings)]);
    else if (framing.kind === "length") headers.push(["Content-Length", String(framing.length)]);
    else if (!NO_DEFAULT_BODY.has(method)) headers.push(["Content-Length", "0"]);
    // Plain HTTP: its bodies move in the kernel (spliced.ts), over an upstream connection kept for this destination.
    const expectContinue = head.version === "1.1" && headerValues(head.headers, "expect").some((v) => v.toLowerCase() === "100-continue");
    if (!overTls && !upgrade) {
      const key = UpstreamPool.key(c.address, target.port, headers[0]![1], c.rule);
      const plain = { method, path, version: head.version, headers, body: framing, expectContinue, clientClose: listed.has("close"), address: c.address, port: target.port, key, reflect };
      // Only a decision that carries nothing of its own: a secret or a placeholder put into the request, an endpoint, is waited for each time.
      const decision = refs.length || withheld.length || ep ? undefined : JSON.stringify([method, c.canonical, c.address, target.port, c.rule]);
      return this.plain(plain, allowed, decision);
    }
    if (this.tls && !upgrade) return this.tls.send({ method, path, version: head.version, headers, body: framing, expectContinue, clientClose: listed.has("close"), reflect }, allowed);
    return this.node.send({ head, framing, method, path, headers, target, address: c.address, upgrade, overTls, clientClose: listed.has("close"), reflect }, allowed);
  }

  /** A checked plain-HTTP request, its bodies spliced; on the record as forward()'s are. */
  private async plain(req: PlainRequest, allowed: EgressFields, decision: string | undefined): Promise<boolean> {
    const st: PlainState = { bytesUp: 0, bytesDown: 0, outcome: "completed", keep: false };
    try {
      if (decision === undefined || decision !== this.durableDecision) {
        await this.durable();
        this.durableDecision = decision;
      }
      if (this.socket.destroyed) throw new ClosedError();
      await sendPlain(this.socket, this.reader, this.ctx, this.upstreams, req, st);
    } catch (e) {
      st.keep = false;
      st.outcome = outcomeOf(e);
      st.status = this.failed(e, st.outcome, st.status, st.untilClose === true);
    } finally {
      this.ctx.record({ ...allowed, outcome: st.outcome, ...(st.status === undefined ? {} : { status: st.status }), bytesUp: st.bytesUp, bytesDown: st.bytesDown, ...(st.reflected === undefined ? {} : { reflected: st.reflected }) });
    }
    return st.keep;
  }

}


