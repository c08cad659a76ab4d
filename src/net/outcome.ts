import { HttpError } from "./http1.js";
import { ClosedError, UpstreamClosedError } from "./reader.js";

// The errors that end a request at the gate, and how the record says each ended.

/** A limit of the gate's stopped the request. With a status, the client is told (a cap on
 *  connections); without, the connection is cut (the byte budget: nothing more is taken from it). */
export class LimitError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "LimitError";
  }
}

/** The upstream failed or answered something that cannot be passed on. */
export class UpstreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamError";
  }
}

/** The record of an allowed request could not be made durable: nothing is sent, and the client is told nothing. */
export class RecordError extends Error {
  constructor(cause: unknown) {
    super(`its record could not be made durable: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = "RecordError";
  }
}

/** A transfer ended otherwise than completed: the connection is cut, as a tunnel's would be. */
export class TransferError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TransferError";
  }
}

/** OpenSSL's codes for a certificate that does not verify. */
const CERT_CODES = /^(UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|CERT_|ERR_TLS_CERT_ALTNAME|HOSTNAME_MISMATCH|INVALID_CA|PATH_LENGTH|INVALID_PURPOSE)/;

/** What a user can do about a certificate that does not verify: trusting a CA helps only where the issuer is unknown. */
function certHint(code: string): string {
  if (/^(ERR_TLS_CERT_ALTNAME|HOSTNAME_MISMATCH)/.test(code))
    return "Its certificate is for other names: this is not the server asked for (a wrong address, something in the way, or the server's mistake), and trusting another CA would not change that";
  if (/^CERT_(HAS_EXPIRED|NOT_YET_VALID)/.test(code)) return "Its certificate is outside its validity period (or this machine's clock is wrong); trusting another CA would not change that";
  return "If your own CA signs it, trust that CA with --ca-file PATH or [egress] ca_files";
}

/** How an error ended an allowed request, for the record. */
export function outcomeOf(e: unknown): string {
  if (e instanceof UpstreamClosedError) return `upstream failed: ${e.message}`;
  if (e instanceof ClosedError) return "the client connection closed";
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code && CERT_CODES.test(code))
    return `refused: the upstream's certificate does not verify (${code}: ${(e as Error).message}); the gate sends nothing to a server it cannot verify. ${certHint(code)}`;
  if (e instanceof RecordError) return `not sent: ${e.message}`;
  if (e instanceof LimitError) return `stopped: ${e.message}`;
  if (e instanceof HttpError) return e.code === "bad-response" ? `upstream failed: ${e.message}` : `bad request body: ${e.message}`;
  if (e instanceof TransferError) return `stopped: ${e.message}`;
  return `upstream failed: ${(e as Error).message}`;
}

/** The engine's word for how a tunnel ended, as the record says it. */
export function tunnelOutcome(engine: string, limits: { bytesPerConnection: number; idleMs: number }): string {
  switch (engine) {
    case "completed": return "completed";
    case "limit": return `stopped: the connection passed its limit of ${limits.bytesPerConnection} bytes`;
    case "idle": return `stopped: no data either way for ${limits.idleMs} ms`;
    case "cancelled": return "stopped: the worker's grant was revoked";
    case "released": return "stopped: the command that opened it has ended";
    case "closed": return "stopped: the gate closed";
    default: return `the tunnel failed: ${engine.replace(/^error: /, "")}`;
  }
}
