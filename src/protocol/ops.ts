import { z } from "zod";

/**
 * The op vocabulary: everything a tool call can become, as the broker
 * validates it (strict: an unknown kind or field is refused). Each op is one
 * operation on one target; the broker resolves its target and checks it
 * against the grants before anything runs.
 */

/** A file's content in an op is at most this; a whole request (worker-protocol.ts) at most twice it. */
export const MAX_OP_CONTENT_BYTES = 2 * 1024 * 1024;

/** Text a model chose for a file or a command's stdin, bounded in bytes as sent (UTF-8), not in UTF-16 units. */
const Content = (what: string, min = 0) =>
  z
    .string()
    .min(min)
    .max(MAX_OP_CONTENT_BYTES, `${what} is larger than ${MAX_OP_CONTENT_BYTES} bytes`)
    .refine((s) => Buffer.byteLength(s) <= MAX_OP_CONTENT_BYTES, `${what} is larger than ${MAX_OP_CONTENT_BYTES} bytes`);

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
  z.object({ kind: z.literal("write"), path: Path, content: Content("the content") }).strict(),
  z.object({ kind: z.literal("edit"), path: Path, old: Content("the text to replace", 1), new: Content("the new text"), replaceAll: z.boolean().optional() }).strict(),
  z.object({ kind: z.literal("exec"), command: z.string().min(1).max(100_000), timeoutMs: z.number().int().min(1).max(3_600_000).optional() }).strict(),
  // A component's own command (declared in its spec, never chosen by a model), given this input on stdin.
  z.object({ kind: z.literal("tool"), input: Content("the input") }).strict(),
  // One tool of an MCP server the user's config (or an approved proposal) names, with the model's arguments:
  // run by the host's MCP client against the server's sandboxed worker (src/mcp/), never by a worker of the broker.
  z
    .object({
      kind: z.literal("mcp"),
      server: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,39}$/),
      tool: z.string().min(1).max(200),
      arguments: z
        .record(z.string(), z.unknown())
        .refine((a) => Buffer.byteLength(JSON.stringify(a) ?? "") <= MAX_OP_CONTENT_BYTES, `the arguments are larger than ${MAX_OP_CONTENT_BYTES} bytes`),
    })
    .strict(),
  // A GET the host makes under the component's net grants (web_fetch): no worker, no sandbox; the gate's rules decide each hop.
  z.object({ kind: z.literal("fetch"), url: z.string().min(1).max(4096), maxChars: z.number().int().min(100).max(200_000).optional() }).strict(),
]);
export type Op = z.infer<typeof OpSchema>;
export type OpKind = Op["kind"];

/**
 * What an op does, declared once per kind: the approval rules ask by effect
 * (approvals/approval-rules.ts), the broker picks the sandbox by it (a read
 * runs in a read-only one whatever the session's mode) and applies the path
 * rules for it, and an exec op is a command under the launcher, not a worker.
 * A net op is made by the host itself under the component's network grants
 * (a read of what they allow: GET only), never by a worker.
 */
export type Effect = "read" | "write" | "exec" | "net";

export interface OpTraits {
  readonly effect: Effect;
  /** The op may create the file it names: a protected name is then refused as an entry, whether or not it exists. */
  readonly creates: boolean;
}

/** Every op kind's traits. A kind missing here, or one here that is not an op, does not compile. */
export const OP_TRAITS = {
  read: { effect: "read", creates: false },
  list: { effect: "read", creates: false },
  glob: { effect: "read", creates: false },
  grep: { effect: "read", creates: false },
  write: { effect: "write", creates: true },
  edit: { effect: "write", creates: false },
  exec: { effect: "exec", creates: false },
  tool: { effect: "exec", creates: false },
  mcp: { effect: "exec", creates: false },
  fetch: { effect: "net", creates: false },
} as const satisfies Record<OpKind, OpTraits>;

/** The traits of a kind, or undefined for a string that is not an op kind (every decider then refuses or asks). */
export function traitsOf(kind: string): OpTraits | undefined {
  return Object.hasOwn(OP_TRAITS, kind) ? OP_TRAITS[kind as OpKind] : undefined;
}
