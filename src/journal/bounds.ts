import { createHash } from "node:crypto";
import type { Redactor } from "../secrets/redact.js";

/**
 * The journal keeps no string longer than this: a longer one (a model's
 * reply, a command, arguments someone else did not bound) is kept as its
 * start, its size and its digest. What a model controls never grows the
 * record without bound, whoever forgot to cut it first.
 */
export const MAX_RECORDED_STRING_BYTES = 64 * 1024;
const HEAD_CHARS = 4096;

function cut(s: string): string {
  if (s.length <= MAX_RECORDED_STRING_BYTES / 4 || Buffer.byteLength(s) <= MAX_RECORDED_STRING_BYTES) return s;
  const bytes = Buffer.byteLength(s);
  return `${s.slice(0, HEAD_CHARS)}… [cut by the journal: ${bytes} bytes in all, sha256 ${createHash("sha256").update(s).digest("hex")}]`;
}

/** A value as the journal stores it: redacted, every string bounded (in one walk), as JSON text. */
export function recordedJson(redactor: Redactor, v: unknown): string {
  return JSON.stringify(redactor.value(v, 0, (s) => cut(redactor.text(s))));
}
