import type { StoredEvent } from "../journal/events.js";
import type { Journal, SessionFilter, SessionInfo } from "../journal/journal.js";
import { openJournal } from "../journal/open.js";
import { VakError } from "../policy/errors.js";
import { parseDuration, UnitError } from "../policy/units.js";
import { Redactor } from "../secrets/redact.js";
import { visible } from "../text/visible.js";
import { isConversation, transcript } from "./journal-transcript.js";
import { clipped, fmt, own, padded, processOutput, type Text } from "./output.js";

// What the journal holds was chosen by models, files, commands and servers: every value is printed through the output's neutraliser.
const out = (t: Text) => processOutput().out.line(t);
const json = (v: unknown) => processOutput().out.json(v);
/** Shapes of credentials a record may still hold from before they were known (a spooled run's, a command's output). */
const redactor = new Redactor();
/**
 * A line journal-transcript.ts made (its labels Vak's, hostile text after
 * them or under its margin): redacted and neutralised here, then printed as
 * a line another module made safe (Output.relayed).
 */
export const relay = (l: string) => processOutput().out.relayed(visible(redactor.text(l)));

/** At most n characters of a record's JSON, saying how many more there are. */
function clippedJson(v: unknown, n = 200): Text {
  return clipped(JSON.stringify(v) ?? "", n);
}

/**
 * Bounds for one value in a line of a view: a command line, a path or a host
 * can be as long as the command made it (a title of 1 MB made `vak journal
 * list` print 1 MB a session). `vak journal export` has every value whole.
 */
const TITLE_MAX = 200;
const VALUE_MAX = 500;
const v = (x: unknown, n = VALUE_MAX) => clipped(x, n);

/** The journal the user's config names ([journal] url for PostgreSQL), or VAK_JOURNAL's SQLite file. */
export function open(): Promise<Journal> {
  const path = process.env.VAK_JOURNAL;
  return openJournal(path ? { path } : {});
}

async function withJournal(body: (j: Journal) => Promise<number>): Promise<number> {
  const j = await open();
  try {
    return await body(j);
  } finally {
    await j.close();
  }
}

const CANDIDATES = 10;

/** A session by id, by the start of one, or "last"; an id that several sessions start with is refused with them. */
export async function sessionOf(j: Journal, id: string): Promise<SessionInfo> {
  if (id === "last") {
    const [newest] = await j.sessions({ limit: 1 });
    if (!newest) throw new VakError("bad-input", "the journal holds no sessions yet");
    return newest;
  }
  const found = /^[0-9a-z-]+$/.test(id) ? await j.sessions({ idPrefix: id }) : [];
  const exact = found.find((s) => s.id === id);
  if (exact) return exact;
  if (found.length === 1) return found[0]!;
  if (!found.length) throw new VakError("bad-input", `no session ${visible(id)} in the journal; \`vak journal list\` shows them (\`last\` is the newest)`);
  const shown = found.slice(-CANDIDATES).map((s) => `  ${listLine(s, false)}`);
  const more = found.length > CANDIDATES ? `\n  … and ${found.length - CANDIDATES} older` : "";
  throw new VakError("bad-input", `${found.length} sessions start with ${visible(id)}; give more of the id:\n${shown.map((l) => visible(redactor.text(l))).join("\n")}${more}`);
}

/** A title cut to TITLE_MAX characters once redacted (cut before, a credential across the cut would show in part). */
function shortTitle(title: string): string {
  const t = redactor.text(title);
  return t.length > TITLE_MAX ? `${t.slice(0, TITLE_MAX)}… (+${t.length - TITLE_MAX} characters)` : t;
}

/** One session a line; with hosts (a PostgreSQL journal many hosts share), the host that ran it. */
function listLine(s: SessionInfo, hosts: boolean): string {
  return `${s.id}  ${s.started.replace("T", " ").slice(0, 19)}  ${hosts ? `${(s.host ?? "").slice(0, 20).padEnd(20)} ` : ""}${s.kind.padEnd(7)} ${String(s.events).padStart(5)} events  ${(s.outcome ?? "(not ended)").padEnd(10)} ${shortTitle(s.title)}`;
}

/**
 * A time for --since, --until and --before: an age (2h, 30m, 7d, 1h30m: that
 * long ago), a date (2026-01-31, in UTC; as --until, the end of that day), or
 * an ISO time.
 */
export function parseWhen(text: string, flag: string, opts: { endOfDay?: boolean; now?: number } = {}): Date {
  const now = opts.now ?? Date.now();
  if (/^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/.test(text)) {
    try {
      return new Date(now - parseDuration(text));
    } catch (e) {
      if (!(e instanceof UnitError)) throw e;
      throw new VakError("bad-input", `${flag} ${visible(text)}: ${e.message}`);
    }
  }
  const d = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(d.getTime()))
    throw new VakError("bad-input", `${flag} ${visible(text)}: not an age (2h, 30m, 7d), a date (2026-01-31) or an ISO time (2026-01-31T12:00:00Z)`);
  return /^\d{4}-\d{2}-\d{2}$/.test(text) && opts.endOfDay ? new Date(d.getTime() + 86_400_000 - 1) : d;
}

export interface ListOptions {
  json?: boolean;
  limit?: number;
  kind?: string;
  since?: string;
  until?: string;
}

export function filterOf(opts: ListOptions): SessionFilter {
  const since = opts.since ? parseWhen(opts.since, "--since") : undefined;
  const until = opts.until ? parseWhen(opts.until, "--until", { endOfDay: true }) : undefined;
  if (since && until && since > until) throw new VakError("bad-input", `--since ${visible(opts.since!)} is after --until ${visible(opts.until!)}: nothing can be in between`);
  return { kind: opts.kind, since: since?.toISOString(), until: until?.toISOString(), limit: opts.limit };
}

export function journalList(opts: ListOptions): Promise<number> {
  const filter = filterOf(opts);
  return withJournal(async (j) => {
    const sessions = await j.sessions(filter);
    if (opts.json) return json(sessions), 0;
    const filtered = Boolean(filter.kind || filter.since || filter.until);
    if (!sessions.length) return out(own(filtered ? "no session in the journal matches" : "the journal holds no sessions yet")), 0;
    const hosts = new Set(sessions.map((s) => s.host)).size > 1;
    for (const s of sessions)
      out(fmt`${own(s.id)}  ${s.started.replace("T", " ").slice(0, 19)}  ${hosts ? fmt`${padded((s.host ?? "").slice(0, 20), 20)} ` : ""}${padded(s.kind, 7)} ${own(String(s.events).padStart(5))} events  ${padded(s.outcome ?? "(not ended)", 10)} ${v(s.title, TITLE_MAX)}`);
    if (opts.limit && sessions.length === opts.limit) {
      const all = (await j.sessions({ ...filter, limit: undefined })).length;
      if (all > sessions.length) out(own(`(the newest ${sessions.length} of ${all}; --limit ${all} shows them all)`));
    }
    return 0;
  });
}

/** The limits worker.exited says ended (or cut into) a run: "; stopped by --max-cpu 1". */
function limitsText(hits: unknown): string {
  if (!Array.isArray(hits) || !hits.length) return "";
  return hits.map((h: { flag?: unknown; value?: unknown; ended?: unknown; what?: unknown }) => `; ${h.ended ? "stopped by" : "hit"} ${String(h.flag)} ${String(h.value)}: ${String(h.what)}`).join("");
}

/**
 * An egress event's line. An allowed request is recorded twice, when it is allowed and when it ends: the second
 * says how it ended (outcome, status, bytes), else the two lines read the same. Secrets by reference only.
 */
function egressText(p: Record<string, unknown>): Text {
  const refs = (label: string, x: unknown) => (Array.isArray(x) && x.length ? fmt`; ${own(label)} ${v(x.join(", "))}` : own(""));
  const head = fmt`${v(p.method, 40)} ${v(p.asked)}${p.address ? fmt` → ${v(p.address)}` : ""}`;
  if (p.decision === "denied") return fmt`${own("DENIED")} ${head}: ${v(p.reason)}`;
  if (p.outcome === undefined) return fmt`${own("allowed")} ${head}: ${v(p.reason)}${p.tls === "spliced" || p.tls === "terminated" ? own(` (TLS ${p.tls})`) : ""}${refs("secrets", p.secrets)}${refs("withheld", p.withheld)}`;
  const status = p.status === undefined ? own("") : fmt`, status ${v(p.status, 40)}`;
  const reflected = typeof p.reflected === "number" && p.reflected > 0 ? fmt`; ${p.reflected} reflected secret value(s) replaced` : own("");
  return fmt`${own("ended")} ${head}: ${v(p.outcome)}${status}, ${v(p.bytesUp ?? 0, 40)} bytes up, ${v(p.bytesDown ?? 0, 40)} down${reflected}`;
}

/** One line per event, for people; every value in it is hostile until printed through the output. */
export function describe(e: StoredEvent): Text {
  const p = e.payload as Record<string, unknown>;
  const who = e.actor.component + (e.generation ? `@g${e.generation}` : "");
  const time = e.time.slice(11, 23);
  const detail = (() => {
    const kind = e.kind;
    switch (kind) {
      case "session.started": return fmt`${v(p.kind, 40)}: ${v(p.title, TITLE_MAX)}`;
      case "session.ended": return fmt`${v(p.outcome)}`;
      case "decision": return fmt`${own(p.allowed ? "allowed" : "DENIED")} ${v(p.op, 40)} ${v(p.path ?? p.target ?? "")}: ${v(p.reason)}`;
      case "egress": return egressText(p);
      case "worker.spawned": return fmt`${v(p.sandbox, 40)} ${v(Array.isArray(p.command) ? (p.command as string[]).join(" ") : "", TITLE_MAX)}`;
      case "worker.exited": return fmt`exit ${p.code}${own(p.timedOut ? " (timed out)" : "")}${p.error ? fmt`: ${v(p.error)}` : ""}${v(limitsText(p.limitsHit))}`;
      case "policy.generation": return fmt`generation ${v(p.generation, 40)}: ${v(p.mode ?? "", 40)}`;
      case "run.cancelled": case "op.requested": case "target.resolved": case "approval.asked": case "approval.answered": case "approval.voided":
      case "model.call": case "secret.used": case "tool.result": case "message": case "journal.pruned": case "mcp.initialized":
      case "journal.migrated":
        return clippedJson(p);
      case "mcp.call": return fmt`${own(p.decision === "denied" ? "DENIED" : "allowed")} #${v(p.call, 40)} ${v(p.tool, 200)} ${clippedJson(p.arguments, 120)}${p.reason ? fmt`: ${v(p.reason)}` : ""}`;
      case "mcp.result": return fmt`#${v(p.call, 40)} ${v(p.tool, 200)} ${p.ok ? "ok" : fmt`error${p.error ? fmt`: ${v(p.error)}` : ""}`}${p.bytes !== undefined ? fmt`, ${v(p.bytes, 40)} bytes in ${v(p.durationMs, 40)} ms` : ""}`;
      case "mcp.tools": return fmt`listed ${(p.listed as unknown[]).length}; withheld ${v((p.withheld as { tool: string; why: string }[]).map((w) => `${w.tool} (${w.why})`).join(", ") || "none")}`;
      case "mcp.dropped": return fmt`from the ${v(p.from, 40)}: ${v(p.problem)}`;
      case "audit.fixed": return fmt`${v(p.check, 100)}: ${v(p.path)} ${v(p.from, 40)} → ${v(p.to, 40)}`;
      default: {
        // Every kind is named above, so a new kind does not compile until it has its line; a row from a newer Vak still shows.
        const unnamed: never = kind;
        return clippedJson(p ?? unnamed);
      }
    }
  })();
  return fmt`${own(String(e.sessionSeq).padStart(4))} ${time} ${padded(e.kind.slice(0, 40), 17)} ${padded(who.slice(0, 100), 12)} ${detail}`;
}

export function journalShow(id: string, opts: { json?: boolean; events?: boolean }): Promise<number> {
  return withJournal(async (j) => {
    const s = await sessionOf(j, id);
    const events = await j.events(s.id);
    if (opts.json) return json({ session: s, events }), 0;
    out(fmt`session ${own(s.id)} (${v(s.kind, 40)}) started ${s.started}${s.host ? fmt` on ${v(s.host, 100)}` : ""}${s.workspace ? fmt` in ${v(s.workspace)}` : ""}: ${v(s.title, TITLE_MAX)}`);
    if (isConversation(s.kind) && !opts.events) {
      for (const l of transcript(events, (t) => redactor.text(t))) relay(l);
      out(own(`(every event: vak journal show ${s.id} --events)`));
    } else for (const e of events) out(describe(e));
    return 0;
  });
}

export function journalExport(id: string): Promise<number> {
  return withJournal(async (j) => {
    for (const e of await j.events((await sessionOf(j, id)).id)) json(e);
    return 0;
  });
}

export function journalSearch(query: string, opts: { json?: boolean; session?: string }): Promise<number> {
  return withJournal(async (j) => {
    const hits = await j.search(query, opts.session ? { session: (await sessionOf(j, opts.session)).id } : {});
    if (opts.json) return json(hits), 0;
    if (!hits.length) out(fmt`nothing in the journal matches ${JSON.stringify(query)}`);
    for (const e of hits) out(fmt`${own(e.session)}  ${describe(e)}`);
    return 0;
  });
}

export function journalIngest(): Promise<number> {
  // Opening the journal takes every waiting run in.
  return withJournal(async () => 0);
}

export function journalVerify(opts: { json?: boolean }): Promise<number> {
  return withJournal(async (j) => {
    const v = await j.verify();
    if (opts.json) json(v);
    else if (v.ok) out(fmt`the journal verifies: ${v.events} events${own(v.chains > 1 ? ` on ${v.chains} chains (one per session)` : "")}, head ${v.head}`);
    else out(fmt`the journal is BROKEN at event ${v.seq}${v.session ? fmt` (session ${v.session}${v.sessionSeq ? fmt`, #${v.sessionSeq}` : ""})` : ""}: ${v.problem}`);
    return v.ok ? 0 : 1;
  });
}

export async function journalPrune(opts: { before?: string }): Promise<number> {
  let before: Date;
  if (opts.before) before = parseWhen(opts.before, "--before");
  else {
    const { loadUserConfig } = await import("../policy/config.js");
    const days = loadUserConfig().journal.retention_days;
    if (!days) throw new VakError("bad-input", "no retention is configured: pass --before DATE, or set [journal] retention_days in ~/.config/vak/config.toml");
    before = new Date(Date.now() - days * 86_400_000);
  }
  return withJournal(async (j) => {
    const r = await j.prune(before);
    out(own(r.events ? `pruned ${r.events} events (${r.sessions} whole sessions) older than ${before.toISOString()}; recorded in the journal` : `nothing is older than ${before.toISOString()}`));
    return 0;
  });
}
