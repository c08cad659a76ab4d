import type { Socket } from "node:net";
import { ClosedError } from "./reader.js";

// Handing a Node socket to the engine and back: while the engine moves its bytes, Node must neither read
// it nor have writes of its own still queued.

type Handle = { reading?: boolean; readStop?: () => number; readStart?: () => number };

/** Stops libuv reading a socket: its bytes stay in the kernel, for the engine. */
export function holdReads(s: Socket): void {
  const h = (s as unknown as { _handle?: Handle })._handle;
  if (h?.readStop && h.reading) {
    h.reading = false;
    h.readStop();
  }
}

/** Lets Node read a socket again (what holdReads stopped; Node's own bookkeeping would not restart it). */
export function resumeReads(s: Socket): void {
  const h = (s as unknown as { _handle?: Handle })._handle;
  if (h?.readStart && !h.reading && !s.destroyed) {
    h.reading = true;
    h.readStart();
  }
}

/** Settles once what Node holds for a socket has gone to the kernel, so that the engine's bytes follow it. */
export function flushed(s: Socket): Promise<void> {
  if (!s.writableLength) return Promise.resolve();
  return new Promise((resolve, reject) => s.write(Buffer.alloc(0), (e) => (e ? reject(new ClosedError()) : resolve())));
}

/** Writes, then settles once it has gone to the kernel. */
export function written(s: Socket, data: Buffer | Buffer[]): Promise<void> {
  s.write(Array.isArray(data) ? Buffer.concat(data) : data);
  return flushed(s);
}

/** Writes, waiting only when the socket's buffer is full (backpressure), not for each write. */
export async function queued(s: Socket, data: Buffer): Promise<void> {
  if (s.destroyed) throw new ClosedError();
  if (s.write(data)) return;
  await new Promise<void>((resolve, reject) => {
    const ok = () => (s.off("close", gone), resolve());
    const gone = () => (s.off("drain", ok), reject(new ClosedError()));
    s.once("drain", ok);
    s.once("close", gone);
  });
}
