import type { StoredEvent } from "../journal/events.js";

/**
 * An agent's or a workload's session from the journal, as a transcript a
 * person reads: what you said, what the model said and which tools it called
 * with what, what Vak decided (refusals marked), and what came back. The
 * journal keeps a digest and the size of each tool's output, not the output,
 * so a result is shown as that.
 *
 * Pure: events in, lines out. Every value in these lines was chosen by a model,
 * a command or a file; each is redacted (the caller's redact) before it is cut
 * to the lengths here, which bound what one event can print (cut first, a
 * credential across the cut would show in part), and the caller neutralises
 * each line before it reaches a terminal.
 * A hostile value's own line breaks continue under MARGIN, which no line of
 * the transcript's own starts with, so a model cannot draw a line that passes
 * for one of Vak's.
 */
export const MARGIN = "│ ";
const TEXT_MAX = 2000;
const ARGS_MAX = 300;
const REASON_MAX = 400;

type P = Record<string, unknown>;

/** The cutters of hostile text, each value redacted whole before it is cut. */
function cutters(redact: (s: string) => string) {
  const clip = (raw: string, n: number): string => {
    const s = redact(raw);
    return s.length > n ? `${s.slice(0, n)}… (+${s.length - n} characters; \`vak journal export\` has them all)` : s;
  };
  return {
    /** A hostile text as lines under a label: its first line after the label, the rest under the margin. */
    block(label: string, text: string, max = TEXT_MAX): string[] {
      const lines = clip(text, max).split(/\r\n|\r|\n/);
      const pad = " ".repeat(label.length);
      return lines.map((l, i) => (i === 0 ? `${label}${l}` : `${pad}${MARGIN}${l}`));
    },
    /** One line of hostile text (args, reasons): line breaks shown, not obeyed. */
    one(v: unknown, max: number): string {
      const s = typeof v === "string" ? v : (JSON.stringify(v) ?? String(v));
      return clip(s.replace(/\r\n|\r|\n/g, " ⏎ "), max);
    },
  };
}

const who = (e: StoredEvent) => (e.actor.component === "agent" || e.actor.component === "harness" || e.actor.component === "host" ? "" : `[${e.actor.component}] `);

/** Is this session one to show as a transcript? Agents and workloads are; exec, mcp and journal maintenance are timelines. */
export function isConversation(kind: string): boolean {
  return kind === "agent" || kind.startsWith("workload:");
}

export function transcript(events: readonly StoredEvent[], redact: (s: string) => string = (s) => s): string[] {
  const { block, one } = cutters(redact);
  const out: string[] = [];
  // The calls of the model's last turn, in order, waiting for their results; and what Vak did about the current one.
  const queue = new Map<string, { name: string; args: unknown }[]>();
  let notes: string[] = [];
  let first = true;
  for (const e of events) {
    const p = e.payload as P;
    const time = e.time.slice(11, 19);
    const indent = "          ";
    switch (e.kind) {
      case "policy.generation": {
        const mode = p.mode ? `mode ${one(p.mode, 40)}` : p.spec ? `spec ${one(p.spec, 200)}` : "";
        const model = p.model ? ` · model ${one(p.model, 100)}` : "";
        const approvals = p.approvals && typeof p.approvals === "object" ? ` · approvals ${Object.entries(p.approvals as P).map(([k, v]) => `${k} ${one(v, 20)}`).join(", ")}` : "";
        out.push(first ? `${time}  policy: ${mode}${model}${approvals}` : `${time}  policy: generation ${p.generation}: ${mode}${p.reason ? ` (${one(p.reason, 200)})` : ""}; what ran under the one before was stopped`);
        first = false;
        break;
      }
      case "message": {
        const c = e.actor.component;
        if (p.role === "user") {
          const label = typeof p.provenance === "object" && p.provenance !== null ? `${time}  ${who(e)}task › ` : `${time}  you › `;
          out.push("", ...block(label, String(p.text ?? "")));
        } else if (p.role === "assistant") {
          if (typeof p.text === "string" && p.text) out.push(...block(`${time}  ${who(e)}model › `, p.text));
          const calls = Array.isArray(p.toolCalls) ? (p.toolCalls as { name?: unknown; args?: unknown }[]) : [];
          queue.set(c, calls.map((x) => ({ name: one(x.name, 80), args: x.args })));
        } else if (p.role === "tool") {
          const call = queue.get(c)?.shift();
          const prov = (p.provenance ?? {}) as P;
          const name = call?.name ?? one(prov.tool, 80);
          out.push(`${indent}${who(e)}▸ ${name} ${call ? one(call.args, ARGS_MAX) : ""}`.trimEnd());
          for (const n of notes) out.push(`${indent}    ${n}`);
          notes = [];
          const size = typeof p.bytes === "number" ? `${p.bytes} bytes` : "";
          const digest = typeof p.sha256 === "string" ? `sha256 ${p.sha256.slice(0, 12)}…` : "";
          const target = prov.target ? ` from ${one(prov.target, 200)}` : "";
          const facts = [size, digest].filter(Boolean).join(", ");
          out.push(`${indent}    ${p.ok ? `✓ returned ${size}${target}${digest ? ` (${digest})` : ""}` : `✗ the model was told it failed${facts ? ` (${facts})` : ""}`}`);
        }
        break;
      }
      case "decision":
        if (p.allowed === false) {
          const where = String(p.path ?? p.target ?? p.asked ?? "");
          // A path rule's reason starts with the path it refused, which this line already names.
          const reason = typeof p.reason === "string" && where && p.reason.startsWith(`${where}: `) ? p.reason.slice(where.length + 2) : p.reason;
          notes.push(`✗ REFUSED ${one(p.op, 40)} ${one(where, 200)}: ${one(reason, REASON_MAX)}`.replace(/ {2,}/g, " "));
        }
        break;
      case "approval.asked":
        notes.push(`? asked you: ${one(p.summary ?? p.op, REASON_MAX)}`);
        break;
      case "approval.answered":
        notes.push(`${p.answer === "deny" ? "✗ NOT APPROVED" : `✓ approved (${one(p.answer, 20)})`}${p.by ? ` by ${one(p.by, 40)}` : ""}${p.reason ? `: ${one(p.reason, REASON_MAX)}` : ""}`);
        break;
      case "approval.voided":
        notes.push(`✗ an answer did not count: ${one(p.reason, REASON_MAX)}`);
        break;
      case "tool.result":
        // A refusal for want of approval is already the answer's note.
        if (p.ok === false && p.code !== "not-approved") notes.push(`✗ ${one(p.code, 40)}: ${one(p.message, REASON_MAX)}`);
        else if (p.data && typeof p.data === "object" && "exitCode" in (p.data as P)) {
          const d = p.data as P;
          notes.push(`exit code ${one(d.exitCode, 20)}${d.timedOut ? ", timed out" : ""}`);
        }
        break;
      case "egress":
        if (p.decision === "denied") notes.push(`✗ REFUSED network ${one(p.method, 20)} ${one(p.asked, 200)}: ${one(p.reason, REASON_MAX)}`);
        break;
      case "mcp.call":
        if (p.decision === "denied") notes.push(`✗ REFUSED MCP ${one(p.server, 80)}/${one(p.tool, 80)}: ${one(p.reason, REASON_MAX)}`);
        break;
      case "model.call":
        if (p.ok === false) out.push(...block(`${time}  ${who(e)}model error: `, one(p.error, REASON_MAX)));
        break;
      case "run.cancelled":
        out.push(`${time}  cancelled: ${one(p.reason, REASON_MAX)}`);
        break;
      case "session.ended":
        out.push("", `── ${one(p.outcome, 200)}`);
        break;
      case "audit.fixed":
        out.push(`${time}  vak audit --fix: ${one(p.check, 80)}: ${one(p.path, 400)} ${one(p.from, 8)} → ${one(p.to, 8)}`);
        break;
      case "session.started": case "op.requested": case "target.resolved": case "worker.spawned": case "worker.exited":
      case "secret.used": case "journal.pruned": case "journal.migrated": case "mcp.result": case "mcp.initialized": case "mcp.tools": case "mcp.dropped":
        break; // in the timeline (--events); the transcript shows what they led to
      default: {
        const unnamed: never = e.kind;
        void unnamed;
      }
    }
  }
  for (const n of notes) out.push(`          ${n}`);
  return out;
}
