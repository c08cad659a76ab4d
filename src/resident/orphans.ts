import { readFileSync } from "node:fs";
import type { Journal } from "../journal/journal.js";
import { SessionWriter } from "../journal/session-writer.js";

/**
 * Runs a resident host served and could not end: the host was killed (kill -9,
 * a crash, a reboot) while their commands ran, and the commands died with it.
 * Each run's session.started names the host that served it (this machine, this
 * boot, the host's pid and its start time); a host that starts closes the
 * sessions of hosts that are certainly gone, on this machine, as ingest closes
 * a dead in-process run's spool: `interrupted`. A host on another machine
 * (PostgreSQL) or one still running is never touched.
 */
export interface ServedBy {
  machine: string;
  boot: string;
  pid: number;
  /** The process's start time (/proc/PID/stat, field 22): a pid reused by another process is not the host. */
  start: string;
}

/** The newest runs looked at as a host starts: a host killed longer ago than that many runs stays open. */
const LOOK_BACK = 200;

function read(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
}

function startTime(pid: number): string {
  const stat = read(`/proc/${pid}/stat`);
  // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ")".
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? "";
}

/** This host, as its runs' records name it. */
export function servedBy(): ServedBy {
  return { machine: read("/etc/machine-id"), boot: read("/proc/sys/kernel/random/boot_id"), pid: process.pid, start: startTime(process.pid) };
}

function gone(by: ServedBy, me: ServedBy): boolean {
  if (!by.machine || by.machine !== me.machine) return false;
  if (by.boot !== me.boot) return true;
  return startTime(by.pid) !== by.start;
}

/** Ends with `interrupted` every open run of a host of this machine that is gone; resolves to how many. */
export async function closeOrphans(journal: Journal, me: ServedBy = servedBy()): Promise<number> {
  let closed = 0;
  for (const s of await journal.sessions({ kind: "exec", limit: LOOK_BACK })) {
    if (s.ended !== null) continue;
    const events = await journal.events(s.id);
    const by = (events[0]?.payload as { servedBy?: ServedBy } | undefined)?.servedBy;
    if (!by || typeof by.pid !== "number" || !gone(by, me)) continue;
    const last = events[events.length - 1]!;
    if (last.kind === "session.ended") continue;
    await new SessionWriter(journal, s.id, last.sessionSeq).end("interrupted: the resident host stopped before the run ended");
    closed += 1;
  }
  return closed;
}
