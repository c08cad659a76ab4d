import { createHash } from "node:crypto";

/**
 * What the record holds of one tools/call: its arguments redacted and
 * bounded (their size and digest either way), and of its answer the digest,
 * the size and the error, never the content.
 */
const ARG_RECORD_BYTES = 4096;
const ERROR_TEXT = 300;

type Redact = <T>(v: T) => T;

export function argsForRecord(a: unknown, redact: Redact): Record<string, unknown> {
  const text = JSON.stringify(a ?? {});
  const bytes = Buffer.byteLength(text);
  const digest = createHash("sha256").update(text).digest("hex");
  // Redacted whole, then cut: a cut first could leave half a secret that no longer matches.
  const argumentsValue = bytes <= ARG_RECORD_BYTES ? redact(a ?? {}) : `${redact(text).slice(0, ARG_RECORD_BYTES)}… [${bytes} bytes; not recorded whole]`;
  return { arguments: argumentsValue, argsBytes: bytes, argsDigest: digest };
}

export function resultForRecord(a: { result?: Record<string, unknown>; error?: { message: string } }, redact: Redact): Record<string, unknown> {
  const text = JSON.stringify(a.result ?? a.error);
  const isError = a.result ? a.result.isError === true : true;
  let error: string | undefined;
  if (a.error) error = redact(a.error.message).slice(0, ERROR_TEXT);
  else if (isError) {
    const first = (a.result?.content as { type?: string; text?: string }[] | undefined)?.find((x) => x.type === "text");
    error = redact(first?.text ?? "the tool reported an error").slice(0, ERROR_TEXT);
  }
  return { ok: !isError, digest: createHash("sha256").update(text).digest("hex"), bytes: Buffer.byteLength(text), ...(error !== undefined ? { error } : {}) };
}
