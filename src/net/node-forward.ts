import { type ClientRequest, type IncomingMessage, request as httpRequest, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import type { Host } from "../policy/address.js";
import {
  bodyPieces, chunk, connectionTokens, type Framing, type HeaderList, headerValues, HOP_BY_HOP, HttpError, type RequestHead,
  responseHead, safeReason, transferCodings, transferEncoding,
} from "./http1.js";
import { BodyStopped } from "./chunked-body.js";
import { outcomeOf, UpstreamError } from "./outcome.js";
import type { Connection, EgressFields, ProxyContext } from "./proxy-context.js";
import { ClosedError } from "./reader.js";
import { TLS_BUFFERS } from "./terminate.js";
import { pumpBody } from "./tls-pump.js";
import { carryUpgrade } from "./upgrade.js";
import { type Injected, Reflected, unsearchable } from "./reflected.js";

// The requests the gate sends through Node's HTTP client: WebSocket upgrades, and provider endpoints
// over https (one connection each); plain HTTP's other requests go through spliced.ts, those inside a
// terminated tunnel through tls-forward.ts. Each is decided before it gets here (proxy.ts); this sends it and carries its
// answer back.

/** A checked request, as the gate will send it through Node's client. */
export interface NodeRequest {
  head: RequestHead;
  framing: Framing;
  method: string;
  path: string;
  /** The gate's headers, its framing included. */
  headers: HeaderList;
  target: { host: Host; port: number };
  address: string;
  upgrade: boolean;
  overTls: boolean;
  clientClose: boolean;
  /** Secrets the gate put into it: its answer is searched for them (reflected.ts). */
  reflect?: readonly Injected[] | undefined;
}

/** Waits until a writable can take more; fails if it closes first. */
function drained(w: Socket | ClientRequest): Promise<void> {
  if (w.destroyed) return Promise.reject(new ClosedError());
  return new Promise((resolve, reject) => {
    const ok = () => (w.off("close", gone), resolve());
    const gone = () => (w.off("drain", ok), reject(new ClosedError()));
    w.once("drain", ok);
    w.once("close", gone);
  });
}

/** One client connection's requests through Node's client. */
export class NodeForwarder {
  constructor(private readonly conn: Connection) {}

  private async write(data: Buffer | Buffer[]): Promise<void> {
    let ok = true;
    for (const b of Array.isArray(data) ? data : [data]) ok = this.conn.socket.write(b);
    if (!ok) await drained(this.conn.socket);
  }

  /** Sends one checked request and carries its answer; true when the client's connection may carry another. */
  async send(r: NodeRequest, allowed: EgressFields): Promise<boolean> {
    const { head, framing, method, path, headers, target, upgrade, overTls } = r;
    if (upgrade) headers.push(["Connection", "Upgrade"], ["Upgrade", "websocket"]);
    else headers.push(["Connection", "close"]);

    let status: number | undefined;
    let bytesUp = 0;
    let bytesDown = 0;
    let outcome = "completed";
    let keep = false;
    let reflected: number | undefined;
    /** The answer went to the client without a length (an HTTP/1.0 client): its end is the connection's. */
    let untilClose = false;
    let upSocket: Socket | undefined;
    let up: ClientRequest | undefined;
    /** Set when this exchange ends, however it ends: the request body's copy hands on (and counts) nothing after. */
    let stopped = false;
    const abort = () => up?.destroy(new ClosedError());
    this.conn.socket.once("close", abort);
    try {
      await this.conn.durable();
      if (this.conn.socket.destroyed) throw new ClosedError();
      const s = this.conn.ctx.openUpstream(r.address, target.port);
      upSocket = s;
      await this.conn.ctx.upstreamReady(s, r.address, target.port).catch((e: Error) => {
        throw this.conn.socket.destroyed ? new ClosedError() : new UpstreamError(e.message);
      });
      const conn = overTls ? upstreamTls(s, target.host, this.conn.ctx.tls) : s;
      const req = httpRequest({ createConnection: () => conn, method, path, headers: headers.flat(), setHost: false });
      up = req;
      let switched: { res: IncomingMessage; socket: Socket; head: Buffer } | undefined;
      const response = new Promise<IncomingMessage>((resolve, reject) => {
        req.once("response", resolve);
        req.once("upgrade", (res: IncomingMessage, u: Socket, h: Buffer) => {
          if (!upgrade) return void (u.destroy(), reject(new UpstreamError("it switched protocols (101) unasked")));
          switched = { res, socket: u, head: h };
          resolve(res);
        });
        req.on("error", reject); // kept: a later error must not go unhandled
      });
      // Node's client ends a body delimited by the close at its connection's end, a reset one too (it reports the
      // reset on the request, not the response): kept here, so that such a cut is not taken for the whole body.
      let upstreamFailed: Error | undefined;
      req.on("error", (e: Error) => (upstreamFailed ??= e));
      if (framing.kind !== "none" && head.version === "1.1" && headerValues(head.headers, "expect").some((v) => v.toLowerCase() === "100-continue"))
        this.conn.socket.write("HTTP/1.1 100 Continue\r\n\r\n");
      let bodyDone = false;
      let bodyError: unknown;
      const sending = (async () => {
        for await (const piece of bodyPieces(this.conn.reader, framing)) {
          if (stopped) throw new BodyStopped();
          bytesUp += piece.length;
          if (!req.write(piece)) await drained(req);
        }
        if (stopped) throw new BodyStopped();
        req.end();
        bodyDone = true;
      })().catch((e: unknown) => {
        bodyError = e;
        req.destroy();
      });
      let res: IncomingMessage;
      try {
        res = await response;
      } catch (e) {
        await sending;
        throw bodyError ?? e;
      }
      const code = res.statusCode ?? 0;
      if (switched) {
        // A WebSocket to a granted destination: carried both ways and counted, its frames not inspected.
        status = 101;
        const moved = await carryUpgrade(this.conn.socket, this.conn.reader, switched, (n) => this.conn.ctx.take(n), this.conn.ctx.limits.idleMs);
        bytesUp += moved.up;
        bytesDown += moved.down;
        outcome = moved.outcome;
        return false;
      }
      if (code < 200 || code > 599) throw new UpstreamError(`it answered with the invalid status ${code}`);
      const rf = r.reflect ? new Reflected(r.reflect) : undefined;
      const out = responseFraming(res, method, head.version, Boolean(rf));
      const why = rf && unsearchable(out.headers, out.mode === "none" ? { kind: "none" } : { kind: "chunked", codings: out.codings });
      if (why) throw new UpstreamError(why);
      keep = out.mode !== "close" && head.version === "1.1" && !r.clientClose;
      if (!keep) out.headers.push(["Connection", "close"]);
      status = code;
      untilClose = out.mode === "close";
      const resHead = responseHead(code, safeReason(res.statusMessage) || (STATUS_CODES[code] ?? ""), out.headers);
      await this.write(rf ? rf.whole(resHead) : resHead);
      const chunked = out.mode === "chunked";
      await pumpBody(res, this.conn.socket, (n) => this.conn.ctx.take(n), { chunked, counted: (n) => (bytesDown += n), ...(rf ? { through: (d: Buffer) => rf.push(d) } : {}) });
      const byClose = res.headers["content-length"] === undefined && res.headers["transfer-encoding"] === undefined;
      if (byClose && upstreamFailed) throw new UpstreamError(`its connection failed in the middle of the body: ${upstreamFailed.message}`);
      const last = rf?.end();
      if (last?.length) await this.write(chunked ? chunk(last) : last);
      if (rf) reflected = rf.count;
      if (chunked) await this.write(Buffer.from("0\r\n\r\n"));
      if (!bodyDone) {
        // The upstream answered before it took the whole body: the rest goes nowhere, and the connection ends
        // once the client has stopped sending it (or the head deadline passes).
        keep = false;
        outcome = "completed; the upstream answered before the whole request body was sent";
        stopped = true;
        req.destroy();
        this.conn.socket.end();
        const timer = setTimeout(() => this.conn.socket.destroy(), this.conn.ctx.limits.headerMs);
        await sending;
        clearTimeout(timer);
      }
    } catch (e) {
      keep = false;
      outcome = outcomeOf(e);
      status = this.conn.failed(e, outcome, status, untilClose);
    } finally {
      stopped = true;
      this.conn.socket.off("close", abort);
      up?.destroy();
      upSocket?.destroy();
      this.conn.ctx.record({ ...allowed, outcome, ...(status === undefined ? {} : { status }), bytesUp, bytesDown, ...(reflected === undefined ? {} : { reflected }) });
    }
    return keep;
  }
}

/**
 * The gate's TLS client to an upstream: verified against the gate's trust for the checked name (or IP), HTTP/1.1
 * only. Verified whatever NODE_TLS_REJECT_UNAUTHORIZED says: Node reads it from this process's environment on every
 * connect, which is the user's shell's (meant for their own scripts) in-process, and in the resident host that of
 * whichever client started it, for every client's run after.
 */
export function upstreamTls(s: Socket, host: Host, tls: ProxyContext["tls"]): TLSSocket {
  if (!tls) throw new UpstreamError("this gate has no TLS");
  const name = host.kind === "name" ? host.name : host.ip;
  s.setNoDelay(true);
  return tlsConnect({ socket: s, host: name, ...(host.kind === "name" ? { servername: host.name } : {}), secureContext: tls.upstream(), rejectUnauthorized: true, ALPNProtocols: ["http/1.1"], ...TLS_BUFFERS });
}


/** The response head's fields and how its body goes to the client: the gate frames it itself. */
function responseFraming(res: IncomingMessage, method: string, version: "1.0" | "1.1", reframe: boolean): { headers: HeaderList; mode: "none" | "length" | "chunked" | "close"; codings: string[] } {
  const fields: HeaderList = [];
  for (let i = 0;i + 1 < res.rawHeaders.length;i += 2) fields.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
  const listed = connectionTokens(fields);
  const lengths = headerValues(fields, "content-length");
  const te = headerValues(fields, "transfer-encoding");
  // The same forms as on the spliced path (http1.ts); Node's parser has already taken the chunks off.
  const codings = te.length ? transferCodings(te, res.httpVersion === "1.0" ? "1.0" : "1.1", (m) => new HttpError(502, "bad-response", `the upstream's response: ${m}`)) : [];
  const length = !te.length && lengths.length === 1 && /^[0-9]{1,15}$/.test(lengths[0]!) ? lengths[0] : undefined;
  const headers = fields.filter(([n]) => {
    const lower = n.toLowerCase();
    return lower !== "content-length" && !HOP_BY_HOP.has(lower) && !listed.has(lower);
  });
  const status = res.statusCode ?? 0;
  if (method === "HEAD" || status === 204 || status === 304) {
    if (length !== undefined && status !== 204) headers.push(["Content-Length", length]);
    return { headers, mode: "none", codings };
  }
  // reframe: a body the gate changes (reflected.ts) is sent as a length-less one.
  if (length !== undefined && !reframe) return { headers: [...headers, ["Content-Length", length]], mode: "length", codings };
  if (version === "1.1") return { headers: [...headers, ["Transfer-Encoding", transferEncoding(codings)]], mode: "chunked", codings };
  if (codings.length) throw new UpstreamError("it sent a transfer coding before chunked, which an HTTP/1.0 client cannot be sent");
  return { headers, mode: "close", codings };
}
