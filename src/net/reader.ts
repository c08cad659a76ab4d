import type { Socket } from "node:net";
import { type ByteSource, headEnd, HttpError } from "./http1.js";

/** The socket was destroyed (an error, a timeout, a limit) before it ended cleanly. */
export class ClosedError extends Error {
  constructor() {
    super("the connection was closed");
    this.name = "ClosedError";
  }
}

/** An upstream's connection was destroyed (reset, failed) before it ended cleanly: its side, not the client's. */
export class UpstreamClosedError extends ClosedError {
  constructor() {
    super();
    this.message = "its connection failed in the middle of the answer";
    this.name = "UpstreamClosedError";
  }
}

/**
 * Pull-style reading from a socket. Bytes leave the socket's buffer only when
 * the gate asks for them, so what the gate has not yet forwarded stays in the
 * kernel and the sender waits (backpressure); and each byte taken is counted
 * (taken may throw to stop the connection) before anything uses it.
 */
export class SocketReader implements ByteSource {
  private held: Buffer | undefined;

  constructor(
    private readonly socket: Socket,
    private readonly taken: (n: number) => void,
    /** Whose socket it is: an upstream's that fails says so (UpstreamClosedError), for the record. */
    private readonly side: "client" | "upstream" = "client",
  ) {}

  /** Up to max bytes; null once the peer has ended its side. */
  async read(max = Number.MAX_SAFE_INTEGER): Promise<Buffer | null> {
    let b = this.held ?? (await this.pull());
    this.held = undefined;
    if (!b) return null;
    if (b.length > max) {
      this.held = b.subarray(max);
      b = b.subarray(0, max);
    }
    return b;
  }

  /** Everything already read from the kernel and not yet used, without waiting: for handing the socket on. */
  takeBuffered(): Buffer {
    const parts = this.held ? [this.held] : [];
    this.held = undefined;
    for (let b = this.readNow(); b !== null; b = this.readNow()) parts.push(b);
    return Buffer.concat(parts);
  }

  /** What the socket has already read from the kernel, counted as taken; null if nothing. */
  private readNow(): Buffer | null {
    const b = this.socket.destroyed ? null : (this.socket.read() as Buffer | null);
    if (b !== null) this.taken(b.length);
    return b;
  }

  /** Puts bytes back, to be read first. */
  unread(b: Buffer): void {
    if (b.length) this.held = this.held ? Buffer.concat([b, this.held]) : b;
  }

  async readLine(max: number): Promise<string> {
    let line = Buffer.alloc(0);
    for (;;) {
      const b = await this.read();
      if (!b) throw new HttpError(400, "incomplete", `${this.side === "upstream" ? "the upstream" : "the client"} closed the connection in the middle of a line`);
      const nl = b.indexOf(10);
      line = Buffer.concat([line, nl < 0 ? b : b.subarray(0, nl + 1)]);
      if (nl >= 0) {
        this.unread(b.subarray(nl + 1));
        break;
      }
      if (line.length > max + 2) throw new HttpError(400, "bad-request", "a line longer than allowed");
    }
    const text = line.subarray(0, -2).toString("latin1");
    if (line.length < 2 || line[line.length - 2] !== 13 || text.includes("\r")) throw new HttpError(400, "bad-request", "a line that does not end in CRLF");
    if (text.length > max) throw new HttpError(400, "bad-request", "a line longer than allowed");
    return text;
  }

  /**
   * The next request head, blank line included; null when the peer ends (or
   * is closed) before sending a byte of one. Empty lines before a request are
   * skipped, as RFC 9112 asks.
   */
  async readHead(maxBytes: number): Promise<Buffer | null> {
    let buf = Buffer.alloc(0);
    for (;;) {
      const b = await this.read().catch((e: unknown) => {
        if (e instanceof ClosedError && buf.length === 0) return null;
        throw e;
      });
      if (!b) {
        if (buf.length === 0) return null;
        throw new HttpError(400, "incomplete", "the client closed the connection in the middle of a request head");
      }
      buf = Buffer.concat([buf, b]);
      let start = 0;
      while (buf[start] === 13 && buf[start + 1] === 10) start += 2;
      const end = headEnd(buf.subarray(start));
      if (end >= 0 && start + end <= maxBytes) {
        this.unread(buf.subarray(start + end));
        return buf.subarray(start, start + end);
      }
      if (buf.length > maxBytes) throw new HttpError(431, "head-too-large", `a request head over ${maxBytes} bytes`);
    }
  }

  private async pull(): Promise<Buffer | null> {
    const s = this.socket;
    for (;;) {
      const b = this.readNow();
      if (b !== null) return b;
      // A socket closes itself once both sides have ended: that is an end, not a failure.
      if (s.readableEnded) return null;
      if (s.destroyed) throw this.side === "upstream" ? new UpstreamClosedError() : new ClosedError();
      await new Promise<void>((resolve) => {
        const done = () => {
          s.off("readable", done);
          s.off("end", done);
          s.off("close", done);
          resolve();
        };
        s.on("readable", done);
        s.on("end", done);
        s.on("close", done);
      });
    }
  }
}
