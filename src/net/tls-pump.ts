import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { chunk } from "./http1.js";
import { UpstreamError } from "./outcome.js";
import { ClosedError } from "./reader.js";

/**
 * A response body that Node's HTTP client reads for the gate (inside a
 * terminated tunnel, through a provider endpoint, a chunked plain answer),
 * carried to the client once its head has been checked: nothing in a body is
 * decided, so each piece is only counted against the connection's budget and
 * written on, straight from the client's 'data' events, and the response is
 * paused while the client's socket is full (its 'drain' resumes it). An
 * async iterator cost a promise, a microtask turn and a copy per 16 KiB TLS
 * record, which made the gate spend about twice the CPU of the TLS work on a
 * terminated download. Settles when the body has been written whole; rejects
 * with the budget's error (the response destroyed, nothing more written), with
 * the upstream's error, or with ClosedError when the client goes.
 */
export function pumpBody(res: IncomingMessage, to: Socket, take: (n: number) => void, opts: { chunked: boolean; counted: (n: number) => void; through?: (d: Buffer) => Buffer }): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (e?: unknown) => {
      if (settled) return;
      settled = true;
      res.off("data", onData);
      res.off("end", onEnd); // its error listener stays: a late error is then no one's to throw
      res.off("close", onClose);
      to.off("drain", onDrain);
      to.off("close", onGone);
      if (e === undefined) resolve();
      else reject(e);
    };
    const onData = (d: Buffer) => {
      try {
        take(d.length);
      } catch (e) {
        res.destroy();
        return settle(e);
      }
      opts.counted(d.length);
      // through: the answer's replacer (reflected.ts), which may hold a few bytes back for the next piece.
      const out = opts.through ? opts.through(d) : d;
      if (!out.length) return;
      let ok = true;
      if (opts.chunked) for (const b of chunk(out)) ok = to.write(b);
      else ok = to.write(out);
      if (!ok) res.pause();
    };
    const onDrain = () => res.resume();
    const onEnd = () => settle();
    const onError = (e: Error) => settle(e);
    // Closed before its end without an error of its own: the upstream's connection went in the middle of the body.
    const onClose = () => settle(res.complete ? undefined : new Error("aborted"));
    const onGone = () => settle(new ClosedError());
    if (to.destroyed) return settle(new ClosedError());
    res.on("data", onData);
    res.once("end", onEnd);
    res.once("error", onError);
    res.once("close", onClose);
    to.on("drain", onDrain);
    to.once("close", onGone);
  });
}

/**
 * A response body the gate reads itself from an upstream's TLS socket (a
 * terminated tunnel: tls-forward.ts), after its head: exactly length bytes,
 * or, with length undefined, everything until the upstream ends (a
 * close-delimited body). Straight from the socket's 'data' events (one per
 * TLS record) to the client, each counted first, the source paused while the
 * client is full; no parser between. Nothing past length is written: a source
 * that sends more (a second response smuggled after the body) resolves with
 * over set, and its connection must not carry another request. frame wraps
 * each piece (chunked framing for an HTTP/1.1 client of a close-delimited
 * body). Rejects with the budget's error (the source destroyed), with
 * UpstreamError when the source ends before length, or ClosedError when the
 * client goes; the source is paused and its listeners gone when it settles.
 */
export function pumpCounted(from: Socket, to: Socket, length: number | undefined, take: (n: number) => void, frame?: (d: Buffer) => Buffer): Promise<{ moved: number; over: boolean }> {
  return new Promise((resolve, reject) => {
    let moved = 0;
    let settled = false;
    const settle = (e: unknown, over = false) => {
      if (settled) return;
      settled = true;
      from.off("data", onData);
      from.off("end", onEnd);
      from.off("close", onEnd);
      to.off("drain", onDrain);
      to.off("close", onGone);
      from.pause();
      if (e === undefined) resolve({ moved, over });
      else reject(e);
    };
    const onData = (d: Buffer) => {
      try {
        take(d.length);
      } catch (e) {
        from.destroy();
        return settle(e);
      }
      const left = length === undefined ? d.length : length - moved;
      const piece = d.length > left ? d.subarray(0, left) : d;
      moved += piece.length;
      const ok = to.write(frame ? frame(piece) : piece);
      if (length !== undefined && moved === length) return settle(undefined, d.length > piece.length);
      if (!ok) from.pause();
    };
    const onDrain = () => from.resume();
    const onEnd = () =>
      settle(length === undefined ? (from.readableEnded ? undefined : new UpstreamError("its connection failed in the middle of the body")) : new UpstreamError("it closed the connection before the end of the body its Content-Length announced"));
    const onGone = () => settle(new ClosedError());
    if (to.destroyed) return settle(new ClosedError());
    if (length === 0) return settle(undefined);
    from.on("data", onData);
    from.once("end", onEnd);
    from.once("close", onEnd);
    to.on("drain", onDrain);
    to.once("close", onGone);
    // A reader ('readable') stopped the flow before: adding a 'data' listener alone would not restart it.
    from.resume();
  });
}
