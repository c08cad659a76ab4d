import { createHash } from "node:crypto";

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

/** Every string in a JSON-like value (already depth-bounded by the redactor), cut to the bound. */
export function boundStrings<T>(v: T): T {
  if (typeof v === "string") return cut(v) as T;
  if (Array.isArray(v)) return v.map(boundStrings) as T;
  if (v && typeof v === "object") {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) o[cut(k)] = boundStrings(x);
    return o as T;
  }
  return v;
}
