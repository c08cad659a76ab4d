import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { BodyStopped } from "./chunked-body.js";
import { pendingBytes } from "./engine.js";
import { queued } from "./hold.js";
import { bodyPieces, chunk, HttpError, requestHead } from "./http1.js";
import { upstreamTls } from "./node-forward.js";
import { LimitError, outcomeOf, UpstreamError } from "./outcome.js";
import type { Connection, EgressFields, Origin } from "./proxy-context.js";
import { ClosedError, SocketReader } from "./reader.js";
import { clientHead, NoAnswer, type PlainRequest, readResponse } from "./spliced.js";
import { type EarlyUpstream, preconnect } from "./tls-early.js";
import { pumpCounted } from "./tls-pump.js";
import { relayReplaced, searched } from "./reflected.js";

/**
 * The requests inside a terminated tunnel, sent by the gate itself over TLS
 * to the address checked at CONNECT, instead of through Node's HTTP client:
 * the gate writes the head it rebuilt, moves the request body with its own
 * framing, reads the response head with its own parser (strict, as for plain
 * HTTP: spliced.ts's readResponse, http1.ts's responseFraming), and moves the
 * body counted by its framing: exactly its Content-Length straight from the
 * upstream's TLS records to the client's (tls-pump.ts), a chunked one chunk by
 * chunk through the parser, framed again. Nothing past a body's end is passed
 * on: an upstream that sends more than its length said (a second response
 * after the first) has its connection closed, never read as the next answer.
 * One upstream connection is kept for the tunnel's next request only after an
 * exchange with no doubt about where it ended (the plain pool's rule:
 * upstream-pool.ts); while it waits any byte or end from the upstream closes
 * it, and before it is used again the kernel is asked for anything TLS has not
 * read yet. The first request takes the connection opened with the tunnel
 * (tls-early.ts). WebSocket upgrades still go through Node's client
 * (node-forward.ts).
 */

/** A checked request inside a terminated tunnel, as the gate will send it: a plain one's, less where it goes (the tunnel's origin). */
export type TlsRequest = Omit<PlainRequest, "address" | "port" | "key">;

/** An idle upstream connection is closed after this long: below common servers' keep-alive (5 s). */
const KEPT_IDLE_MS = 4000;
const LAST_CHUNK = Buffer.from("0\r\n\r\n");

/** What the kernel holds under a TLS socket that TLS has not read yet (a record of any kind), or -1. */
function pendingUnder(t: TLSSocket): number {
  const parent = (t as unknown as { _handle?: { _parent?: unknown } })._handle?._parent;
  return parent ? pendingBytes({ _handle: parent } as unknown as Socket) : -1;
}

/** What the request did so far, for its record. */
interface State {
  status?: number;
  bytesUp: number;
  bytesDown: number;
  outcome: string;
  keep: boolean;
  reflected?: number;
  /** The answer went to the client without a length (an HTTP/1.0 client): its end is the connection's. */
  untilClose?: boolean;
}

export class TlsForwarder {
  constructor(
    private readonly conn: Connection,
    private readonly origin: Origin,
  ) {}

  private kept: { socket: TLSSocket; release(): void } | undefined;
  private closed = false;

  /** Ends the kept upstream connection; nothing is kept after. */
  close(): void {
    this.closed = true;
    const k = this.kept;
    this.kept = undefined;
    k?.release();
    k?.socket.destroy();
  }

  /** Sends one checked request and carries its answer; true when the client's connection may carry another. */
  async send(r: TlsRequest, allowed: EgressFields): Promise<boolean> {
    const st: State = { bytesUp: 0, bytesDown: 0, outcome: "completed", keep: false };
    try {
      await this.conn.durable();
      if (this.conn.socket.destroyed) throw new ClosedError();
      try {
        await this.once(r, st, false);
      } catch (e) {
        // A kept connection the upstream closed as the request went out: a request without a body, not a byte
        // of it answered, goes once more on a new connection (checked and recorded once: only the connection is new).
        if (!(e instanceof Reused) || r.body.kind !== "none" || this.conn.socket.destroyed) throw e instanceof Reused ? e.first : e;
        await this.once(r, st, true);
      }
    } catch (e) {
      st.keep = false;
      const err = this.conn.socket.destroyed && !(e instanceof LimitError) ? new ClosedError() : e;
      st.outcome = outcomeOf(err);
      st.status = this.conn.failed(err, st.outcome, st.status, st.untilClose === true);
    } finally {
      this.conn.ctx.record({ ...allowed, outcome: st.outcome, ...(st.status === undefined ? {} : { status: st.status }), bytesUp: st.bytesUp, bytesDown: st.bytesDown, ...(st.reflected === undefined ? {} : { reflected: st.reflected }) });
    }
    return st.keep;
  }

  /** The kept connection, if nothing leaves a doubt that it is idle; else it is closed. */
  private takeKept(): TLSSocket | undefined {
    const k = this.kept;
    this.kept = undefined;
    if (!k) return undefined;
    k.release();
    const s = k.socket;
    if (!s.destroyed && !s.readableEnded && s.readableLength === 0 && pendingUnder(s) === 0) return s;
    s.destroy();
    return undefined;
  }

  /** Keeps a connection whose exchange ended cleanly, for the tunnel's next request. */
  private keep(s: TLSSocket): void {
    if (this.closed || s.destroyed || s.readableLength > 0) return void s.destroy();
    s.setTimeout(0);
    const drop = () => {
      if (this.kept?.socket === s) this.kept = undefined;
      release();
      s.destroy();
    };
    const timer = setTimeout(drop, Math.min(KEPT_IDLE_MS, this.conn.ctx.limits.idleMs));
    timer.unref();
    const release = () => {
      clearTimeout(timer);
      s.off("readable", drop);
      s.off("end", drop);
      s.off("close", drop);
    };
    // Anything the upstream sends while no request is out is a doubt about framing: the connection ends.
    s.on("readable", drop);
    s.on("end", drop);
    s.on("close", drop);
    this.kept = { socket: s, release };
  }

  /** The upstream connection for a request: the kept one, the one opened with the tunnel, or a new one. */
  private async upstream(fresh: boolean, opening: (e: EarlyUpstream) => void): Promise<{ s: TLSSocket; reused: boolean }> {
    if (!fresh) {
      const k = this.takeKept();
      if (k) return { s: k, reused: true };
      const early = this.origin.early?.take();
      const t = early ? await early : undefined;
      if (t) return { s: t, reused: false };
    }
    const { ctx } = this.conn;
    const c = preconnect(ctx, this.origin.address, this.origin.port, (s) => upstreamTls(s, this.origin.host, ctx.tls));
    opening(c);
    const t = await c.take();
    if (!t) throw new UpstreamError("it closed the connection during the TLS handshake");
    return { s: t, reused: false };
  }

  private async once(r: TlsRequest, st: State, fresh: boolean): Promise<void> {
    const client = this.conn.socket;
    const { ctx } = this.conn;
    let up: TLSSocket | undefined;
    let opening: EarlyUpstream | undefined;
    let clean = false;
    /** Set when this exchange ends, however it ends: the request body's copy hands on (and counts) nothing after. */
    let stopped = false;
    const abort = () => {
      opening?.discard();
      up?.destroy();
    };
    client.once("close", abort);
    try {
      const got = await this.upstream(fresh, (c) => (opening = c));
      up = got.s;
      if (client.destroyed) throw new ClosedError();
      const s = up;
      if (!s.listenerCount("timeout")) s.on("timeout", () => s.destroy());
      s.setTimeout(ctx.limits.idleMs);
      const upReader = new SocketReader(s, (n) => ctx.take(n), "upstream");
      s.write(requestHead(r.method, r.path, r.headers));
      if (r.expectContinue && r.body.kind !== "none") client.write("HTTP/1.1 100 Continue\r\n\r\n");

      // The request body, with the gate's own framing, while the answer is awaited.
      let sent = r.body.kind === "none";
      let sendError: unknown;
      const sending =
        r.body.kind === "none"
          ? undefined
          : (async () => {
              const chunked = r.body.kind === "chunked";
              for await (const piece of bodyPieces(this.conn.reader, r.body)) {
                if (stopped) throw new BodyStopped();
                st.bytesUp += piece.length;
                await queued(s, chunked ? Buffer.concat(chunk(piece)) : piece);
              }
              if (stopped) throw new BodyStopped();
              if (chunked) await queued(s, LAST_CHUNK);
              sent = true;
            })().catch((e: unknown) => {
              sendError = e;
              throw e;
            });
      sending?.catch(() => {});
      const failing = sending?.then(() => new Promise<never>(() => {}));
      const answer = readResponse(upReader, ctx.limits.headerBytes);
      answer.catch(() => {});
      let res;
      try {
        res = await (failing ? Promise.race([answer, failing]) : answer);
      } catch (e) {
        if (sendError !== undefined) throw sendError;
        if (got.reused && st.bytesUp === 0 && e instanceof NoAnswer) throw new Reused(e);
        throw e;
      }

      // The response head, checked as strictly as a request's; the gate frames the body for the client itself.
      const rf = r.reflect ? searched(res, r.method, r.reflect) : undefined;
      const { framing, listed, mode, keep, head: out } = clientHead(res, r.method, { ...r, reframe: Boolean(rf) });
      st.keep = keep;
      st.status = res.status;
      st.untilClose = mode === "close";

      const take = (n: number) => ctx.take(n);
      if (rf) {
        // An answer to a request carrying a secret: through the replacer, across TLS records.
        try {
          client.write(rf.whole(out));
          st.bytesDown += await relayReplaced(upReader, client, framing, mode, rf);
        } finally {
          st.reflected = rf.count; // on the record however the answer ended
        }
        clean = framing.kind !== "close" && upReader.takeBuffered().length === 0;
      } else if (framing.kind === "length") {
        // What was read with the head goes with it, in one record; the rest straight from the upstream's records.
        const had = upReader.takeBuffered();
        const first = had.subarray(0, framing.length);
        st.bytesDown += first.length;
        client.write(Buffer.concat([out, first]));
        const rest = await pumpCounted(s, client, framing.length - first.length, take);
        st.bytesDown += rest.moved;
        clean = had.length <= framing.length && !rest.over;
      } else if (framing.kind === "chunked") {
        client.write(out);
        try {
          for await (const piece of bodyPieces(upReader, framing)) {
            st.bytesDown += piece.length;
            await queued(client, mode === "chunked" ? Buffer.concat(chunk(piece)) : piece);
          }
        } catch (e) {
          if (e instanceof HttpError) throw new UpstreamError(`its response body: ${e.message}`);
          throw e;
        }
        if (mode === "chunked") await queued(client, LAST_CHUNK);
        clean = upReader.takeBuffered().length === 0;
      } else if (framing.kind === "close") {
        const had = upReader.takeBuffered();
        const frame = mode === "chunked" ? (d: Buffer) => Buffer.concat(chunk(d)) : undefined;
        client.write(had.length ? Buffer.concat([out, frame ? frame(had) : had]) : out);
        st.bytesDown += had.length;
        const rest = await pumpCounted(s, client, undefined, take, frame);
        st.bytesDown += rest.moved;
        if (mode === "chunked") await queued(client, LAST_CHUNK);
      } else {
        client.write(out);
        clean = upReader.takeBuffered().length === 0;
      }
      // Kept only if it is HTTP/1.1 and it did not say it closes.
      if (res.version !== "1.1" || listed.has("close")) clean = false;
      if (!sent) {
        // Answered before the whole body arrived: the rest goes nowhere, and the client's connection ends once
        // it has stopped sending it (or the head deadline passes).
        clean = false;
        st.keep = false;
        st.outcome = "completed; the upstream answered before the whole request body was sent";
        stopped = true;
        s.destroy();
        client.end();
        const timer = setTimeout(() => client.destroy(), ctx.limits.headerMs);
        await sending?.catch(() => {});
        clearTimeout(timer);
      }
    } catch (e) {
      clean = false;
      throw e;
    } finally {
      stopped = true;
      client.off("close", abort);
      if (up) {
        if (clean && st.outcome === "completed") this.keep(up);
        else up.destroy();
      }
    }
  }
}

/** A kept connection failed before a byte of an answer (its server closed it as the request went out). */
class Reused extends Error {
  constructor(readonly first: Error) {
    super(first.message);
  }
}
