import { z } from "zod";
import { MAX_OP_CONTENT_BYTES, OpSchema } from "./ops.js";

/**
 * The worker protocol: exactly one request in (a JSON line on stdin) and one
 * response out (a JSON line on stdout), each with a protocol version. Unknown
 * versions, unknown fields, oversized or malformed messages fail closed with a
 * named error, on both sides. The broker and the worker bundle both import
 * this module; it imports nothing but zod and the op vocabulary.
 */
export const PROTOCOL_VERSION = 1;
/** An edit carries two contents; with JSON's escaping, a request may take more than their bytes. The broker checks before it sends. */
export const MAX_REQUEST_BYTES = 3 * MAX_OP_CONTENT_BYTES;
/** The worker cuts its own result below this; the broker kills a worker that writes more. */
export const MAX_RESULT_BYTES = 1024 * 1024;
export const MAX_RESPONSE_BYTES = MAX_RESULT_BYTES + 64 * 1024;
/** The marker put where output was cut. */
export const TRUNCATED = "\n[... output truncated by Vak ...]\n";

/**
 * What the broker sends: the op, with paths already resolved and checked. For a write or an edit a person
 * approved, `base` is the file as they were shown it: the SHA-256 of its text, or null when it did not exist;
 * the worker writes nothing if the file is otherwise by then (`changed`), so what is written is what was shown.
 */
export const RequestSchema = z.object({
  v: z.literal(PROTOCOL_VERSION),
  id: z.string().min(1).max(64),
  op: OpSchema,
  base: z.union([z.null(), z.string().regex(/^[0-9a-f]{64}$/)]).optional(),
}).strict();
export type Request = z.infer<typeof RequestSchema>;

export const ErrorCodeSchema = z.enum(["not-found", "denied", "not-unique", "too-large", "bad-request", "io", "changed", "internal"]);

export const ResponseSchema = z.discriminatedUnion("ok", [
  z.object({ v: z.literal(PROTOCOL_VERSION), id: z.string(), ok: z.literal(true), output: z.string(), truncated: z.boolean(), data: z.record(z.string(), z.unknown()).optional() }).strict(),
  z.object({ v: z.literal(PROTOCOL_VERSION), id: z.string(), ok: z.literal(false), error: z.object({ code: ErrorCodeSchema, message: z.string().max(4096) }).strict() }).strict(),
]);
export type Response = z.infer<typeof ResponseSchema>;

/** Parses one message, naming what was wrong with it. */
export function parseMessage<T>(schema: z.ZodType<T>, text: string, what: string, limit: number): T {
  if (Buffer.byteLength(text) > limit) throw new ProtocolError(`${what} is larger than ${limit} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ProtocolError(`${what} is not JSON`);
  }
  if (value && typeof value === "object" && "v" in value && (value as { v: unknown }).v !== PROTOCOL_VERSION)
    throw new ProtocolError(`${what} has protocol version ${JSON.stringify((value as { v: unknown }).v)}; this side speaks ${PROTOCOL_VERSION}`);
  const r = schema.safeParse(value);
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ProtocolError(`${what} is malformed at ${i.path.join(".") || "(top level)"}: ${i.message}`);
  }
  return r.data;
}

export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}
