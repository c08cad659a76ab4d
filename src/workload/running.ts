import { randomBytes } from "node:crypto";
import { closeSync, constants as fsc, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";

/**
 * Which workloads run now, and from which spec: one small file per running
 * workload session, beside the journal it records to
 * (`<journal dir>/workloads/running/`), written when it starts, rewritten
 * when a new generation is applied, removed when it ends. `vak audit`
 * compares the spec's content hash it holds with the file on disk
 * (trust.workload-drift). A file whose process is gone (a crash) says
 * nothing: a record counts only while its pid runs with the start time it
 * names, so a reused pid does not make it count again.
 */
export const RunningWorkloadSchema = z
  .object({
    v: z.literal(1),
    pid: z.number().int().positive(),
    /** The process's start time (/proc/PID/stat field 22, clock ticks since boot). */
    start: z.string().max(32),
    session: z.string().max(128).nullable(),
    name: z.string().max(256),
    spec: z.string().max(4096),
    /** sha256 of the spec file's text as the running generation was started from it. */
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    generation: z.number().int().positive(),
    at: z.string().max(64),
  })
  .strict();
export type RunningWorkload = z.infer<typeof RunningWorkloadSchema>;

const MAX_RECORDS = 256;
const MAX_BYTES = 16 * 1024;

export function runningDir(journalDir: string): string {
  return join(journalDir, "workloads", "running");
}

/** A process's start time, or undefined when it is not running. */
export function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) is in parentheses and may hold spaces: count fields after its closing one.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** This process's record of one running workload session. */
export class RunningRecord {
  private readonly path: string;

  constructor(private readonly dir: string, private entry: RunningWorkload) {
    this.path = join(dir, `${entry.pid}-${randomBytes(6).toString("hex")}.json`);
  }

  static start(journalDir: string, e: Omit<RunningWorkload, "v" | "pid" | "start" | "at">): RunningRecord | undefined {
    const start = processStart(process.pid);
    if (start === undefined) return undefined;
    const r = new RunningRecord(runningDir(journalDir), { v: 1, pid: process.pid, start, at: new Date().toISOString(), ...e });
    r.write();
    return r;
  }

  /** A new generation runs: from this hash of the spec. */
  update(generation: number, sha256: string): void {
    this.entry = { ...this.entry, generation, sha256, at: new Date().toISOString() };
    this.write();
  }

  remove(): void {
    rmSync(this.path, { force: true });
  }

  /** Best effort: the record is for the audit; a workload does not fail to start because of it. */
  private write(): void {
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const tmp = `${this.path}.${randomBytes(4).toString("hex")}.tmp`;
      const fd = openSync(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600);
      try {
        writeSync(fd, JSON.stringify(this.entry));
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, this.path);
    } catch {
      // the audit then says nothing about this workload
    }
  }
}

/** The workloads running now (records whose process runs with the start time they name); damaged or stale records are skipped. */
export function listRunning(journalDir: string): (RunningWorkload & { file: string })[] {
  const dir = runningDir(journalDir);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".json")).slice(0, MAX_RECORDS);
  } catch {
    return [];
  }
  const out: (RunningWorkload & { file: string })[] = [];
  for (const n of names) {
    const file = join(dir, n);
    try {
      const st = lstatSync(file);
      if (!st.isFile() || st.size > MAX_BYTES) continue;
      const e = RunningWorkloadSchema.parse(JSON.parse(readFileSync(file, "utf8")));
      if (processStart(e.pid) === e.start) out.push({ ...e, file });
    } catch {
      // damaged: says nothing
    }
  }
  return out;
}
