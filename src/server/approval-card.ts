import type { ApprovalRequest } from "../approvals/approval-gate.js";
import { canonicalJson, sha256 } from "../approvals/digest.js";
import type { Op } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";
import { label, shown, type TextFilter } from "./browser-text.js";
import type { ApprovalCard, CardDetail } from "./wire.js";

/**
 * An approval request as the browser shows it: the whole op (the full
 * command; for an edit, what it removes and what it puts in, line by line;
 * for a write, the content), every string filtered, and anything past the
 * bound said so. The server checks that the op it shows is the one the digest
 * covers, so what the person approves is what runs.
 */
export function approvalCard(r: ApprovalRequest, filter: TextFilter): ApprovalCard {
  const verified = r.detail !== undefined && digestOf(r.component, r.generation, r.detail) === r.digest;
  return {
    nonce: r.nonce,
    digest: r.digest,
    generation: r.generation,
    component: label(filter, r.component, 200),
    op: label(filter, r.op, 100),
    target: r.target === undefined ? null : label(filter, r.target),
    summary: label(filter, r.summary, 8192),
    scope: label(filter, r.scope, 2048),
    detail: r.detail ? detailOf(r.detail, filter) : { kind: "other", text: shown(filter, r.summary) },
    verified,
  };
}

/** The digest the broker binds a request to (broker.ts, approve()). */
export function digestOf(component: string, generation: number, op: Op): string {
  return sha256(canonicalJson({ component, generation, op }));
}

/** Lines of a text, for a diff: a trailing newline does not make an empty last line. */
function lines(s: string): string[] {
  const l = s.split("\n");
  if (l.length > 1 && l[l.length - 1] === "") l.pop();
  return l;
}

export function detailOf(op: Op, filter: TextFilter): CardDetail {
  switch (op.kind) {
    case "edit": {
      const old = shown(filter, op.old);
      const neu = shown(filter, op.new);
      return {
        kind: "edit", path: label(filter, op.path), replaceAll: op.replaceAll ?? false, old, new: neu,
        diff: [...lines(old.text).map((text) => ({ sign: "-" as const, text })), ...lines(neu.text).map((text) => ({ sign: "+" as const, text }))],
      };
    }
    case "write": return { kind: "write", path: label(filter, op.path), content: shown(filter, op.content) };
    case "exec": return { kind: "exec", command: shown(filter, op.command) };
    case "tool": return { kind: "other", text: shown(filter, `input: ${op.input}`) };
    case "mcp": return { kind: "other", text: shown(filter, `call ${op.tool} of the MCP server ${op.server} with arguments:\n${JSON.stringify(op.arguments, null, 2)}`) };
    case "fetch": return { kind: "other", text: shown(filter, `fetch ${op.url}`) };
    case "read": case "list": case "glob": case "grep": return { kind: "other", text: shown(filter, JSON.stringify(op)) };
    default: return unhandled(op, "op kind");
  }
}
