import { createHash } from "node:crypto";
import type { Op } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";
import type { WorkerOutcome } from "./worker-process.js";

/** What the broker refuses with, before or instead of a worker's outcome. */
export type Refusal = { ok: false; code: string; message: string };

const digest = (s: string) => ({ bytes: Buffer.byteLength(s), sha256: createHash("sha256").update(s).digest("hex") });

/** What the journal keeps of an op's arguments: everything but file contents, which become a length and a digest. */
export function summarize(op: Op): Record<string, unknown> {
  switch (op.kind) {
    case "write": return { path: op.path, content: digest(op.content) };
    case "tool": return { input: op.input.slice(0, 500), ...digest(op.input) };
    case "mcp": {
      const args = JSON.stringify(op.arguments);
      return { server: op.server, tool: op.tool, arguments: args.slice(0, 500), ...digest(args) };
    }
    case "edit": return { path: op.path, old: op.old.slice(0, 200), new: op.new.slice(0, 200), replaceAll: op.replaceAll ?? false };
    case "read": case "list": case "glob": case "grep": case "exec": case "fetch": return { ...op };
    default: return unhandled(op, "op kind");
  }
}

/** The tool.result payload: for a result, its size and digest, never its content. */
export function resultPayload(kind: Op["kind"], outcome: WorkerOutcome, ms?: number): Record<string, unknown> {
  const time = ms === undefined ? {} : { ms };
  return outcome.ok
    ? { op: kind, ok: true, bytes: Buffer.byteLength(outcome.output), digest: createHash("sha256").update(outcome.output).digest("hex"), truncated: outcome.truncated, data: outcome.data ?? null, ...time }
    : { op: kind, ok: false, code: outcome.code, message: outcome.message, ...time };
}

export function revoked(generation: number): Refusal {
  return { ok: false, code: "revoked", message: `revoked: the policy changed to generation ${generation} while this op ran; its result is withheld` };
}
