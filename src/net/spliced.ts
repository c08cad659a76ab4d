import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { resetSocket, type TunnelEnd } from "./engine.js";
import {
  bodyPieces, chunk, connectionTokens, type HeaderList, headerValues, HOP_BY_HOP, HttpError, parseResponseHead,
  requestHead, type ResponseHead, responseFraming, responseHead, safeReason, transferEncoding,
} from "./http1.js";
import { LimitError, TransferError, tunnelOutcome, UpstreamError } from "./outcome.js";
import { ClosedError, SocketReader } from "./reader.js";

/**
 * Plain HTTP (absolute-form, to an http:// destination) with its bodies moved
 * in the kernel. The gate reads and decides every request head itself, and
 * reads every response head itself; only a body whose length a Content-Length
 * gave goes through the engine, and the engine is asked for that many bytes
 * and no more. What the client sent after its body (a pipelined request) stays
 * in its socket until the gate reads it as the next head and decides it; what
 * an upstream sent past its Content-Length is never passed on (its connection
 * is closed after each request). A chunked or close-delimited response is
 * decoded and re-framed here, as on the other paths.
 */

/** What a plain request needs of its connection's context (proxy.ts's ProxyContext has it all). */
export interface PlainContext {
  limits: { headerBytes: number; bytesPerConnection: number; idleMs: number };
  take(n: number): void;
  openUpstream(address: string, port: number): Socket;
  upstreamReady(s: Socket, address: string, port: number): Promise<void>;
  transfer(from: Socket, to: Socket, prefix: Buffer, length: number): { done: Promise<TunnelEnd>; cancel(): void };
  ended(): "revoked" | "released" | undefined;
}

/** A checked request, as the gate will send it. */
export interface PlainRequest {
  method: string;
  path: string;
  version: "1.0" | "1.1";
  /** The gate's headers, its framing and Connection: close included. */
  headers: HeaderList;
  /** The body's length (Content-Length; 0 for none). */
  length: number;
  expectContinue: boolean;
  /** The client asked to close after this request. */
  clientClose: boolean;
  address: string;
  port: number;
}

/** What the request did so far, for its record; filled in as it goes, also when it throws. */
export interface PlainState {
  status?: number;
  bytesUp: number;
  bytesDown: number;
  outcome: string;
  keep: boolean;
}


type Handle = { reading?: boolean; readStop?: () => number; readStart?: () => number };

/** Stops libuv reading a socket: its bytes stay in the kernel, for the engine. */
function holdReads(s: Socket): void {
  const h = (s as unknown as { _handle?: Handle })._handle;
  if (h?.readStop && h.reading) {
    h.reading = false;
    h.readStop();
  }
}

/** Lets Node read a socket again (what holdReads stopped; Node's own bookkeeping would not restart it). */
function resumeReads(s: Socket): void {
  const h = (s as unknown as { _handle?: Handle })._handle;
  if (h?.readStart && !h.reading && !s.destroyed) {
    h.reading = true;
    h.readStart();
  }
}

/** Settles once what Node holds for a socket has gone to the kernel, so that the engine's bytes follow it. */
function flushed(s: Socket): Promise<void> {
  if (!s.writableLength) return Promise.resolve();
  return new Promise((resolve, reject) => s.write(Buffer.alloc(0), (e) => (e ? reject(new ClosedError()) : resolve())));
}

function written(s: Socket, data: Buffer | Buffer[]): Promise<void> {
  for (const b of Array.isArray(data) ? data : [data]) s.write(b);
  return flushed(s);
}

/** Why a transfer that did not complete ended, as the error that ends the request. */
function transferError(end: TunnelEnd, limits: PlainContext["limits"], body: "request" | "response"): Error {
  if (end.outcome === "short")
    return body === "request"
      ? new HttpError(400, "incomplete", "the client closed the connection in the middle of a request body")
      : new UpstreamError("it closed the connection before the end of the body its Content-Length announced");
  // The client's side failing is the client leaving; the upstream's, the upstream failing.
  const side = /^error: (source|destination): (.*)$/.exec(end.outcome);
  if (side) return (side[1] === "source") === (body === "request") ? new ClosedError() : new UpstreamError(`its connection failed in the middle of the ${body} body: ${side[2]}`);
  if (end.outcome.startsWith("error: ")) return new TransferError(`the ${body} body could not be moved: ${end.outcome.slice(7)}`);
  return new LimitError(tunnelOutcome(end.outcome, limits).replace(/^stopped: /, ""));
}

/** The final response head; informational (1xx) answers are read and not passed on. */
async function readResponse(r: SocketReader, maxBytes: number): Promise<ResponseHead> {
  for (let i = 0; i < 8; i++) {
    let raw: Buffer | null;
    try {
      raw = await r.readHead(maxBytes);
    } catch (e) {
      if (e instanceof HttpError) throw new HttpError(502, "bad-response", `the upstream's response head: ${e.message.replace("request head", "response head")}`);
      if (e instanceof ClosedError) throw new UpstreamError("its connection closed before it answered");
      throw e;
    }
    if (!raw) throw new UpstreamError("it closed the connection without an answer");
    const head = parseResponseHead(raw);
    if (head.status === 101) throw new UpstreamError("it switched protocols (101) unasked");
    if (head.status < 100 || head.status > 599) throw new UpstreamError(`it answered with the invalid status ${head.status}`);
    if (head.status >= 200) return head;
  }
  throw new UpstreamError("more than 8 informational (1xx) answers");
}

async function* untilEnd(r: SocketReader): AsyncGenerator<Buffer> {
  for (let b = await r.read(); b; b = await r.read()) yield b;
}

/** Swallows a rejection that a race may leave behind (its winner already decided). */
const quiet = <T>(p: Promise<T>): Promise<T> => (p.catch(() => {}), p);

/**
 * Sends one checked request and carries its answer. Throws on every failure,
 * with st saying how far it got; every transfer has ended, and both sockets
 * are the caller's again, by the time it returns or throws.
 */
export async function sendPlain(socket: Socket, reader: SocketReader, ctx: PlainContext, req: PlainRequest, st: PlainState): Promise<void> {
  const transfers: { done: Promise<TunnelEnd>; cancel(): void }[] = [];
  // The client gone: its request is cut, and so is the upstream's.
  const abort = () => {
    for (const t of transfers) t.cancel();
    if (up) resetSocket(up);
  };
  let up: Socket | undefined;
  let failed = false;
  socket.once("close", abort);
  const idleMs = ctx.limits.idleMs;
  try {
    const s = ctx.openUpstream(req.address, req.port);
    up = s;
    await ctx.upstreamReady(s, req.address, req.port).catch((e: Error) => {
      throw socket.destroyed ? new ClosedError() : new UpstreamError(e.message);
    });
    if (socket.destroyed) throw new ClosedError();
    const upReader = new SocketReader(s, (n) => ctx.take(n));
    const head = requestHead(req.method, req.path, req.headers);
    if (req.expectContinue && req.length > 0) await written(socket, Buffer.from("HTTP/1.1 100 Continue\r\n\r\n"));

    // The request body: what the gate has read already goes first; the rest, exactly its length, in the kernel.
    let sending: Promise<TunnelEnd> | undefined;
    let sent: TunnelEnd | undefined;
    const had = req.length > 0 ? reader.takeBuffered() : Buffer.alloc(0);
    const part = had.subarray(0, req.length);
    reader.unread(had.subarray(part.length)); // sent after the body: the next request, read and decided as any other
    st.bytesUp += part.length;
    const left = req.length - part.length;
    if (left > 0) {
      holdReads(socket);
      socket.setTimeout(0); // the engine keeps the idle time while it holds the sockets
      s.setTimeout(0);
      const t = ctx.transfer(socket, s, Buffer.concat([head, part]), left);
      transfers.push(t);
      sending = t.done.then((end) => {
        st.bytesUp += end.up;
        sent = end;
        s.setTimeout(idleMs);
        return end;
      });
    } else s.write(Buffer.concat([head, part]));

    const failed = sending?.then((end) => {
      if (end.outcome !== "completed") throw transferError(end, ctx.limits, "request");
      return new Promise<never>(() => {});
    });
    const answer = readResponse(upReader, ctx.limits.headerBytes);
    const res = await Promise.race(failed ? [quiet(answer), quiet(failed)] : [answer]);

    const framing = responseFraming(res, req.method);
    const listed = connectionTokens(res.headers);
    const headers: HeaderList = res.headers.filter(([n]) => {
      const lower = n.toLowerCase();
      return lower !== "content-length" && !HOP_BY_HOP.has(lower) && !listed.has(lower);
    });
    const cl = headerValues(res.headers, "content-length")[0];
    let mode: "none" | "length" | "chunked" | "close";
    if (framing.kind === "length") (mode = "length"), headers.push(["Content-Length", cl!]);
    else if (framing.kind === "none") {
      mode = "none";
      if (cl !== undefined && res.status !== 204) headers.push(["Content-Length", cl]);
    } else if (req.version === "1.1") (mode = "chunked"), headers.push(["Transfer-Encoding", transferEncoding(framing.kind === "chunked" ? framing.codings : [])]);
    else if (framing.kind === "chunked" && framing.codings.length) throw new UpstreamError("it sent a transfer coding before chunked, which an HTTP/1.0 client cannot be sent");
    else mode = "close";
    st.keep = mode !== "close" && req.version === "1.1" && !req.clientClose;
    if (!st.keep) headers.push(["Connection", "close"]);
    const out = responseHead(res.status, safeReason(res.reason) || (STATUS_CODES[res.status] ?? ""), headers);
    st.status = res.status;

    if (framing.kind === "length") {
      // Past its Content-Length an upstream is not read: its connection ends with this request.
      const got = upReader.takeBuffered();
      const body = got.subarray(0, framing.length);
      st.bytesDown += body.length;
      const rest = framing.length - body.length;
      if (rest === 0) await written(socket, [out, body]);
      else {
        holdReads(s);
        await flushed(socket);
        socket.setTimeout(0);
        s.setTimeout(0);
        const t = ctx.transfer(s, socket, Buffer.concat([out, body]), rest);
        transfers.push(t);
        const end = await t.done;
        st.bytesDown += end.up;
        if (end.outcome !== "completed") throw transferError(end, ctx.limits, "response");
      }
    } else {
      await written(socket, out);
      if (framing.kind !== "none") {
        try {
          for await (const d of framing.kind === "chunked" ? bodyPieces(upReader, framing) : untilEnd(upReader)) {
            st.bytesDown += d.length;
            await written(socket, mode === "chunked" ? chunk(d) : d);
          }
        } catch (e) {
          if (e instanceof HttpError) throw new UpstreamError(`its response body: ${e.message}`);
          throw e;
        }
        if (mode === "chunked") await written(socket, Buffer.from("0\r\n\r\n"));
      }
    }
    if (sending && !sent) {
      // Answered before the whole body arrived: the rest goes nowhere, and the connection ends.
      transfers[0]!.cancel();
      const end = await sending;
      if (end.outcome !== "completed") {
        st.keep = false;
        st.outcome = "completed; the upstream answered before the whole request body was sent";
      }
    } else if (sent && sent.outcome !== "completed") throw transferError(sent, ctx.limits, "request");
  } catch (e) {
    failed = true;
    // The gate closing a worker's connections ends its request however it was interrupted.
    const ended = ctx.ended();
    if (ended) throw new LimitError(ended === "revoked" ? "the worker's grant was revoked" : "the command that opened it has ended");
    // Whatever failed once the client had gone (or the gate closed it), that is how the request ended.
    throw socket.destroyed && !(e instanceof LimitError) ? new ClosedError() : e;
  } finally {
    socket.off("close", abort);
    // The sockets are the engine's until every transfer has ended.
    for (const t of transfers) t.cancel();
    await Promise.all(transfers.map((t) => t.done));
    // A request that did not complete is reset upstream: a cut body is never taken for a whole one.
    if (up) (failed ? resetSocket(up) : up.destroy());
    if (!socket.destroyed) {
      socket.setTimeout(idleMs);
      resumeReads(socket);
    }
  }
}
