import type { Socket } from "node:net";
import { pendingBytes } from "./engine.js";

/**
 * Upstream connections kept between one client connection's plain-HTTP
 * requests, so that its keep-alive requests do not pay a connect each. Each
 * request is still read, checked and recorded on its own; only the TCP
 * connection is reused, and only for the same destination as the gate
 * decided it: the exact resolved address and port, the Host sent and the
 * grant that allowed it (the key). A connection is given back only after a
 * request ended with no doubt about its framing (the caller decides that:
 * spliced.ts); while it waits here, any byte or end from the upstream ends
 * it, so that nothing the upstream sent unasked can answer the next request.
 * The pool belongs to one client connection and ends with it: it is never
 * shared between clients, workers or grants.
 */
export class UpstreamPool {
  private readonly idle = new Map<string, { socket: Socket; timer: NodeJS.Timeout; drop: () => void }[]>();
  private size = 0;
  private closed = false;

  constructor(
    /** At most this many idle connections in all. */
    private readonly max: number,
    /** An idle connection is closed after this long. */
    private readonly idleMs: number,
  ) {}

  /** The key of a destination as the gate decided it. */
  static key(address: string, port: number, host: string, rule: string): string {
    return JSON.stringify([address, port, host, rule]);
  }

  /** An idle connection for exactly this key, or undefined. */
  take(key: string): Socket | undefined {
    const list = this.idle.get(key);
    for (let e = list?.pop(); e; e = list?.pop()) {
      this.size -= 1;
      this.release(e);
      // Node's view, and the kernel's: a byte or an end it has not read yet is a doubt too.
      if (!e.socket.destroyed && !e.socket.readableEnded && e.socket.readableLength === 0 && pendingBytes(e.socket) === 0) return e.socket;
      e.socket.destroy();
    }
    return undefined;
  }

  /**
   * Keeps a connection whose last request ended cleanly; it is closed instead
   * when the pool is full or closed. Its reads must be running (the caller
   * resumed them), so that a byte or an end is seen while it waits. The
   * kernel's queue is not asked here (seven system calls, on every kept
   * request): a byte already there is read by Node and ends the connection
   * (the "readable" below), and take() asks the kernel before any reuse.
   */
  put(key: string, socket: Socket): void {
    if (this.closed || this.size >= this.max || socket.destroyed || socket.readableLength > 0) return void socket.destroy();
    const drop = () => {
      const list = this.idle.get(key);
      const i = list?.findIndex((x) => x.socket === socket) ?? -1;
      if (i >= 0) {
        this.release(list!.splice(i, 1)[0]!);
        this.size -= 1;
      }
      socket.destroy();
    };
    // Anything the upstream sends while no request is out is a framing doubt: the connection ends.
    socket.on("readable", drop);
    socket.on("end", drop);
    socket.on("close", drop);
    const timer = setTimeout(drop, this.idleMs);
    timer.unref();
    const list = this.idle.get(key) ?? [];
    list.push({ socket, timer, drop });
    this.idle.set(key, list);
    this.size += 1;
  }

  /** Ends every idle connection; nothing is kept after. */
  close(): void {
    this.closed = true;
    for (const list of this.idle.values()) for (const e of list.splice(0)) (this.release(e), e.socket.destroy());
    this.idle.clear();
    this.size = 0;
  }

  private release(e: { socket: Socket; timer: NodeJS.Timeout; drop: () => void }): void {
    clearTimeout(e.timer);
    e.socket.off("readable", e.drop);
    e.socket.off("end", e.drop);
    e.socket.off("close", e.drop);
  }
}
