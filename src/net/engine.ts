import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";

/** What the native engine (native/engine.c) reports, on the main thread. */
export type EngineEvent =
  | { kind: "client"; message: string; fd: number }
  | { kind: "refused"; reason: string }
  | { kind: "end"; id: number; outcome: string; up: number; down: number; data: number };

interface Addon {
  createEngine(socketPath: string, onEvent: (e: EngineEvent) => void): unknown;
  tunnel(engine: unknown, clientFd: number, upstreamFd: number, upPrefix: Buffer, downPrefix: Buffer, budget: unknown, idleMs: number, length?: number, chunked?: number): number;
  cancel(engine: unknown, id: number): void;
  close(engine: unknown): void;
  sendClient(socketPath: string, message: string, fd: number): void;
  resetOnClose(fd: number): void;
  pending(fd: number): number;
  createBudget(limit: number): unknown;
  budgetTake(budget: unknown, n: number): boolean;
}

let addon: Addon | undefined;

/** The addon built by node-gyp at install beside the launcher (build/Release/vak-engine.node). */
function load(): Addon {
  if (addon) return addon;
  const p = installation().engine;
  if (!existsSync(p)) throw new VakError("unsupported", `the egress gate's engine is missing (${p}); run \`npm ci\` (or \`npx node-gyp rebuild\`) in the Vak package`);
  addon = createRequire(import.meta.url)(p) as Addon;
  return addon;
}

/** Why the engine cannot be used here (for `vak doctor`), or undefined if it loads. */
export function engineProblem(): string | undefined {
  try {
    load();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** How a spliced tunnel ended, and the bytes it moved each way (not counting what the gate had already read). */
export interface TunnelEnd {
  outcome: string;
  up: number;
  down: number;
  /** A chunked transfer's data bytes (up counts its framing too); for any other, up's. */
  data?: number;
}

/** How a chunked transfer writes the body on: framed again the gate's way, or its data alone (an HTTP/1.0 client). */
export type ChunkedOut = "framed" | "unframed";

/**
 * One client connection's byte budget: a single counter, in the engine, of
 * every byte received for the connection, whoever reads it (the gate's
 * JavaScript through take, each transfer or tunnel the engine runs for it),
 * counted as it is read. Directions moving at once (an upload still going
 * while the answer comes, each a chunked body the engine carries) spend the
 * same bytes, so together they can never pass the limit: the reader whose
 * bytes cross it stops, and passes none of them on. (Reserving a transfer's
 * length could not do this: a chunked body's length is not known.)
 */
export class ByteBudget {
  /** The engine's counter (an external), handed to every transfer of the connection. */
  readonly handle: unknown;

  constructor(readonly limit: number) {
    this.handle = load().createBudget(limit);
  }

  /** Counts n bytes received; false once the connection has passed its limit (those bytes must go nowhere). */
  take(n: number): boolean {
    return load().budgetTake(this.handle, n);
  }
}

/** The file descriptor under a connected Node socket. */
export function socketFd(s: Socket): number {
  const fd = (s as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) throw new VakError("internal", "a socket without a file descriptor cannot be handed to the engine");
  return fd;
}

/**
 * The gate's native half: it receives client sockets from sandbox relays on a
 * SOCK_SEQPACKET unix socket, and splices granted tunnels in the kernel, off
 * the event loop. It decides nothing: every client goes to onClient, and a
 * tunnel exists only when the gate hands one over.
 */
export class GateEngine {
  private readonly handle: unknown;
  private readonly ends = new Map<number, (end: TunnelEnd) => void>();
  private closed = false;

  constructor(
    socketPath: string,
    handlers: { onClient(message: string, fd: number): void; onRefused(reason: string): void },
  ) {
    this.handle = load().createEngine(socketPath, (e) => {
      if (e.kind === "client") handlers.onClient(e.message, e.fd);
      else if (e.kind === "refused") handlers.onRefused(e.reason);
      else {
        const done = this.ends.get(e.id);
        this.ends.delete(e.id);
        done?.({ outcome: e.outcome, up: e.up, down: e.down, data: e.data });
      }
    });
  }

  /**
   * Splices client <-> upstream until both sides end, the budget of bytes
   * received is spent, nothing moves for idleMs, or cancel(). The prefixes go
   * first (what the gate had read but not forwarded). The engine works on its
   * own copies of the fds: the caller destroys its sockets right after. The
   * budget is the connection's (shared with everything else it reads), or a
   * number: a budget of the tunnel's own.
   */
  tunnel(client: Socket, upstream: Socket, upPrefix: Buffer, downPrefix: Buffer, budget: ByteBudget | number, idleMs: number): { id: number; done: Promise<TunnelEnd> } {
    if (this.closed) throw new VakError("internal", "the gate's engine is closed");
    const id = load().tunnel(this.handle, socketFd(client), socketFd(upstream), upPrefix, downPrefix, budgetArg(budget), idleMs);
    const done = new Promise<TunnelEnd>((resolve) => this.ends.set(id, resolve));
    return { id, done };
  }

  /**
   * A transfer: the prefix, then exactly length bytes from -> to, off the
   * event loop, counted against the budget (bytes read from `from`), ended
   * by idleMs or cancel(). The kernel is asked for no byte past the length,
   * so what `from` sent after it stays in its socket. Both sockets stay the
   * caller's (nothing is shut down or reset), but the caller must neither
   * read `from` nor write `to` until done settles. Outcomes: "completed",
   * "short" (from ended before the length), and a tunnel's others.
   *
   * With chunked, a chunked transfer: length is what is left of the current
   * chunk's data, and the engine goes on through the rest of the chunked
   * body, reading and checking its framing itself (native/chunked.c) and
   * writing it on framed again (or unframed), up to and with the blank line
   * after its trailers, and not a byte past it. Malformed framing ends it:
   * "malformed: <why>".
   */
  transfer(from: Socket, to: Socket, prefix: Buffer, length: number, budget: ByteBudget | number, idleMs: number, chunked?: ChunkedOut): { id: number; done: Promise<TunnelEnd> } {
    if (this.closed) throw new VakError("internal", "the gate's engine is closed");
    const mode = chunked === "framed" ? 1 : chunked === "unframed" ? 2 : 0;
    const id = load().tunnel(this.handle, socketFd(from), socketFd(to), prefix, Buffer.alloc(0), budgetArg(budget), idleMs, length, mode);
    const done = new Promise<TunnelEnd>((resolve) => this.ends.set(id, resolve));
    return { id, done };
  }

  cancel(id: number): void {
    if (!this.closed) load().cancel(this.handle, id);
  }

  /** Ends every tunnel ("closed") and stops taking clients; their ends are reported before the returned promise settles. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    load().close(this.handle);
    // The ends the thread reported on its way out arrive on later turns of the loop.
    const deadline = Date.now() + 5000;
    while (this.ends.size && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    // Not expected: the thread reports every tunnel it held. If one is missing, it is still closed.
    for (const done of this.ends.values()) done({ outcome: "closed", up: 0, down: 0 });
    this.ends.clear();
  }
}

const budgetArg = (b: ByteBudget | number): unknown => (typeof b === "number" ? b : b.handle);

/** What a relay does: hands a connected socket to the gate with a message (tests use it to play the relay). */
export function sendClient(socketPath: string, message: string, fd: number): void {
  load().sendClient(socketPath, message, fd);
}

/**
 * Destroys a socket so that its peer sees a reset, never a clean end: a cut
 * body is not taken for a whole one. (Node's resetAndDestroy sends a FIN when
 * writes are pending.)
 */
export function resetSocket(s: Socket): void {
  try {
    load().resetOnClose(socketFd(s));
  } catch {
    // already closed, or not a TCP socket: destroyed all the same
  }
  s.destroy();
}

/**
 * What waits unread in a socket's receive queue, in the kernel (Node may not
 * have read it yet): its byte count, or -1 once the peer has ended or reset
 * it (and for a socket that is not a connected TCP one).
 */
export function pendingBytes(s: Socket): number {
  try {
    return load().pending(socketFd(s));
  } catch {
    return -1;
  }
}
