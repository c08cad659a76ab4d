import { MAX_RESULT_BYTES, TRUNCATED } from "../../protocol/worker-protocol.js";

export type ErrorCode = "not-found" | "denied" | "not-unique" | "too-large" | "bad-request" | "io" | "changed" | "internal";

export type OpResult =
  | { output: string; truncated: boolean; data?: Record<string, unknown> }
  | { error: { code: ErrorCode; message: string } };

/** Cuts text to the result limit, with a marker where it was cut. */
export function cut(text: string, limit = MAX_RESULT_BYTES): { output: string; truncated: boolean } {
  if (Buffer.byteLength(text) <= limit) return { output: text, truncated: false };
  const keep = Buffer.from(text).subarray(0, limit - TRUNCATED.length).toString("utf8");
  return { output: keep + TRUNCATED, truncated: true };
}
