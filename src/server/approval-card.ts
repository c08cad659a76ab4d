import type { ApprovalRequest } from "../approvals/approval-gate.js";
import { type ApprovalScreen, approvalScreen, FIRST_PAGE, PAGE } from "../approvals/approval-screen.js";
import { canonicalJson, sha256 } from "../approvals/digest.js";
import type { Op } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";
import { label, shown, type TextFilter } from "./browser-text.js";
import type { ApprovalCard, CardDetail, CardView } from "./wire.js";

/**
 * An approval request as the browser shows it: the terminal prompt's own
 * screen (approval-screen.ts: the whole op, paged, the diff against the file
 * as it is now, the scope of "for this session"), every line filtered, and
 * anything past the bound said so. The server checks that the op it shows is the one the digest
 * covers, so what the person approves is what runs.
 */
export function approvalCard(r: ApprovalRequest, filter: TextFilter, redact: (s: string) => string = filter): ApprovalCard {
  const verified = r.detail !== undefined && digestOf(r.component, r.generation, r.detail) === r.digest;
  const screen = approvalScreen(r, redact);
  return {
    nonce: r.nonce,
    digest: r.digest,
    generation: r.generation,
    component: label(filter, r.component, 200),
    op: label(filter, r.op, 100),
    target: r.target === undefined ? null : label(filter, r.target),
    summary: label(filter, r.summary, 8192),
    scope: label(filter, screen.scope, 2048),
    view: cardView(screen, filter),
    detail: r.detail ? detailOf(r.detail, filter) : { kind: "other", text: shown(filter, r.summary) },
    verified,
  };
}

/** The most of a view a card carries; past it the card says so and offers only deny. */
export const MAX_VIEW_BYTES = 1024 * 1024;

/** The terminal's screen for the browser: every line filtered (already exact, so only redaction can change it), bounded as a whole. */
function cardView(screen: ApprovalScreen, filter: TextFilter): CardView {
  const lines: string[] = [];
  let bytes = 0;
  for (const l of screen.lines) {
    const f = filter(l);
    bytes += Buffer.byteLength(f) + 1;
    if (bytes > MAX_VIEW_BYTES) break;
    lines.push(f);
  }
  const chars = screen.lines.reduce((a, l) => a + l.length, 0);
  return { headline: filter(screen.headline), kind: screen.kind, lines, total: screen.lines.length, chars, complete: lines.length === screen.lines.length, firstPage: FIRST_PAGE, page: PAGE };
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
