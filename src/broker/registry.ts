import { z } from "zod";
import { type Effect, OP_TRAITS, type Op, type OpKind } from "../protocol/ops.js";

/**
 * The built-in model tools. A tool here is only a name, a description, an
 * input schema and a mapping to one broker op: it has no body that touches the
 * machine. Running any of them means Broker.run(tool.toOp(args)), so every
 * tool crosses the protocol into a sandboxed worker (the parity test in
 * test/broker/parity.test.ts holds this module to that: no fs, no child_process).
 */
export interface ToolDef<A = unknown, K extends OpKind = OpKind> {
  name: string;
  description: string;
  input: z.ZodType<A>;
  /**
   * The one op kind the tool becomes. Its declared effect (OP_TRAITS) is the
   * tool's: approvals ask by it and the broker picks the sandbox by it, and a
   * call whose op is of another kind is refused (toolCallToOp).
   */
  op: K;
  toOp(args: A): Extract<Op, { kind: K }>;
}

const path = z.string().min(1).max(4096).describe("a path, relative to the workspace or absolute");

/** Types a definition by its schema and its op kind; toOp only ever sees what the schema accepted, and can only return that kind. */
function tool<A, K extends OpKind>(def: ToolDef<A, K>): ToolDef {
  return def as unknown as ToolDef;
}

/** What a tool does (read, write, exec), as its op kind declares it. */
export function toolEffect(t: ToolDef): Effect {
  return OP_TRAITS[t.op].effect;
}

export const TOOLS: readonly ToolDef[] = [
  tool({
    name: "read_file",
    description: "Read a text file, by lines. offset is the first line (1-based), limit how many lines (default 2000).",
    input: z.object({ path, offset: z.number().int().min(1).optional(), limit: z.number().int().min(1).max(100_000).optional() }).strict(),
    op: "read",
    toOp: (a) => ({ kind: "read", path: a.path, ...(a.offset ? { offset: a.offset } : {}), ...(a.limit ? { limit: a.limit } : {}) }),
  }),
  tool({
    name: "list_dir",
    description: "List a directory: one entry a line, directories end in '/', symbolic links in '@'.",
    input: z.object({ path: path.optional() }).strict(),
    op: "list",
    toOp: (a) => ({ kind: "list", path: a.path ?? "." }),
  }),
  tool({
    name: "glob",
    description: "Find files whose path matches a glob (*, **, ?, {a,b}, [...]); a pattern without '/' matches file names at any depth.",
    input: z.object({ pattern: z.string().min(1).max(1000), path: path.optional() }).strict(),
    op: "glob",
    toOp: (a) => ({ kind: "glob", pattern: a.pattern, ...(a.path ? { path: a.path } : {}) }),
  }),
  tool({
    name: "grep",
    description: "Search file contents with a regular expression; answers path:line:text. glob limits which files are searched.",
    input: z
      .object({
        pattern: z.string().min(1).max(1000),
        path: path.optional(),
        glob: z.string().max(1000).optional(),
        ignore_case: z.boolean().optional(),
        max_matches: z.number().int().min(1).max(10_000).optional(),
      })
      .strict(),
    op: "grep",
    toOp: (a) => ({
      kind: "grep", pattern: a.pattern,
      ...(a.path ? { path: a.path } : {}), ...(a.glob ? { glob: a.glob } : {}),
      ...(a.ignore_case !== undefined ? { ignoreCase: a.ignore_case } : {}), ...(a.max_matches ? { maxMatches: a.max_matches } : {}),
    }),
  }),
  tool({
    name: "write_file",
    description: "Write a whole file, creating it and its directory if needed.",
    input: z.object({ path, content: z.string() }).strict(),
    op: "write",
    toOp: (a) => ({ kind: "write", path: a.path, content: a.content }),
  }),
  tool({
    name: "edit_file",
    description: "Replace an exact piece of text in a file. It must occur exactly once unless replace_all is set.",
    input: z.object({ path, old_text: z.string().min(1), new_text: z.string(), replace_all: z.boolean().optional() }).strict(),
    op: "edit",
    toOp: (a) => ({ kind: "edit", path: a.path, old: a.old_text, new: a.new_text, ...(a.replace_all !== undefined ? { replaceAll: a.replace_all } : {}) }),
  }),
  tool({
    name: "web_fetch",
    description: "Fetch a web page (GET) and read it as text: HTML reduced to what a reader sees. Only hosts this tool's network grants name are reachable; each redirect is checked again; private and metadata addresses are refused. The answer starts with the final URL.",
    input: z.object({ url: z.string().min(1).max(4096).describe("an absolute http:// or https:// URL"), max_chars: z.number().int().min(100).max(200_000).optional() }).strict(),
    op: "fetch",
    toOp: (a) => ({ kind: "fetch", url: a.url, ...(a.max_chars ? { maxChars: a.max_chars } : {}) }),
  }),
  tool({
    name: "exec",
    description: "Run a shell command in the workspace, inside the sandbox. Output is bounded; the command is stopped at its timeout.",
    input: z.object({ command: z.string().min(1).max(100_000), timeout_ms: z.number().int().min(1).max(3_600_000).optional() }).strict(),
    op: "exec",
    toOp: (a) => ({ kind: "exec", command: a.command, ...(a.timeout_ms ? { timeoutMs: a.timeout_ms } : {}) }),
  }),
];

export function findTool(name: string): ToolDef | undefined {
  return TOOLS.find((t) => t.name === name);
}

/** A tool's input as JSON Schema, for a model's tool list. */
export function toolJsonSchema(t: ToolDef): Record<string, unknown> {
  return z.toJSONSchema(t.input, { target: "draft-7" }) as Record<string, unknown>;
}

export type ToolCall = { ok: true; op: Op } | { ok: false; message: string };

/** Turns a model's tool call (name and raw arguments) into one op, or a message that says what was wrong. */
export function toolCallToOp(name: string, args: unknown): ToolCall {
  const t = findTool(name);
  if (!t) return { ok: false, message: `there is no tool named ${JSON.stringify(name)}; the tools are ${TOOLS.map((x) => x.name).join(", ")}` };
  const r = t.input.safeParse(args);
  if (!r.success) {
    const i = r.error.issues[0]!;
    return { ok: false, message: `${name}: bad arguments at ${i.path.join(".") || "(top level)"}: ${i.message}` };
  }
  const op = t.toOp(r.data);
  // The op's kind is what approvals and the sandbox are decided on: a tool that became another kind than it declares fails closed.
  if (op.kind !== t.op) return { ok: false, message: `${name}: the tool declares ${t.op} ops but made a ${op.kind} op; refused` };
  return { ok: true, op };
}
