import { type ClientRequest, type IncomingMessage, request as httpRequest, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { type Host, hostText, parseAuthority } from "../policy/address.js";
import type { EgressEvent } from "./egress-log.js";
import {
  bodyPieces, chunk, connectionTokens, type Framing, type HeaderList, headerValues, HttpError, parseRequestHead,
  type RequestHead, requestFraming, responseHead, safeReason,
} from "./http1.js";
import type { TunnelEnd } from "./engine.js";
import { ClosedError, SocketReader } from "./reader.js";

export type EgressFields = Omit<EgressEvent, "time" | "component" | "generation">;

export type Checked =
  | { ok: true; canonical: string; address: string; resolved: string[]; rule: string }
  | { ok: false; status: number; code: string; reason: string; canonical: string; resolved?: string[] };

/** What a client connection needs from the gate: its worker's decisions, limits and record. */
export interface ProxyContext {
  limits: { headerBytes: number; headerMs: number; bytesPerConnection: number; idleMs: number };
  /** Counts bytes received for this connection; throws LimitError past its budget. */
  take(n: number): void;
  record(e: EgressFields): void;
  /** Settles once everything recorded so far is durable; rejects if it cannot be (then nothing is sent). */
  durable(): Promise<void>;
  check(method: string, host: Host, port: number, hasBody: boolean): Promise<Checked>;
  /** The secret headers this worker's grant puts on plain-HTTP requests to this destination. */
  secretHeaders(host: Host, port: number): readonly { ref: string; header: string; value: string }[];
  /** Opens an upstream connection counted against the worker's cap; throws LimitError at the cap. */
  openUpstream(address: string, port: number): Socket;
  /**
   * Hands a granted tunnel's two sockets to the engine, which splices them off
   * the event loop with the prefixes first; the caller then destroys its own
   * handles. Settles when the tunnel ends.
   */
  splice(client: Socket, upstream: Socket, upPrefix: Buffer, downPrefix: Buffer): Promise<TunnelEnd>;
}

/** A limit of the gate's stopped the request. With a status, the client is told (a cap on
 *  connections); without, the connection is cut (the byte budget: nothing more is taken from it). */
export class LimitError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "LimitError";
  }
}

/** The upstream failed or answered something that cannot be passed on. */
class UpstreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamError";
  }
}

const HOP_BY_HOP = new Set([
  "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
  "transfer-encoding", "upgrade",
]);
/** Methods for which Node's client would add its own framing if we gave none. */
const NO_DEFAULT_BODY = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"]);

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

/** The Host header's problem, if it has one: missing (when required), repeated in any spelling, or naming another place. */
function hostHeaderProblem(headers: HeaderList, target: { host: Host; port: number }, defaultPort: number, required: boolean): string | undefined {
  const hosts = headerValues(headers, "host");
  if (hosts.length > 1) return "more than one Host header";
  if (hosts.length === 0) return required ? "no Host header" : undefined;
  try {
    const h = parseAuthority(hosts[0]!, defaultPort);
    if (hostText(h.host) !== hostText(target.host) || h.port !== target.port)
      return `the Host header (${hosts[0]}) does not match the target (${hostText(target.host)}:${target.port})`;
  } catch (e) {
    return `bad Host header: ${(e as Error).message}`;
  }
  return undefined;
}

/** The record of an allowed request could not be made durable: nothing is sent, and the client is told nothing. */
class RecordError extends Error {
  constructor(cause: unknown) {
    super(`its record could not be made durable: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = "RecordError";
  }
}

/** How an error ended an allowed request, for the record. */
function outcomeOf(e: unknown): string {
  if (e instanceof ClosedError) return "the client connection closed";
  if (e instanceof RecordError) return `not sent: ${e.message}`;
  if (e instanceof LimitError) return `stopped: ${e.message}`;
  if (e instanceof HttpError) return `bad request body: ${e.message}`;
  return `upstream failed: ${(e as Error).message}`;
}

/**
 * The requests on one client connection, one at a time: the next request is
 * not read until the previous one has been answered, so pipelining cannot
 * open more than one upstream connection, and what the gate has not read
 * stays in the kernel. Every allowed request is recorded when it is allowed,
 * before anything is connected, and again, with how it ended, on every path.
 */
export class ProxyConnection {
  constructor(
    private readonly socket: Socket,
    private readonly reader: SocketReader,
    private readonly ctx: ProxyContext,
  ) {}

  /** Waits until what has been recorded is durable; nothing may be connected before. */
  private async durable(): Promise<void> {
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
      await this.tunnel(head);
      return false;
    }
    return this.forward(head);
  }

  private refuse(method: string, asked: string, status: number, code: string, reason: string, extra: Partial<EgressFields> = {}): false {
    this.ctx.record({ method, asked, decision: "denied", code, reason, status, ...extra });
    this.reply(status, `vak egress gate: refused: ${reason}\n`);
    return false;
  }

  private reply(status: number, text: string): void {
    if (!this.socket.writable) return;
    const body = Buffer.from(text);
    const headers: HeaderList = [["Content-Type", "text/plain; charset=utf-8"], ["Content-Length", String(body.length)], ["Connection", "close"]];
    this.socket.write(responseHead(status, STATUS_CODES[status] ?? "", headers));
    this.socket.end(body);
  }

  private async write(data: Buffer | Buffer[]): Promise<void> {
    let ok = true;
    for (const b of Array.isArray(data) ? data : [data]) ok = this.socket.write(b);
    if (!ok) await drained(this.socket);
  }

  /** Absolute-form HTTP: http://host[:port]/path. */
  private async forward(head: RequestHead): Promise<boolean> {
    const { method, target: asked } = head;
    const m = /^http:\/\/([^/?#]*)([^#]*)/i.exec(asked);
    if (!m) {
      const reason = /^https:/i.test(asked) ? "https:// URLs go through CONNECT" : "a proxy request needs an absolute http:// URL";
      return this.refuse(method, asked, 400, "not-a-proxy-request", reason);
    }
    let target: { host: Host; port: number };
    let framing: Framing;
    try {
      target = parseAuthority(m[1]!, 80);
      framing = requestFraming(head.headers);
    } catch (e) {
      if (e instanceof HttpError) return this.refuse(method, asked, e.status, e.code, e.message);
      return this.refuse(method, asked, 400, "bad-destination", `bad destination: ${(e as Error).message}`);
    }
    const hostProblem = hostHeaderProblem(head.headers, target, 80, true);
    if (hostProblem) return this.refuse(method, asked, 400, "host-header", hostProblem);
    const c = await this.ctx.check(method, target.host, target.port, framing.kind !== "none");
    if (!c.ok) return this.refuse(method, asked, c.status, c.code, c.reason, { canonical: c.canonical, resolved: c.resolved });
    const path = m[2] ? (m[2].startsWith("/") ? m[2] : `/${m[2]}`) : "/";
    // The Host sent is the canonical form of the one checked; framing is the gate's own, never the client's.
    const headers: HeaderList = [["Host", target.port === 80 ? hostText(target.host) : c.canonical]];
    const listed = connectionTokens(head.headers);
    // A secret header for this destination replaces whatever the client put there (its placeholder).
    const secrets = this.ctx.secretHeaders(target.host, target.port);
    const replaced = new Set(secrets.map((x) => x.header.toLowerCase()));
    for (const [name, value] of head.headers) {
      const lower = name.toLowerCase();
      if (lower === "host" || lower === "content-length" || lower === "expect" || HOP_BY_HOP.has(lower) || listed.has(lower) || replaced.has(lower)) continue;
      headers.push([name, value]);
    }
    for (const x of secrets) headers.push([x.header, x.value]);
    const allowed = {
      method, asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed" as const, reason: `granted by ${c.rule}`,
      ...(secrets.length ? { secrets: secrets.map((x) => x.ref) } : {}),
    };
    this.ctx.record(allowed); // on the record, durably (below), before a byte leaves
    if (framing.kind === "chunked") headers.push(["Transfer-Encoding", "chunked"]);
    else if (framing.kind === "length") headers.push(["Content-Length", String(framing.length)]);
    else if (!NO_DEFAULT_BODY.has(method)) headers.push(["Content-Length", "0"]);
    headers.push(["Connection", "close"]);

    let status: number | undefined;
    let bytesUp = 0;
    let bytesDown = 0;
    let outcome = "completed";
    let keep = false;
    let upSocket: Socket | undefined;
    let up: ClientRequest | undefined;
    const abort = () => up?.destroy(new ClosedError());
    this.socket.once("close", abort);
    try {
      await this.durable();
      if (this.socket.destroyed) throw new ClosedError();
      const s = this.ctx.openUpstream(c.address, target.port);
      upSocket = s;
      const req = httpRequest({ createConnection: () => s, method, path, headers: headers.flat(), setHost: false });
      up = req;
      const response = new Promise<IncomingMessage>((resolve, reject) => {
        req.once("response", resolve);
        req.once("upgrade", (_res: IncomingMessage, u: Socket) => (u.destroy(), reject(new UpstreamError("it switched protocols (101); only CONNECT carries other protocols"))));
        req.on("error", reject); // kept: a later error must not go unhandled
      });
      if (framing.kind !== "none" && head.version === "1.1" && headerValues(head.headers, "expect").some((v) => v.toLowerCase() === "100-continue"))
        this.socket.write("HTTP/1.1 100 Continue\r\n\r\n");
      let bodyDone = false;
      let bodyError: unknown;
      const sending = (async () => {
        for await (const piece of bodyPieces(this.reader, framing)) {
          bytesUp += piece.length;
          if (!req.write(piece)) await drained(req);
        }
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
      if (code < 200 || code > 599) throw new UpstreamError(`it answered with the invalid status ${code}`);
      const out = responseFraming(res, method, head.version);
      keep = out.mode !== "close" && head.version === "1.1" && !listed.has("close");
      if (!keep) out.headers.push(["Connection", "close"]);
      status = code;
      await this.write(responseHead(code, safeReason(res.statusMessage) || (STATUS_CODES[code] ?? ""), out.headers));
      for await (const d of res as AsyncIterable<Buffer>) {
        this.ctx.take(d.length);
        bytesDown += d.length;
        await this.write(out.mode === "chunked" ? chunk(d) : d);
      }
      if (out.mode === "chunked") await this.write(Buffer.from("0\r\n\r\n"));
      if (!bodyDone) {
        // The upstream answered before it took the whole body: the rest goes nowhere, and the connection ends
        // once the client has stopped sending it (or the head deadline passes).
        keep = false;
        outcome = "completed; the upstream answered before the whole request body was sent";
        req.destroy();
        this.socket.end();
        const timer = setTimeout(() => this.socket.destroy(), this.ctx.limits.headerMs);
        await sending;
        clearTimeout(timer);
      }
    } catch (e) {
      keep = false;
      outcome = outcomeOf(e);
      if (status !== undefined || e instanceof ClosedError || e instanceof RecordError || (e instanceof LimitError && !e.status)) this.socket.destroy();
      else {
        status = e instanceof HttpError || e instanceof LimitError ? (e.status ?? 502) : 502;
        this.reply(status, `vak egress gate: ${outcome}\n`);
      }
    } finally {
      this.socket.off("close", abort);
      up?.destroy();
      upSocket?.destroy();
      this.ctx.record({ ...allowed, outcome, ...(status === undefined ? {} : { status }), bytesUp, bytesDown });
    }
    return keep;
  }

  /** CONNECT host:port: a tunnel, opened only by a grant for every method. */
  private async tunnel(head: RequestHead): Promise<void> {
    const asked = head.target;
    let target: { host: Host; port: number };
    try {
      target = parseAuthority(asked);
    } catch (e) {
      return void this.refuse("CONNECT", asked, 400, "bad-destination", `bad CONNECT target: ${(e as Error).message}`);
    }
    const hostProblem = hostHeaderProblem(head.headers, target, target.port, false);
    if (hostProblem) return void this.refuse("CONNECT", asked, 400, "host-header", hostProblem);
    const c = await this.ctx.check("CONNECT", target.host, target.port, false);
    if (!c.ok) return void this.refuse("CONNECT", asked, c.status, c.code, c.reason, { canonical: c.canonical, resolved: c.resolved });
    const allowed = { method: "CONNECT", asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed" as const, reason: `granted by ${c.rule}` };
    this.ctx.record(allowed);

    let status: number | undefined;
    let outcome = "completed";
    const bytes = { up: 0, down: 0 };
    let upstream: Socket | undefined;
    const abort = () => upstream?.destroy();
    this.socket.once("close", abort);
    try {
      await this.durable();
      if (this.socket.destroyed) throw new ClosedError();
      const s = this.ctx.openUpstream(c.address, target.port);
      upstream = s;
      await new Promise<void>((resolve, reject) => {
        s.once("connect", resolve);
        s.once("error", (e) => reject(new UpstreamError(e.message)));
        s.once("close", () => reject(this.socket.destroyed ? new ClosedError() : new UpstreamError("closed before connecting")));
      });
      if (this.socket.destroyed) throw new ClosedError();
      // From here the bytes are the engine's: what either side sent early goes first, then the kernel splices.
      const early = { up: this.reader.takeBuffered(), down: new SocketReader(s, (n) => this.ctx.take(n)).takeBuffered() };
      const ended = this.ctx.splice(this.socket, s, early.up, Buffer.concat([ESTABLISHED, early.down]));
      status = 200;
      this.socket.off("close", abort);
      this.socket.destroy();
      s.destroy();
      const end = await ended;
      bytes.up = early.up.length + end.up;
      bytes.down = early.down.length + end.down;
      outcome = tunnelOutcome(end.outcome, this.ctx.limits);
    } catch (e) {
      outcome = outcomeOf(e);
      if (status !== undefined || e instanceof ClosedError || e instanceof RecordError || (e instanceof LimitError && !e.status)) this.socket.destroy();
      else {
        status = e instanceof LimitError ? (e.status ?? 502) : 502;
        this.reply(status, `vak egress gate: ${outcome}\n`);
      }
    } finally {
      this.socket.off("close", abort);
      upstream?.destroy();
      this.ctx.record({ ...allowed, outcome, ...(status === undefined ? {} : { status }), bytesUp: bytes.up, bytesDown: bytes.down });
    }
  }
}

const ESTABLISHED = Buffer.from("HTTP/1.1 200 Connection Established\r\n\r\n");

/** The engine's word for how a tunnel ended, as the record says it. */
function tunnelOutcome(engine: string, limits: ProxyContext["limits"]): string {
  switch (engine) {
    case "completed": return "completed";
    case "limit": return `stopped: the connection passed its limit of ${limits.bytesPerConnection} bytes`;
    case "idle": return `stopped: no data either way for ${limits.idleMs} ms`;
    case "cancelled": return "stopped: the worker's grant was revoked";
    case "released": return "stopped: the command that opened it has ended";
    case "closed": return "stopped: the gate closed";
    default: return `the tunnel failed: ${engine.replace(/^error: /, "")}`;
  }
}

/** The response head's fields and how its body goes to the client: the gate frames it itself. */
function responseFraming(res: IncomingMessage, method: string, version: "1.0" | "1.1"): { headers: HeaderList; mode: "none" | "length" | "chunked" | "close" } {
  const fields: HeaderList = [];
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) fields.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
  const listed = connectionTokens(fields);
  const lengths = headerValues(fields, "content-length");
  const chunked = headerValues(fields, "transfer-encoding").length > 0;
  const length = !chunked && lengths.length === 1 && /^[0-9]{1,15}$/.test(lengths[0]!) ? lengths[0] : undefined;
  const headers = fields.filter(([n]) => {
    const lower = n.toLowerCase();
    return lower !== "content-length" && !HOP_BY_HOP.has(lower) && !listed.has(lower);
  });
  const status = res.statusCode ?? 0;
  if (method === "HEAD" || status === 204 || status === 304) {
    if (length !== undefined && status !== 204) headers.push(["Content-Length", length]);
    return { headers, mode: "none" };
  }
  if (length !== undefined) return { headers: [...headers, ["Content-Length", length]], mode: "length" };
  if (version === "1.1") return { headers: [...headers, ["Transfer-Encoding", "chunked"]], mode: "chunked" };
  return { headers, mode: "close" };
}
