import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { UpstreamError } from "./outcome.js";

/**
 * The upstream connection of a terminated tunnel, opened once its CONNECT
 * is allowed and durably on the record and the client's first bytes are a TLS
 * handshake (plain bytes open nothing): the TCP connection and the verified
 * TLS handshake with the server are made while the client does its own
 * handshake with the gate (which, for curl, includes loading its whole CA
 * bundle), instead of after the client's first request. The destination is
 * the one the CONNECT's check allowed, at the address it pinned; nothing is
 * sent on it until a request inside has been read and decided, as before;
 * an upstream whose certificate does not verify fails the first request with
 * the same refusal. Taken once, by the first request; otherwise discarded
 * with the tunnel.
 */
export interface EarlyUpstream {
  /** The connection, for the first request (undefined for every later one, or once discarded). */
  take(): Promise<TLSSocket | undefined> | undefined;
  discard(): void;
}

export interface EarlyContext {
  openUpstream(address: string, port: number): Socket;
  upstreamReady(s: Socket, address: string, port: number): Promise<void>;
}

/** recorded: settles once the CONNECT's record is durable; nothing is opened before (and nothing if it rejects). */
export function preconnect(ctx: EarlyContext, address: string, port: number, secure: (s: Socket) => TLSSocket, recorded: Promise<void> = Promise.resolve()): EarlyUpstream {
  let taken = false;
  let discarded = false;
  let raw: Socket | undefined;
  let tls: TLSSocket | undefined;
  const ready = (async (): Promise<TLSSocket> => {
    await recorded;
    if (discarded) throw new UpstreamError("the tunnel ended before its upstream connection was opened");
    const s = ctx.openUpstream(address, port);
    raw = s;
    await ctx.upstreamReady(s, address, port).catch((e: Error) => {
      s.destroy();
      throw new UpstreamError(e.message);
    });
    const t = secure(s);
    tls = t;
    // Unclaimed, its errors are its first request's (through the rejection below), never an uncaught one.
    t.on("error", () => {});
    await new Promise<void>((resolve, reject) => {
      t.once("secureConnect", () => resolve());
      t.once("error", reject); // with OpenSSL's code: a certificate that does not verify is refused as such
      t.once("close", () => reject(new UpstreamError("it closed the connection during the TLS handshake")));
    });
    return t;
  })();
  ready.catch(() => {});
  return {
    take() {
      if (taken) return undefined;
      taken = true;
      // Closed while it waited (the server's own idle timeout): the request opens a new one.
      return ready.then((t) => (t.destroyed ? undefined : t));
    },
    discard() {
      if (taken) return;
      taken = true;
      discarded = true;
      tls?.destroy();
      raw?.destroy();
      ready.then((t) => t.destroy(), () => {});
    },
  };
}
