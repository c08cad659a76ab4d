import type { StoredEvent } from "../journal/events.js";
import { Journal } from "../journal/journal.js";
import { VakError } from "../policy/errors.js";
import { visible } from "./visible.js";

const out = (s: string) => process.stdout.write(`${s}\n`);
/** A line for a person: payloads hold what models, commands and servers chose, so control and invisible characters are shown as escapes. */
const show = (s: string) => out(visible(s));

function open(): Journal {
  return Journal.open({ path: process.env.VAK_JOURNAL || undefined });
}

function sessionOf(j: Journal, id: string) {
  const s = j.session(id);
  if (!s) throw new VakError("bad-input", `no session ${id} in the journal; \`vak journal list\` shows them`);
  return s;
}

export function journalList(opts: { json?: boolean }): number {
  const j = open();
  try {
    const sessions = j.sessions();
    if (opts.json) return out(JSON.stringify(sessions)), 0;
    if (!sessions.length) return show("the journal holds no sessions yet"), 0;
    for (const s of sessions)
      show(`${s.id}  ${s.started.replace("T", " ").slice(0, 19)}  ${s.kind.padEnd(7)} ${String(s.events).padStart(5)} events  ${(s.outcome ?? "(not ended)").padEnd(10)} ${s.title}`);
    return 0;
  } finally {
    j.close();
  }
}

/** One line per event, for people. */
export function describe(e: StoredEvent): string {
  const p = e.payload as Record<string, unknown>;
  const who = e.actor.component + (e.generation ? `@g${e.generation}` : "");
  const time = e.time.slice(11, 23);
  const detail = (() => {
    const kind = e.kind;
    switch (kind) {
      case "session.started": return `${p.kind}: ${p.title}`;
      case "session.ended": return `${p.outcome}`;
      case "decision": return `${p.allowed ? "allowed" : "DENIED"} ${p.op} ${p.path ?? p.target ?? ""}: ${p.reason}`;
      case "egress": return `${p.decision === "denied" ? "DENIED" : "allowed"} ${p.method} ${p.asked}${p.address ? ` → ${p.address}` : ""}: ${p.reason}`;
      case "worker.spawned": return `${p.sandbox} ${Array.isArray(p.command) ? (p.command as string[]).join(" ") : ""}`;
      case "worker.exited": return `exit ${p.code}${p.timedOut ? " (timed out)" : ""}${p.error ? `: ${p.error}` : ""}`;
      case "policy.generation": return `generation ${p.generation}: ${p.mode ?? ""}`;
      case "run.cancelled": case "op.requested": case "target.resolved": case "approval.asked": case "approval.answered": case "approval.voided":
      case "model.call": case "secret.used": case "tool.result": case "message": case "journal.pruned": case "mcp.initialized":
        return JSON.stringify(p).slice(0, 200);
      case "mcp.call": return `${p.decision === "denied" ? "DENIED" : "allowed"} #${p.call} ${p.tool} ${JSON.stringify(p.arguments).slice(0, 120)}${p.reason ? `: ${p.reason}` : ""}`;
      case "mcp.result": return `#${p.call} ${p.tool} ${p.ok ? "ok" : `error${p.error ? `: ${p.error}` : ""}`}${p.bytes !== undefined ? `, ${p.bytes} bytes in ${p.durationMs} ms` : ""}`;
      case "mcp.tools": return `listed ${(p.listed as unknown[]).length}; withheld ${(p.withheld as { tool: string; why: string }[]).map((w) => `${w.tool} (${w.why})`).join(", ") || "none"}`;
      case "mcp.dropped": return `from the ${p.from}: ${p.problem}`;
      default: {
        // Every kind is named above, so a new kind does not compile until it has its line; a row from a newer Vak still shows.
        const unnamed: never = kind;
        return JSON.stringify(p ?? unnamed).slice(0, 200);
      }
    }
  })();
  return `${String(e.sessionSeq).padStart(4)} ${time} ${e.kind.padEnd(17)} ${who.padEnd(12)} ${detail}`;
}

export function journalShow(id: string, opts: { json?: boolean }): number {
  const j = open();
  try {
    const s = sessionOf(j, id);
    const events = j.events(s.id);
    if (opts.json) return out(JSON.stringify({ session: s, events })), 0;
    show(`session ${s.id} (${s.kind}) started ${s.started}${s.workspace ? ` in ${s.workspace}` : ""}: ${s.title}`);
    for (const e of events) show(describe(e));
    return 0;
  } finally {
    j.close();
  }
}

export function journalExport(id: string): number {
  const j = open();
  try {
    for (const e of j.events(sessionOf(j, id).id)) out(JSON.stringify(e));
    return 0;
  } finally {
    j.close();
  }
}

export function journalSearch(query: string, opts: { json?: boolean; session?: string }): number {
  const j = open();
  try {
    const hits = j.search(query, opts.session ? { session: sessionOf(j, opts.session).id } : {});
    if (opts.json) return out(JSON.stringify(hits)), 0;
    if (!hits.length) show(`nothing in the journal matches ${JSON.stringify(query)}`);
    for (const e of hits) show(`${e.session}  ${describe(e)}`);
    return 0;
  } finally {
    j.close();
  }
}

export function journalIngest(): number {
  // Journal.open takes every waiting run in.
  open().close();
  return 0;
}

export function journalVerify(opts: { json?: boolean }): number {
  const j = open();
  try {
    const v = j.verify();
    if (opts.json) out(JSON.stringify(v));
    else if (v.ok) show(`the journal verifies: ${v.events} events, head ${v.head}`);
    else show(`the journal is BROKEN at event ${v.seq}${v.session ? ` (session ${v.session}, #${v.sessionSeq})` : ""}: ${v.problem}`);
    return v.ok ? 0 : 1;
  } finally {
    j.close();
  }
}

/** "2026-01-31", an ISO time, or an age such as "30d" or "12h". */
export function parseBefore(text: string, now = Date.now()): Date {
  const age = /^(\d+)([dhm])$/.exec(text);
  if (age) return new Date(now - Number(age[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[age[2] as "d" | "h" | "m"]);
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) throw new VakError("bad-input", `--before ${text}: not a date (2026-01-31), a time, or an age (30d, 12h)`);
  return d;
}

export async function journalPrune(opts: { before?: string }): Promise<number> {
  let before: Date;
  if (opts.before) before = parseBefore(opts.before);
  else {
    const { loadUserConfig } = await import("../policy/config.js");
    const days = loadUserConfig().journal.retention_days;
    if (!days) throw new VakError("bad-input", "no retention is configured: pass --before DATE, or set [journal] retention_days in ~/.config/vak/config.toml");
    before = new Date(Date.now() - days * 86_400_000);
  }
  const j = open();
  try {
    const r = j.prune(before);
    show(r.events ? `pruned ${r.events} events (${r.sessions} whole sessions) older than ${before.toISOString()}; recorded in the journal` : `nothing is older than ${before.toISOString()}`);
    return 0;
  } finally {
    j.close();
  }
}
