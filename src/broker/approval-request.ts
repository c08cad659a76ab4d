import { createHash } from "node:crypto";
import type { ApprovalGate, ApprovalRequest } from "../approvals/approval-gate.js";
import { capabilityOf, opDigest, scopeOf, summarizeOp } from "../approvals/approval-rules.js";
import type { EventKind } from "../journal/events.js";
import { type Refusal, revoked } from "./op-record.js";
import type { ApprovalView } from "../approvals/approval-view.js";
import { planEdit } from "../protocol/edit-op.js";
import type { Op } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";
import type { WorkerOutcome } from "./worker-process.js";

/** Reads a file the op is about to change, in a read-only worker under the same grants (never by the host itself). */
export type ReadCurrent = (path: string, signal?: AbortSignal) => Promise<WorkerOutcome>;

const digestOf = (s: string) => createHash("sha256").update(s).digest("hex");

/** The file as it is now, for a diff: its text, null when it does not exist, or why it cannot be compared. */
async function current(path: string, read: ReadCurrent, signal?: AbortSignal): Promise<{ text: string | null; note?: string }> {
  const r = await read(path, signal);
  if (!r.ok) return r.code === "not-found" ? { text: null } : { text: null, note: `the file as it is now could not be read (${r.code})` };
  const d = r.data as { binary?: boolean; more?: boolean } | undefined;
  if (d?.binary) return { text: null, note: "the file is binary now" };
  if (r.truncated || d?.more) return { text: null, note: "the file is larger than Vak compares" };
  return { text: r.output };
}

/**
 * The request an approval gate opens for an allowed op: bound to the op's
 * digest, with a one-line summary for the record, the exact scope of "allow
 * for this session", and the whole op as a view (for a write or an edit, a
 * diff against the file as it is now).
 */
export async function approvalRequest(op: Op, target: string | undefined, component: string, generation: number, read: ReadCurrent, signal?: AbortSignal): Promise<Omit<ApprovalRequest, "nonce"> & { base?: string | null }> {
  const base = { digest: opDigest(component, generation, op), generation, component, summary: summarizeOp(op, target), op: op.kind, target, scope: scopeOf(op, target), detail: op };
  let view: ApprovalView;
  let shown: Record<string, unknown> | undefined;
  /** The file as the diff shows it (its text's digest, null for none), which the write must still find; unset when no text was compared. */
  let fileBase: string | null | undefined;
  switch (op.kind) {
    case "exec": view = { kind: "command", command: op.command }; break;
    case "tool": view = { kind: "tool", command: target ?? "the component's command", input: op.input }; break;
    case "mcp": view = { kind: "tool", command: `the tool ${op.tool} of the MCP server ${op.server}`, input: JSON.stringify(op.arguments, null, 2) ?? "{}" }; break;
    case "write": case "edit": {
      const now = await current(op.path, read, signal);
      shown = { current: now.text === null ? (now.note ?? "does not exist") : { bytes: Buffer.byteLength(now.text), sha256: digestOf(now.text) } };
      fileBase = now.text !== null ? digestOf(now.text) : now.note === undefined ? null : undefined;
      if (op.kind === "write") view = { kind: "file", path: op.path, before: now.text, after: op.content, note: now.note };
      else if (now.text === null)
        view = { kind: "text", text: `replace${op.replaceAll ? " every occurrence of" : ""}:\n${op.old}\nwith:\n${op.new}\n(${now.note ?? "the file does not exist"}; the edit will fail unless that changes)` };
      else {
        const plan = planEdit(now.text, op, op.path);
        view = plan.ok
          ? { kind: "file", path: op.path, before: now.text, after: plan.text }
          : { kind: "text", text: `replace${op.replaceAll ? " every occurrence of" : ""}:\n${op.old}\nwith:\n${op.new}\n(as the file is now, the edit would fail: ${plan.message})` };
      }
      break;
    }
    case "fetch": view = { kind: "text", text: `fetch ${op.url}` }; break;
    case "read": case "list": case "glob": case "grep": view = { kind: "text", text: summarizeOp(op, target) }; break;
    default: return unhandled(op, "op kind");
  }
  return { ...base, view, shown, ...(fileBase !== undefined ? { base: fileBase } : {}) };
}

/**
 * One broker's asking: an allowed op the rules ask about goes to the gate as
 * a request (above); "allow for this session" is remembered as the op's exact
 * capability (capabilityOf) until forget(), which a policy change calls.
 */
export class OpApprovals {
  private readonly allowances = new Set<string>();

  constructor(
    private readonly gate: ApprovalGate,
    private readonly component: string,
    private readonly generation: () => number,
    private readonly record: (kind: EventKind, payload: Record<string, unknown>) => Promise<unknown>,
    private readonly read: ReadCurrent,
  ) {}

  /**
   * Asks about an allowed op; returns the refusal if it is not approved, else what the file must still be when
   * a write or an edit runs (the base the person's diff was made from; none for one allowed for the session).
   */
  async approve(op: Op, target: string | undefined, generation: number, signal?: AbortSignal): Promise<Refusal | { ok: true; base?: string | null }> {
    const capability = capabilityOf(op, target);
    let fileBase: string | null | undefined;
    if (!this.allowances.has(capability)) {
      const { base: shownBase, ...request } = await approvalRequest(op, target, this.component, generation, this.read, signal);
      fileBase = shownBase;
      const outcome = await this.gate.ask(request, signal);
      if (outcome.answer === "deny")
        return { ok: false, code: "not-approved", message: `not approved (${"reason" in outcome ? outcome.reason : `denied by ${outcome.by}`}): ${request.summary}` };
      if (outcome.answer === "allow-session" && generation === this.generation()) this.allowances.add(capability);
    } else await this.record("decision", { op: op.kind, allowed: true, reason: "approved earlier for this session (this exact capability)", target });
    if (generation !== this.generation()) return revoked(this.generation());
    return fileBase === undefined ? { ok: true } : { ok: true, base: fileBase };
  }

  forget(): void {
    this.allowances.clear();
  }
}
