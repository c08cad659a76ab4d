import type { StoredEvent } from "../journal/events.js";
import { unhandled } from "../protocol/unhandled.js";
import { label, safeValue, shown, type TextFilter } from "./browser-text.js";
import type { EventView, TranscriptItem } from "./wire.js";

/**
 * The journal as the browser shows it: every event of a session, each with a
 * line for a person and a flag on refusals (a denial, a refused or failed
 * call, a denied or voided approval, a cancelled run, a sandbox that refused
 * something), payloads filtered like everything else. The journal redacted
 * them when it wrote them; they are filtered again here with the host's
 * current redactor, which may know secrets the writer did not.
 */
export function isRefusal(e: StoredEvent): boolean {
  const p = e.payload as Record<string, unknown>;
  const kind = e.kind;
  switch (kind) {
    case "decision": return p.allowed === false;
    case "tool.result": return p.ok === false;
    case "egress": return p.decision === "denied";
    case "approval.answered": return p.answer === "deny";
    case "approval.voided": case "run.cancelled": return true;
    case "worker.exited": return Array.isArray(p.denied) && p.denied.length > 0;
    case "model.call": return p.ok === false;
    case "mcp.call": return p.decision === "denied";
    case "mcp.result": return p.ok === false;
    case "mcp.tools": return Array.isArray(p.withheld) && p.withheld.length > 0;
    case "mcp.dropped": return true;
    case "mcp.initialized": return false;
    case "session.started": case "session.ended": case "policy.generation": case "op.requested": case "target.resolved":
    case "approval.asked": case "worker.spawned": case "secret.used": case "message": case "journal.pruned": case "audit.fixed":
    case "journal.migrated":
      return false;
    default: return unhandled(kind, "journal event kind");
  }
}

const s = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v) ?? "");

/** One line per event, for a person (the payload goes along for the detail). */
export function eventLine(e: StoredEvent): string {
  const p = e.payload as Record<string, unknown>;
  const kind = e.kind;
  switch (kind) {
    case "session.started": return `${s(p.kind)}: ${s(p.title)}`;
    case "session.ended": return s(p.outcome);
    case "policy.generation": return `generation ${s(p.generation)}${p.mode ? `: ${s(p.mode)}` : ""}${p.reason ? ` (${s(p.reason)})` : ""}`;
    case "run.cancelled": return s(p.reason);
    case "op.requested": return `${s(p.op)} ${s(p.args)}`;
    case "decision": return `${p.allowed ? "allowed" : "DENIED"} ${s(p.op)}${p.target ? ` ${s(p.target)}` : ""}: ${s(p.reason)}`;
    case "target.resolved": return `${s(p.asked)} → ${s(p.resolved)}`;
    case "approval.asked": return `asked: ${s(p.summary)}`;
    case "approval.answered": return `${s(p.answer)} by ${s(p.by)}${p.reason ? ` (${s(p.reason)})` : ""}`;
    case "approval.voided": return `voided: ${s(p.reason)}`;
    case "worker.spawned": return `${s(p.sandbox)} sandbox for ${s(p.op ?? p.command)}`;
    case "worker.exited": return `exit ${s(p.code)}${Array.isArray(p.denied) && p.denied.length ? `; refused: ${p.denied.map(s).join("; ")}` : ""}`;
    case "egress": return `${p.decision === "denied" ? "DENIED" : "allowed"} ${s(p.method)} ${s(p.asked)}: ${s(p.reason)}`;
    case "model.call": return `${s(p.provider)}:${s(p.model)} ${p.ok === false ? `failed: ${s(p.error)}` : `${s(p.ms)} ms`}`;
    case "secret.used": return `${s(p.name)} → ${s(p.recipient)}`;
    case "tool.result": return `${s(p.op)} ${p.ok ? `ok, ${s(p.bytes)} bytes` : `refused (${s(p.code)}): ${s(p.message)}`}`;
    case "message": {
      if (p.role === "tool") {
        const prov = (p.provenance ?? {}) as { tool?: unknown; target?: unknown };
        return `tool result from ${s(prov.tool)}${prov.target ? ` (${s(prov.target)})` : ""}: ${p.ok ? "ok" : "refused"}, ${s(p.bytes)} bytes, untrusted`;
      }
      const calls = Array.isArray(p.toolCalls) && p.toolCalls.length ? ` [calls ${(p.toolCalls as { name?: unknown }[]).map((c) => s(c.name)).join(", ")}]` : "";
      return `${s(p.role)}${typeof p.text === "string" && p.text ? `: ${p.text}` : ""}${calls}`;
    }
    case "journal.pruned": return `pruned ${s(p.events)} events before ${s(p.before)}`;
    case "journal.migrated": return `${s(p.events)} events of ${s(p.sessions)} sessions copied in from ${s(p.from)}`;
    case "mcp.call": return `${p.decision === "denied" ? "DENIED" : "allowed"} ${s(p.server)} ${s(p.tool)} ${s(p.arguments)}${p.reason ? `: ${s(p.reason)}` : ""}`;
    case "mcp.result": return `${s(p.server)} ${s(p.tool)} ${p.ok ? "ok" : `error${p.error ? `: ${s(p.error)}` : ""}`}${p.bytes !== undefined ? `, ${s(p.bytes)} bytes` : ""}`;
    case "mcp.initialized": return `${s(p.client)} ↔ ${s(p.server)}`;
    case "mcp.tools": return `${s(p.server)}: ${Array.isArray(p.listed) ? p.listed.length : 0} tools listed, ${Array.isArray(p.withheld) ? p.withheld.length : 0} withheld`;
    case "mcp.dropped": return `dropped from the ${s(p.from)}: ${s(p.problem)}`;
    case "audit.fixed": return `vak audit --fix: ${s(p.check)}: ${s(p.path)} ${s(p.from)} → ${s(p.to)}`;
    default: return unhandled(kind, "journal event kind");
  }
}

export function eventView(e: StoredEvent, filter: TextFilter): EventView {
  return {
    seq: e.seq, session: e.session, sessionSeq: e.sessionSeq, time: e.time, kind: e.kind,
    component: label(filter, e.actor.component, 200), generation: e.generation,
    line: label(filter, eventLine(e), 2000), refusal: isRefusal(e), payload: safeValue(filter, e.payload),
  };
}

/** A session that is not live, as a transcript rebuilt from its recorded messages (tool results are kept as a size and digest). */
export function transcriptFromJournal(events: readonly StoredEvent[], filter: TextFilter): TranscriptItem[] {
  const out: TranscriptItem[] = [];
  let seq = 0;
  const add = (i: TranscriptItem extends infer T ? (T extends TranscriptItem ? Omit<T, "seq"> : never) : never) => out.push({ ...i, seq: ++seq } as TranscriptItem);
  for (const e of events) {
    if (e.kind !== "message") continue;
    const p = e.payload as { role?: unknown; text?: unknown; toolCalls?: unknown; provenance?: unknown; ok?: unknown; bytes?: unknown; sha256?: unknown };
    const component = label(filter, e.actor.component, 200);
    if (p.role === "user") add({ type: "user", text: shown(filter, s(p.text)), by: "the record" });
    else if (p.role === "assistant") {
      if (typeof p.text === "string" && p.text) add({ type: "text", component, text: shown(filter, p.text) });
      for (const c of Array.isArray(p.toolCalls) ? (p.toolCalls as { name?: unknown; args?: unknown }[]) : [])
        add({ type: "tool-call", component, name: label(filter, s(c.name), 200), args: shown(filter, s(c.args)) });
    } else if (p.role === "tool") {
      const prov = (p.provenance ?? {}) as { tool?: unknown; target?: unknown };
      add({
        type: "tool-result", component, name: label(filter, s(prov.tool), 200), ok: p.ok === true, code: null,
        target: prov.target ? label(filter, s(prov.target)) : null,
        text: shown(filter, `(the journal keeps a result's size and digest, not its content: ${s(p.bytes)} bytes, sha256 ${s(p.sha256)})`),
      });
    }
  }
  return out;
}
