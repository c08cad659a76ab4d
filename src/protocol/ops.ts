import { z } from "zod";

/**
 * The op vocabulary: everything a tool call can become, as the broker
 * validates it (strict: an unknown kind or field is refused). Each op is one
 * operation on one target; the broker resolves its target and checks it
 * against the grants before anything runs.
 */

/** A file's content in an op is at most this; a whole request (worker-protocol.ts) at most twice it. */
export const MAX_OP_CONTENT_BYTES = 2 * 1024 * 1024;

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
  z.object({ kind: z.literal("write"), path: Path, content: z.string().max(MAX_OP_CONTENT_BYTES) }).strict(),
  z.object({ kind: z.literal("edit"), path: Path, old: z.string().min(1), new: z.string(), replaceAll: z.boolean().optional() }).strict(),
  z.object({ kind: z.literal("exec"), command: z.string().min(1).max(100_000), timeoutMs: z.number().int().min(1).max(3_600_000).optional() }).strict(),
  // A component's own command (declared in its spec, never chosen by a model), given this input on stdin.
  z.object({ kind: z.literal("tool"), input: z.string().max(MAX_OP_CONTENT_BYTES) }).strict(),
]);
export type Op = z.infer<typeof OpSchema>;
export type OpKind = Op["kind"];
