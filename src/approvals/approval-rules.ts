import { canonicalJson, sha256 } from "./digest.js";
import { type Effect, type Op, traitsOf } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";

/**
 * Which allowed ops wait for a person, decided on the effect each op kind
 * declares (protocol/ops.ts), never on a list of kind names. Reads of granted
 * paths run; writes and commands ask unless the user's config says "allow";
 * a kind without a declared effect always asks. Nothing here can allow what
 * the grant refuses: the broker asks only about ops already inside it.
 */
export type AskRule = "ask" | "allow";

/**
 * One rule per effect that can change anything: a new effect does not compile until it has one. A net op
 * (web_fetch) is a GET inside the component's network grants, which are its ceiling: it reads, as a read does.
 */
export type ApprovalRules = Record<Exclude<Effect, "read" | "net">, AskRule>;

export const DEFAULT_APPROVAL_RULES: ApprovalRules = { write: "ask", exec: "ask" };

/** Whether an allowed op waits for a person. Only a read, or an effect the rules say "allow" to, runs without asking. */
export function needsApproval(rules: ApprovalRules, op: { kind: string }): boolean {
  const effect = traitsOf(op.kind)?.effect;
  if (effect === undefined) return true;
  switch (effect) {
    case "read": return false;
    case "net": return false;
    case "write": return rules.write !== "allow";
    case "exec": return rules.exec !== "allow";
    default: return unhandled(effect, "effect");
  }
}

/**
 * The exact capability an "allow for this session" answer covers, and no
 * more: a command tool with exactly this input (its digest), exactly this
 * shell command, writes and edits of exactly this file (whatever they write:
 * scopeOf() says so in the prompt).
 */
export function capabilityOf(op: Op, target: string | undefined): string {
  switch (op.kind) {
    case "tool": return `tool\0${target ?? ""}\0${sha256(op.input)}`;
    case "exec": return `exec\0${op.command}`;
    // An MCP tool is a command of the server's: "for this session" covers it with exactly these arguments.
    case "mcp": return `mcp\0${op.server}\0${op.tool}\0${sha256(canonicalJson(op.arguments))}`;
    case "fetch": return `fetch\0${op.url}`;
    case "write": case "edit": return `modify\0${target ?? ""}`;
    case "read": case "list": case "glob": case "grep": return `${op.kind}\0${target ?? ""}`;
    default: return unhandled(op, "op kind");
  }
}

/** What "allow for this session" would let run later without asking, said exactly, for the prompt. */
export function scopeOf(op: Op, target: string | undefined): string {
  switch (op.kind) {
    case "tool": return `${target ?? "this component's command"} again with exactly this input (sha256 ${sha256(op.input).slice(0, 16)}…); any other input asks again`;
    case "exec": return `this exact command again (${op.command.length} characters, byte for byte); any other command asks again`;
    case "write": case "edit": return `every later write or edit of ${target ?? "this file"} in this session, whatever it writes; other files ask`;
    case "mcp": return `the tool ${op.tool} of the MCP server ${op.server} again with exactly these arguments (sha256 ${sha256(canonicalJson(op.arguments)).slice(0, 16)}…); any other arguments ask again`;
    case "fetch": return `a fetch of exactly this URL in this session`;
    case "read": case "list": case "glob": case "grep": return `${op.kind} of ${target ?? "this path"} in this session`;
    default: return unhandled(op, "op kind");
  }
}

/** Text for a one-line summary: the start of it, and how much more there is. Nothing is cut silently. */
function head(s: string, n = 200): string {
  const one = s.replace(/\n/g, "⏎");
  return one.length > n ? `${one.slice(0, n)}… (+${one.length - n} more characters)` : one;
}

/** What the op does, in a line, for the record and a list of requests; the whole op is the request's view. */
export function summarizeOp(op: Op, target: string | undefined): string {
  switch (op.kind) {
    case "write": return `write ${Buffer.byteLength(op.content)} bytes to ${target}`;
    case "edit": return `edit ${target}: replace ${Buffer.byteLength(op.old)} bytes with ${Buffer.byteLength(op.new)} bytes${op.replaceAll ? " at every occurrence" : ""}`;
    case "exec": return `run: ${head(op.command)}`;
    case "tool": return `run ${target ?? "the component's command"} with input ${head(op.input)}`;
    case "mcp": return `call ${op.tool} of the MCP server ${op.server} with ${head(JSON.stringify(op.arguments) ?? "")}`;
    case "fetch": return `fetch ${head(op.url, 500)}`;
    case "read": case "list": case "glob": case "grep": return `${op.kind} ${target ?? ""}`;
    default: return unhandled(op, "op kind");
  }
}

/** The digest an approval is bound to: the op exactly as it will run, for this component and generation. */
export function opDigest(component: string, generation: number, op: Op): string {
  return sha256(canonicalJson({ component, generation, op }));
}
