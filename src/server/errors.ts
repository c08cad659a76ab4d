/**
 * A refusal the API answers with: an HTTP status, a stable code and a
 * message that says what was refused and what to do instead. Routes throw
 * it; the app turns it into `{ error: { code, message } }`.
 */
export type ServerErrorCode =
  | "bad-request"
  | "not-found"
  | "conflict"
  | "unsupported"
  | "gone"
  | "refused";

const STATUS: Record<ServerErrorCode, 400 | 403 | 404 | 409 | 410 | 422> = {
  "bad-request": 400,
  "not-found": 404,
  conflict: 409,
  unsupported: 422,
  gone: 410,
  refused: 403,
};

export class ServerError extends Error {
  readonly status: 400 | 403 | 404 | 409 | 410 | 422;

  constructor(
    readonly code: ServerErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "ServerError";
    this.status = STATUS[code];
  }
}
