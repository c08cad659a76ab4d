import type { Limits } from "../policy/limits.js";
import { formatDuration, formatSize } from "../policy/units.js";

/**
 * Which limit ended (or cut into) a `vak exec` run, decided from the plan's
 * limits and what the launcher reported, so that no limit ends a command
 * without a Vak line saying which one, its value, and the flag that raises it.
 * The same facts go into the journal (worker.exited's `limitsHit`).
 *
 * CPU time and file size are rlimits: the kernel stops the process with
 * SIGXCPU or SIGXFSZ, and the only trace is how it ended. A command that is a
 * shell reports a child's death as 128 + the signal, so exit 152 (SIGXCPU) and
 * 153 (SIGXFSZ) count too, but only when that limit was set.
 */
export type LimitName = "timeout" | "output" | "cpu" | "file-size" | "memory" | "procs";

export interface LimitHit {
  limit: LimitName;
  /** The flag that sets it. */
  flag: string;
  /** Its value as the flag takes it ("10s", "50M", "64"). */
  value: string;
  /** Did it end the command (or only refuse something while it ran)? */
  ended: boolean;
  /** What happened, naming the flag and its value: "timed out after 10s", "a process wrote past --max-file-size 10K …". */
  what: string;
}

const SIGXCPU = 24;
const SIGXFSZ = 25;

export interface EndFacts {
  code: number;
  /** The signal that ended the command's own process, when it was one. */
  signal?: number | undefined;
  timedOut: boolean;
  outputExceeded: boolean;
  procsHit: number;
  oomKills: number;
  /** Is memory held by a memory cgroup (which kills) rather than RLIMIT_DATA (which fails allocations)? */
  memoryCgroup: boolean;
}

export function limitsHit(limits: Limits, defaultMaxProcs: number | undefined, f: EndFacts): LimitHit[] {
  const hits: LimitHit[] = [];
  const endedBy = (sig: number) => f.signal === sig || (f.signal === undefined && f.code === 128 + sig);
  if (f.timedOut && limits.timeoutMs) {
    const v = formatDuration(limits.timeoutMs);
    hits.push({ limit: "timeout", flag: "--timeout", value: v, ended: true, what: `timed out after ${v}` });
  }
  if (f.outputExceeded && limits.maxOutputBytes) {
    const v = formatSize(limits.maxOutputBytes);
    hits.push({ limit: "output", flag: "--max-output", value: v, ended: true, what: `output exceeded --max-output ${limits.maxOutputBytes} bytes${v === String(limits.maxOutputBytes) ? "" : ` (${v})`}` });
  }
  if (limits.maxCpuSeconds && endedBy(SIGXCPU))
    hits.push({ limit: "cpu", flag: "--max-cpu", value: String(limits.maxCpuSeconds), ended: true, what: `a process used up its CPU time, --max-cpu ${limits.maxCpuSeconds}s, and was killed by SIGXCPU (exit ${f.code})` });
  if (limits.maxFileBytes && endedBy(SIGXFSZ))
    hits.push({ limit: "file-size", flag: "--max-file-size", value: formatSize(limits.maxFileBytes), ended: true, what: `a process wrote past --max-file-size ${formatSize(limits.maxFileBytes)} and was killed by SIGXFSZ (exit ${f.code})` });
  if (f.oomKills && limits.maxMemoryBytes)
    hits.push({ limit: "memory", flag: "--max-memory", value: formatSize(limits.maxMemoryBytes), ended: f.code !== 0, what: `the memory limit, --max-memory ${formatSize(limits.maxMemoryBytes)}, killed ${f.oomKills} process${f.oomKills === 1 ? "" : "es"}` });
  else if (limits.maxMemoryBytes && !f.memoryCgroup && f.code !== 0)
    hits.push({ limit: "memory", flag: "--max-memory", value: formatSize(limits.maxMemoryBytes), ended: false, what: `the command exited ${f.code}; --max-memory ${formatSize(limits.maxMemoryBytes)} is held as RLIMIT_DATA here, where an allocation past it fails instead of being killed, which may be why` });
  const procs = limits.maxProcs ?? defaultMaxProcs;
  if (f.procsHit && procs)
    hits.push({ limit: "procs", flag: "--max-procs", value: String(procs), ended: false, what: `the process limit, ${limits.maxProcs ? `--max-procs ${procs}` : `${procs} by default`}, refused ${f.procsHit} fork${f.procsHit === 1 ? "" : "s"}` });
  return hits;
}

/** A larger value of the same kind, to show the flag in use: twice the limit. */
function raised(h: LimitHit, limits: Limits, defaultMaxProcs: number | undefined): string {
  switch (h.limit) {
    case "timeout": return formatDuration(limits.timeoutMs! * 2);
    case "output": return formatSize(limits.maxOutputBytes! * 2);
    case "cpu": return String(limits.maxCpuSeconds! * 2);
    case "file-size": return formatSize(limits.maxFileBytes! * 2);
    case "memory": return formatSize(limits.maxMemoryBytes! * 2);
    case "procs": return String((limits.maxProcs ?? defaultMaxProcs ?? 512) * 2);
  }
}

/** The line vak prints for one limit: what happened, with the limit's flag and value, and how to raise it. */
export function limitLine(h: LimitHit, limits: Limits, defaultMaxProcs: number | undefined): string {
  return `${h.ended ? "stopped: " : ""}${h.what}; raise it with ${h.flag} ${raised(h, limits, defaultMaxProcs)} or more`;
}
