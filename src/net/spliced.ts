import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import { copyChunked } from "./chunked-body.js";
import { type ChunkedOut, resetSocket, type TunnelEnd } from "./engine.js";
import { flushed, holdReads, queued, resumeReads, written } from "./hold.js";
import {
  connectionTokens, type Framing, type HeaderList, headerValues, HOP_BY_HOP, HttpError, parseResponseHead,
  requestHead, type ResponseHead, responseFraming, responseHead, safeReason, transferEncoding,
} from "./http1.js";
import { LimitError, TransferError, tunnelOutcome, UpstreamError } from "./outcome.js";
import { ClosedError, SocketReader } from "./reader.js";
import type { UpstreamPool } from "./upstream-pool.js";
import { type Injected, relayReplaced, searched } from "./reflected.js";

/**
 * Plain HTTP (absolute-form, to an http:// destination) with its bodies moved
 * in the kernel. The gate reads and decides every request head itself, and
 * reads every response head itself; a body whose length a Content-Length gave
 * goes through the engine, which is asked for that many bytes and no more, and
 * a chunked one from its first large chunk on by the engine, which reads and
 * checks the framing itself and stops at the body's end (chunked-body.ts,
 * native/chunked.c). What the
 * client sent after its body (a pipelined request) stays in its socket until
 * the gate reads it as the next head and decides it. The upstream connection
 * is kept for the client's next request to the same destination (the pool,
 * upstream-pool.ts) only when nothing leaves a doubt about where its answer
 * ended; else it is closed, so that what it sent after cannot answer another
 * request. A close-delimited response is copied here, and ends its connection.
 */

/** What a plain request needs of its connection's context (proxy.ts's ProxyContext has it all). */
export interface PlainContext {
  limits: { headerBytes: number; headerMs: number; bytesPerConnection: number; idleMs: number };
  take(n: number): void;
  openUpstream(address: string, port: number): Socket;
  upstreamReady(s: Socket, address: string, port: number): Promise<void>;
  transfer(from: Socket, to: Socket, prefix: Buffer, length: number, chunked?: ChunkedOut): { done: Promise<TunnelEnd>; cancel(): void };
  ended(): "revoked" | "released" | undefined;
}

/** A checked request, as the gate will send it. */
export interface PlainRequest {
  method: string;
  path: string;
  version: "1.0" | "1.1";
  /** The gate's headers, its framing included. */
  headers: HeaderList;
  /** The body's framing, as the gate read it. */
  body: Framing;
  expectContinue: boolean;
  /** The client asked to close after this request. */
  clientClose: boolean;
  address: string;
  port: number;
  /** The upstream pool's key for this destination as decided (UpstreamPool.key). */
  key: string;
  /** Secrets the gate put into it: its answer is searched for them (reflected.ts), never spliced. */
  reflect?: readonly Injected[] | undefined;
}

/** What the request did so far, for its record; filled in as it goes, also when it throws. */
export interface PlainState {
  status?: number;
  bytesUp: number;
  bytesDown: number;
  outcome: string;
  keep: boolean;
  /** The upstream connection was a kept one. */
  reused?: boolean;
  /** A searched answer: how many secrets' values it held, replaced. */
  reflected?: number;
  /** The answer went to the client without a length (an HTTP/1.0 client): its end is the connection's. */
  untilClose?: boolean;
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

/** The upstream closed (or reset) its connection before a byte of an answer. */
export class NoAnswer extends UpstreamError {
  constructor() {
    super("it closed the connection without an answer");
  }
}

/** The final response head; informational (1xx) answers are read and not passed on. */
export async function readResponse(r: SocketReader, maxBytes: number): Promise<ResponseHead> {
  for (let i = 0; i < 8; i++) {
    let raw: Buffer | null;
    try {
      raw = await r.readHead(maxBytes);
    } catch (e) {
      if (e instanceof HttpError) throw new HttpError(502, "bad-response", `the upstream's response head: ${e.message.replace("request head", "response head")}`);
      if (e instanceof ClosedError) throw new UpstreamError("its connection closed before it answered");
      throw e;
    }
    if (!raw) throw new NoAnswer();
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
export async function sendPlain(socket: Socket, reader: SocketReader, ctx: PlainContext, pool: UpstreamPool, req: PlainRequest, st: PlainState): Promise<void> {
  try {
    await sendOnce(socket, reader, ctx, pool, req, st, false);
  } catch (e) {
    // A kept connection the upstream closed as the request went out (its keep-alive ran out): a request
    // without a body, not a byte of it answered, is sent once more on a new connection. The gate checked it
    // once and records it once; only the connection is new.
    if (!(e instanceof NoAnswer) || !st.reused || req.body.kind !== "none" || socket.destroyed || ctx.ended()) throw e;
    st.reused = false;
    await sendOnce(socket, reader, ctx, pool, req, st, true);
  }
}

async function sendOnce(socket: Socket, reader: SocketReader, ctx: PlainContext, pool: UpstreamPool, req: PlainRequest, st: PlainState, fresh: boolean): Promise<void> {
  /** The answer's transfers. */
  const transfers: { done: Promise<TunnelEnd>; cancel(): void }[] = [];
  /** The request body's transfer now running: a Content-Length body's, or the chunked one's the copy handed over. */
  let reqT: { done: Promise<TunnelEnd>; cancel(): void } | undefined;
  let chunkT: { done: Promise<TunnelEnd>; cancel(): void } | undefined;
  /**
   * Set when the exchange ends, however it ends (answered before the body was sent, failed): the request body
   * is handed on no further. Its transfer is cancelled; a chunked body's copy asks before each move
   * (ChunkedCopy.stopped), so that nothing moves, or is counted, after the request's end is recorded.
   */
  let stopped = false;
  const stopBody = () => {
    stopped = true;
    reqT?.cancel();
    chunkT?.cancel();
  };
  // The client gone: its request is cut, and so is the upstream's.
  const abort = () => {
    for (const t of transfers) t.cancel();
    stopBody();
    if (up) resetSocket(up);
  };
  let up: Socket | undefined;
  let failed = false;
  /** Nothing leaves a doubt about where this exchange ended: the upstream connection may carry the next. */
  let clean = false;
  socket.once("close", abort);
  const idleMs = ctx.limits.idleMs;
  let sendingChunks: Promise<unknown> | undefined;
  /** The request body going out (settles with how it ended), and how it ended once it has. */
  let sending: Promise<TunnelEnd> | undefined;
  let sent: TunnelEnd | undefined;
  try {
    let s = fresh ? undefined : pool.take(req.key);
    st.reused = Boolean(s);
    if (!s) {
      s = ctx.openUpstream(req.address, req.port);
      up = s;
      await ctx.upstreamReady(s, req.address, req.port).catch((e: Error) => {
        throw socket.destroyed ? new ClosedError() : new UpstreamError(e.message);
      });
      s.setNoDelay(true);
    }
    up = s;
    if (socket.destroyed) throw new ClosedError();
    const upReader = new SocketReader(s, (n) => ctx.take(n), "upstream");
    const head = requestHead(req.method, req.path, req.headers);
    if (req.expectContinue && req.body.kind !== "none") await written(socket, Buffer.from("HTTP/1.1 100 Continue\r\n\r\n"));

    // The request body: what the gate has read already goes first; the rest, exactly its length, in the kernel.
    const length = req.body.kind === "length" ? req.body.length : 0;
    if (req.body.kind === "chunked") {
      s.write(head);
      const to = s;
      const t0 = { outcome: "completed", up: 0, down: 0 };
      const copying = copyChunked(reader, socket, to, {
        transfer: (from, dst, prefix, n, chunked) => ctx.transfer(from, dst, prefix, n, chunked),
        failed: (end) => transferError(end, ctx.limits, "request"),
        running: (t) => (chunkT = t),
        idleMs,
        moved: (n) => (st.bytesUp += n),
        stopped: () => stopped,
      }).then(() => {
        sent = t0;
        return t0;
      });
      sendingChunks = copying.catch(() => {});
      sending = copying;
    } else {
      const had = length > 0 ? reader.takeBuffered() : Buffer.alloc(0);
      const part = had.subarray(0, length);
      reader.unread(had.subarray(part.length)); // sent after the body: the next request, read and decided as any other
      st.bytesUp += part.length;
      const left = length - part.length;
      if (left > 0) {
        holdReads(socket);
        socket.setTimeout(0); // the engine keeps the idle time while it holds the sockets
        s.setTimeout(0);
        const t = ctx.transfer(socket, s, Buffer.concat([head, part]), left);
        reqT = t;
        const to = s;
        sending = t.done.then((end) => {
          st.bytesUp += end.up;
          sent = end;
          to.setTimeout(idleMs);
          return end;
        });
      } else s.write(Buffer.concat([head, part]));
    }

    const failing = sending?.then((end) => {
      if (end.outcome !== "completed") throw transferError(end, ctx.limits, "request");
      return new Promise<never>(() => {});
    });
    const answer = readResponse(upReader, ctx.limits.headerBytes);
    const res = await Promise.race(failing ? [quiet(answer), quiet(failing)] : [answer]);

    const r = req.reflect ? searched(res, req.method, req.reflect) : undefined;
    const { framing, listed, mode, keep, head: out } = clientHead(res, req.method, { ...req, reframe: Boolean(r) });
    st.keep = keep;
    st.status = res.status;
    st.untilClose = mode === "close";

    if (r) {
      // An answer to a request carrying a secret: through the replacer, never the engine.
      try {
        await written(socket, r.whole(out));
        st.bytesDown += await relayReplaced(upReader, socket, framing, mode, r);
      } finally {
        st.reflected = r.count; // on the record however the answer ended
      }
      clean = framing.kind !== "close" && upReader.takeBuffered().length === 0;
    } else if (framing.kind === "length") {
      // Past its Content-Length an upstream is not read: what it sent after is a doubt, and its connection ends.
      const got = upReader.takeBuffered();
      const body = got.subarray(0, framing.length);
      st.bytesDown += body.length;
      const rest = framing.length - body.length;
      if (got.length > framing.length) clean = false;
      else clean = true;
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
        s.setTimeout(idleMs);
        resumeReads(s);
      }
    } else if (framing.kind === "chunked") {
      await written(socket, out);
      try {
        await copyChunked(upReader, s, socket, {
          transfer: (from, dst, prefix, n, chunked) => {
            const t = ctx.transfer(from, dst, prefix, n, chunked);
            transfers.push(t);
            return t;
          },
          failed: (end) => transferError(end, ctx.limits, "response"),
          running: () => {},
          idleMs,
          // An HTTP/1.0 client gets the data alone; the connection's end is the body's end.
          unframed: mode === "close",
          moved: (n) => (st.bytesDown += n),
        });
      } catch (e) {
        if (e instanceof HttpError) throw new UpstreamError(`its response body: ${e.message}`);
        throw e;
      }
      clean = upReader.takeBuffered().length === 0;
    } else if (framing.kind === "close") {
      await written(socket, out);
      for await (const d of untilEnd(upReader)) {
        st.bytesDown += d.length;
        await queued(socket, mode === "chunked" ? Buffer.concat([Buffer.from(`${d.length.toString(16)}\r\n`), d, Buffer.from("\r\n")]) : d);
      }
      if (mode === "chunked") await written(socket, Buffer.from("0\r\n\r\n"));
      await flushed(socket);
    } else {
      await written(socket, out);
      clean = upReader.takeBuffered().length === 0;
    }
    // Kept only if it is HTTP/1.1 on both sides of the upstream's view and it did not say it closes.
    if (res.version !== "1.1" || listed.has("close")) clean = false;
    if (sending && !sent) {
      // Answered before the whole body was sent: the rest goes nowhere, and the connection ends. The body stops
      // here; one the engine carries ends at once (it may have just written the body's end, its end not yet
      // heard: a body it completed is a whole exchange), and what it moved is counted before this goes on. A
      // chunked body the gate still copies itself hands nothing more on; the client's connection ends once the
      // gate has answered.
      const inEngine = reqT !== undefined || chunkT !== undefined;
      stopBody();
      if (inEngine) await sending.catch(() => {});
      const whole = (sent as TunnelEnd | undefined)?.outcome === "completed";
      if (!whole) {
        clean = false;
        st.keep = false;
        st.outcome = "completed; the upstream answered before the whole request body was sent";
      }
    } else if (sent && sent.outcome !== "completed") throw transferError(sent, ctx.limits, "request");
  } catch (e) {
    failed = true;
    clean = false;
    // The gate closing a worker's connections ends its request however it was interrupted.
    const ended = ctx.ended();
    if (ended) throw new LimitError(ended === "revoked" ? "the worker's grant was revoked" : "the command that opened it has ended");
    // Whatever failed once the client had gone (or the gate closed it), that is how the request ended.
    throw socket.destroyed && !(e instanceof LimitError) ? new ClosedError() : e;
  } finally {
    socket.off("close", abort);
    // The sockets are the engine's until every transfer has ended; the request body's, in the engine, is
    // counted (its copy or its .then) before the request's end is recorded.
    for (const t of transfers) t.cancel();
    const inEngine = reqT !== undefined || chunkT !== undefined;
    stopBody();
    await Promise.all(transfers.map((t) => t.done));
    if (inEngine) await sending?.catch(() => {});
    // A request that did not complete is reset upstream: a cut body is never taken for a whole one.
    if (up) {
      if (failed) resetSocket(up);
      else if (clean && st.outcome === "completed") {
        resumeReads(up);
        pool.put(req.key, up);
      } else up.destroy();
    }
    if (!socket.destroyed) {
      socket.setTimeout(idleMs);
      resumeReads(socket);
      // A chunked request body the upstream did not wait for: the client is not read again. Not where the request
      // failed (the byte budget, a cut answer): the caller cuts the connection, and a clean end sent first would
      // reach the client before the cut.
      if (sendingChunks && st.outcome !== "completed" && !failed) socket.end();
    }
  }
}

/**
 * An upstream's response head as the gate sends it on to its client: hop-by-hop and Connection-named headers
 * dropped, the body framed the gate's way for this client (its length, chunks for HTTP/1.1, the close for
 * HTTP/1.0), and whether the client's connection is kept. Plain HTTP and terminated TLS share it.
 */
export function clientHead(res: ResponseHead, method: string, client: { version: "1.0" | "1.1"; clientClose: boolean; reframe?: boolean }) {
  const framing = responseFraming(res, method);
  const listed = connectionTokens(res.headers);
  const headers: HeaderList = res.headers.filter(([n]) => {
    const lower = n.toLowerCase();
    return lower !== "content-length" && !HOP_BY_HOP.has(lower) && !listed.has(lower);
  });
  const cl = headerValues(res.headers, "content-length")[0];
  let mode: "none" | "length" | "chunked" | "close";
  // reframe: a body the gate changes (reflected.ts) is sent as a length-less one, whatever its length was.
  if (framing.kind === "length" && !client.reframe) (mode = "length"), headers.push(["Content-Length", cl!]);
  else if (framing.kind === "none") {
    mode = "none";
    if (cl !== undefined && res.status !== 204) headers.push(["Content-Length", cl]);
  } else if (client.version === "1.1") (mode = "chunked"), headers.push(["Transfer-Encoding", transferEncoding(framing.kind === "chunked" ? framing.codings : [])]);
  else if (framing.kind === "chunked" && framing.codings.length) throw new UpstreamError("it sent a transfer coding before chunked, which an HTTP/1.0 client cannot be sent");
  else mode = "close";
  const keep = mode !== "close" && client.version === "1.1" && !client.clientClose;
  if (!keep) headers.push(["Connection", "close"]);
  const head = responseHead(res.status, safeReason(res.reason) || (STATUS_CODES[res.status] ?? ""), headers);
  return { framing, listed, mode, keep, head };
}
