import type { Socket } from "node:net";
import { type SecureContext, TLSSocket } from "node:tls";
import { setFlagsFromString } from "node:v8";
import { canonicalHost, type Host, hostText } from "../policy/address.js";
import type { SocketReader } from "./reader.js";
import { looksLikeTls } from "./client-hello.js";

/**
 * TLS terminated at the gate, for a CONNECT whose grant must see inside (a
 * read: or path rule, a secret for its host). The client is told the tunnel
 * is open; its first bytes must be a TLS handshake (anything else is answered
 * with a plain 403 and the connection closed, never tunnelled blind); the
 * name it asks for (SNI) must be the CONNECT target; the gate answers with
 * the run CA's leaf for that target. Only HTTP/1.1 and HTTP/1.0 (curl -0
 * offers nothing else) are offered by ALPN: a client that offers h2 and
 * http/1.1 falls back, one that offers only h2 is refused in the handshake
 * (no_application_protocol), so each request is one the gate has parsed and
 * checked. The caller then reads requests from the
 * TLS socket as from any client.
 */
export class TerminateError extends Error {
  constructor(
    readonly code: "not-tls" | "sni-mismatch" | "handshake" | "head-timeout",
    message: string,
  ) {
    super(message);
    this.name = "TerminateError";
  }
}

const ESTABLISHED = Buffer.from("HTTP/1.1 200 Connection Established\r\n\r\n");

/**
 * The buffer size of a terminated tunnel's TLS sockets, both legs. With Node's
 * 16 KiB, each 16 KiB TLS record filled a socket's buffer: every write said
 * "full", and the source paused and resumed once per record. At 256 KiB the gate
 * spent about a fifth less CPU per MiB on a bare relay; at 512 KiB the records
 * queued while a write is out go to the client in writes of up to ~500 KB
 * instead of ~240 KB, which cut the whole run's CPU for a 256 MiB download by
 * another ~9% (1135 to 1035 ms, median of 10, load 4-6; 1 MiB saved only
 * 2-4% more, near the noise). It bounds what one tunnel holds: 512 KiB read
 * ahead from the upstream and 512 KiB queued for a client that does not read
 * (a worker's 256 connections: 256 MiB at most). (Node takes the option for
 * TLS sockets; its types do not list it.)
 */
export const TLS_BUFFERS: object = { highWaterMark: 512 * 1024 };

/**
 * Has V8 free dead ArrayBuffers within the scavenge that finds them, not on a
 * background thread afterwards. A terminated download makes one 16 KiB buffer
 * per TLS record it decrypts (Node's TLS layer allocates each); with both
 * cores busy (the server, the gate, the client) the background sweeping
 * lagged, V8's count of external memory passed its limit and it ran a full
 * mark-compact about every 40 MiB: ~0.45 ms of the gate's CPU per MiB, a fifth
 * of its cost of terminating. Swept in the scavenge, none ran. Process-wide,
 * and harmless elsewhere; set once this process may terminate TLS.
 */
export function sweepBuffersInScavenges(): void {
  setFlagsFromString("--no-concurrent-array-buffer-sweeping");
}

/** Whether an SNI names the target: the same canonical host. */
export function sniMatches(servername: string, target: Host): boolean {
  try {
    return hostText(canonicalHost(servername)) === hostText(target);
  } catch {
    return false;
  }
}

/** p, or a TerminateError once `at` (a Date.now() time) passes: one deadline, however many steps wait for it. */
function withDeadline<T>(p: Promise<T>, at: number, ms: number, onTimeout: () => void, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onTimeout();
      reject(new TerminateError("handshake", `${what} took longer than ${ms} ms`));
    }, Math.max(0, at - Date.now()));
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Why a client's handshake failed, in words it can act on: an h2-only client by name, OpenSSL's text without its trailing newline. */
function handshakeFailure(e: Error & { code?: string }): string {
  if (e.code === "ERR_SSL_NO_APPLICATION_PROTOCOL")
    return "the client offered only protocols the gate does not speak here (HTTP/2, ALPN h2): where a grant is checked on each request, the gate reads HTTP/1.1 and 1.0 only; let the client use HTTP/1.1 (curl --http1.1)";
  return `the TLS handshake with the client failed: ${e.message.trim()}`;
}

/** onHandshake: called once the client's first bytes are a TLS handshake, before the gate answers it. */
export async function terminate(client: Socket, reader: SocketReader, target: Host, context: (host: Host) => Promise<SecureContext>, headerMs: number, onHandshake?: () => void): Promise<TLSSocket> {
  // The leaf is minted (or taken from the cache) while the client sends its ClientHello.
  const leaf = context(target);
  leaf.catch(() => undefined);
  client.write(ESTABLISHED);
  // One deadline from the answer to the end of the handshake: its first bytes just in time, the rest
  // held as long again, kept a tunnel open twice as long.
  const deadline = Date.now() + headerMs;
  let first = Buffer.alloc(0);
  const peek = async () => {
    while (first.length < 3) {
      const b = await reader.read();
      if (!b) throw new TerminateError("not-tls", "the client closed the tunnel before it sent a TLS handshake");
      first = Buffer.concat([first, b]);
    }
  };
  await withDeadline(peek(), deadline, headerMs, () => client.destroy(), "the client's TLS handshake");
  if (!looksLikeTls(first)) {
    const body = "vak egress gate: refused: this tunnel's grant is checked on each request, so the gate terminates TLS in it; the client sent plain bytes, not a TLS handshake\n";
    client.end(`HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    throw new TerminateError("not-tls", "the client sent plain bytes inside a CONNECT the gate terminates; only TLS is accepted there");
  }
  onHandshake?.();
  const ctx = await leaf;
  // What the gate has read goes back in front of the socket, for the TLS layer to read first.
  client.unshift(Buffer.concat([first, reader.takeBuffered()]));
  client.setTimeout(0);
  // Records go out as they are made: with Nagle, a small answer waits for the client's delayed ACK (40 ms).
  client.setNoDelay(true);
  let mismatch: string | undefined;
  const secure = new TLSSocket(client, {
    isServer: true,
    secureContext: ctx,
    // HTTP/1.0 too (curl -0 offers only it): the same parser reads it; h2 it does not.
    ALPNProtocols: ["http/1.1", "http/1.0"],
    ...TLS_BUFFERS,
    SNICallback: (servername, cb) => {
      if (sniMatches(servername, target)) return cb(null, ctx);
      mismatch = servername;
      cb(new Error("SNI mismatch"));
    },
  });
  secure.on("error", () => secure.destroy());
  client.once("close", () => secure.destroy());
  secure.once("close", () => client.destroy());
  await withDeadline(
    new Promise<void>((resolve, reject) => {
      secure.once("secure", () => resolve());
      secure.once("error", (e) =>
        reject(
          mismatch !== undefined
            ? new TerminateError("sni-mismatch", `the TLS handshake asked for ${mismatch.slice(0, 200)}, not the CONNECT target ${hostText(target)}`)
            : new TerminateError("handshake", handshakeFailure(e as Error & { code?: string })),
        ),
      );
      secure.once("close", () => reject(new TerminateError("handshake", "the client closed the tunnel during the TLS handshake")));
    }),
    deadline,
    headerMs,
    () => secure.destroy(),
    "the client's TLS handshake",
  );
  return secure;
}
