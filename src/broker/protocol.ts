import { z } from "zod";

/**
 * The worker protocol: exactly one request in (a JSON line on stdin) and one
 * response out (a JSON line on stdout), each with a protocol version. Unknown
 * versions, unknown fields, oversized or malformed messages fail closed with a
 * named error, on both sides.
 */
export const PROTOCOL_VERSION = 1;
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** The worker cuts its own result below this; the broker kills a worker that writes more. */
export const MAX_RESULT_BYTES = 1024 * 1024;
export const MAX_RESPONSE_BYTES = MAX_RESULT_BYTES + 64 * 1024;
/** The marker put where output was cut. */
export const TRUNCATED = "\n[... output truncated by Vak ...]\n";

const Path = z.string().min(1).max(4096).refine((p) => !p.includes("\0"), "a path cannot contain NUL");

export const OpSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("read"), path: Path, offset: z.number().int().min(1).optional(), limit: z.number().int().min(1).max(100_000).optional() }).strict(),
  z.object({ kind: z.literal("list"), path: Path }).strict(),
  z.object({ kind: z.literal("glob"), pattern: z.string().min(1).max(1000), path: Path.optional() }).strict(),
  z
    .object({
      kind: z.literal("grep"),
      pattern: z.string().min(1).max(1000),
      path: Path.optional(),
      glob: z.string().max(1000).optional(),
      ignoreCase: z.boolean().optional(),
      maxMatches: z.number().int().min(1).max(10_000).optional(),
    })
    .strict(),
  z.object({ kind: z.literal("write"), path: Path, content: z.string().max(MAX_REQUEST_BYTES / 2) }).strict(),
  z.object({ kind: z.literal("edit"), path: Path, old: z.string().min(1), new: z.string(), replaceAll: z.boolean().optional() }).strict(),
  z.object({ kind: z.literal("exec"), command: z.string().min(1).max(100_000), timeoutMs: z.number().int().min(1).max(3_600_000).optional() }).strict(),
  // A component's own command (declared in its spec, never chosen by a model), given this input on stdin.
  z.object({ kind: z.literal("tool"), input: z.string().max(MAX_REQUEST_BYTES / 2) }).strict(),
]);
export type Op = z.infer<typeof OpSchema>;
export type OpKind = Op["kind"];

/** What the broker sends: the op, with paths already resolved and checked. */
export const RequestSchema = z.object({ v: z.literal(PROTOCOL_VERSION), id: z.string().min(1).max(64), op: OpSchema }).strict();
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
