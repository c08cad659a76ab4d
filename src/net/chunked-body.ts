import type { Socket } from "node:net";
import type { ChunkedOut, TunnelEnd } from "./engine.js";
import { chunkEnd, chunkLine, chunkSize, dropTrailers, HttpError } from "./http1.js";
import { flushed, holdReads, queued, resumeReads } from "./hold.js";
import { ClosedError, type SocketReader } from "./reader.js";

/**
 * A chunked body, moved with its framing checked and its data in the kernel.
 * The gate reads the size lines and data of the first chunks itself (bounded,
 * strict: http1.ts's chunkSize), and frames each chunk again its own way
 * (extensions and trailers dropped, `0\r\n\r\n` at the end), or for an
 * HTTP/1.0 client, which cannot be sent chunks, not at all. At the first chunk
 * with KERNEL_CHUNK bytes or more still to come, the rest of the body goes to
 * the engine as one chunked transfer: it moves the data in the kernel and
 * reads every later size line, CRLF and trailer itself by the same rules
 * (native/chunked.c), taking no byte past the body's end, so that what follows
 * stays in the socket for the gate to read. Malformed framing throws (an
 * HttpError, from either parser), and the caller ends the connection. Below
 * that size, while the gate reads, chunks are copied here: a hand-over costs
 * more than the copy.
 */

export const KERNEL_CHUNK = 64 * 1024;

const CRLF = Buffer.from("\r\n");
const LAST = Buffer.from("0\r\n\r\n");

export interface ChunkedCopy {
  /** The engine's chunked transfer: prefix, the length left of this chunk, then the rest of the body (GateEngine.transfer). */
  transfer(from: Socket, to: Socket, prefix: Buffer, length: number, chunked: ChunkedOut): { done: Promise<TunnelEnd>; cancel(): void };
  /** The error that ends the body when a transfer did not complete. */
  failed(end: TunnelEnd): Error;
  /** The transfer now running (for the caller to cancel), or undefined once it has ended. */
  running(t: { done: Promise<TunnelEnd>; cancel(): void } | undefined): void;
  /** The idle time Node's sockets keep when the engine does not hold them. */
  idleMs: number;
  /** The data alone, unframed: for an HTTP/1.0 client, whose body ends with the connection. */
  unframed?: boolean;
  /** Counts data bytes as they move: a body that fails part way is on the record with what it moved. */
  moved(n: number): void;
  /**
   * True once the exchange has ended (the upstream answered before the body was sent, or the request failed):
   * asked right before each move, so that nothing is handed on, or counted, after the request's end is recorded.
   */
  stopped?(): boolean;
}

/** The exchange ended while its body was still being copied: nothing more of it is handed on. */
export class BodyStopped extends Error {
  constructor() {
    super("the exchange ended before its body was sent");
    this.name = "BodyStopped";
  }
}

/**
 * Moves one chunked body from `from` (read through r) to `to`, counting its data bytes (c.moved) as they go:
 * each counted in the same turn as it is handed on, and only after c.stopped() said the exchange goes on.
 */
export async function copyChunked(r: SocketReader, from: Socket, to: Socket, c: ChunkedCopy): Promise<void> {
  const go = () => {
    if (c.stopped?.()) throw new BodyStopped();
  };
  for (;;) {
    const size = chunkSize(await chunkLine(r));
    if (size === 0) {
      await dropTrailers(r);
      go();
      if (!c.unframed) await queued(to, LAST);
      return;
    }
    const line = c.unframed ? Buffer.alloc(0) : Buffer.from(`${size.toString(16)}\r\n`);
    const had = r.takeBuffered();
    const part = had.subarray(0, size);
    r.unread(had.subarray(part.length));
    let left = size - part.length;
    if (left >= KERNEL_CHUNK) {
      go();
      holdReads(from);
      await flushed(to);
      if (c.stopped?.()) {
        resumeReads(from);
        throw new BodyStopped();
      }
      from.setTimeout(0); // the engine keeps the idle time while it holds the sockets
      to.setTimeout(0);
      const t = c.transfer(from, to, Buffer.concat([line, part]), left, c.unframed ? "unframed" : "framed");
      c.moved(part.length);
      c.running(t);
      const end = await t.done;
      c.running(undefined);
      c.moved(end.data ?? end.up);
      if (end.outcome.startsWith("malformed: ")) throw new HttpError(400, "bad-request", end.outcome.slice(11));
      if (end.outcome === "short") throw new HttpError(400, "incomplete", "the connection closed in the middle of a chunked body");
      if (end.outcome !== "completed") throw c.failed(end);
      from.setTimeout(c.idleMs);
      to.setTimeout(c.idleMs);
      resumeReads(from);
      return; // the engine read the body to its end, trailers and all, and wrote its last chunk
    }
    go();
    c.moved(part.length);
    await queued(to, Buffer.concat([line, part]));
    while (left > 0) {
      const b = await r.read(left);
      if (!b) throw new HttpError(400, "incomplete", "the connection closed in the middle of a chunk");
      left -= b.length;
      go();
      c.moved(b.length);
      await queued(to, b);
    }
    await chunkEnd(r);
    if (to.destroyed) throw new ClosedError();
    go();
    if (!c.unframed) await queued(to, CRLF);
  }
}
