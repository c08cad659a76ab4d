/** Every refusal Vak makes carries a stable code and a message a user can act on. */
export type ErrorCode =
  | "bad-input"
  | "path-not-found"
  | "path-escapes"
  | "path-too-broad"
  | "unsupported"
  | "sandbox-setup"
  | "limit-unenforceable"
  | "unsafe-state"
  | "journal"
  | "upgraded"
  | "internal";

export class VakError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "VakError";
  }
}

export function isVakError(e: unknown): e is VakError {
  return e instanceof VakError;
}
