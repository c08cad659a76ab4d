/**
 * The launcher's report: one JSON object per line on a pipe only the launcher,
 * its init and its guard hold (the command's copy closes on exec). Each line is
 * checked field by field; anything else is "malformed" and fails the run.
 * Hand-written rather than zod: this sits on every `vak exec`, and loading zod
 * would cost more than starting the sandbox.
 */
export type Report =
  | { event: "setup-error"; step: string; message: string }
  | { event: "warning"; step: string; message: string }
  | { event: "exec-error"; errno: number; message: string }
  | { event: "denied"; op: string; path: string; reason: string; pid: number; more?: boolean }
  /** A name looked up inside: the sandbox's resolver answered at once that there is no such name. */
  | { event: "dns"; name: string; type: string; more?: boolean }
  /** --explain: a path the command looked up (open, stat, execve) that is not in its view. */
  | { event: "missing"; op: string; path: string; more?: boolean }
  | { event: "signaled"; signal: number }
  | { event: "guard-died"; signal?: number; status?: number }
  | { event: "timeout"; ms: number }
  | { event: "output-exceeded"; limit: number }
  | { event: "limits"; procs: ProcsMechanism; memory_cgroup: boolean; procs_hit: number; oom_kills: number };

/** How the process count is held: a pid namespace's own pid_max, a pids cgroup, or RLIMIT_NPROC. */
export type ProcsMechanism = "none" | "pid-namespace" | "cgroup" | "rlimit";

type FieldType = "string" | "number" | "boolean";
const SHAPES: Record<Report["event"], Record<string, FieldType>> = {
  "setup-error": { step: "string", message: "string" },
  warning: { step: "string", message: "string" },
  "exec-error": { errno: "number", message: "string" },
  denied: { op: "string", path: "string", reason: "string", pid: "number" },
  dns: { name: "string", type: "string" },
  missing: { op: "string", path: "string" },
  signaled: { signal: "number" },
  "guard-died": {},
  timeout: { ms: "number" },
  "output-exceeded": { limit: "number" },
  limits: { procs: "string", memory_cgroup: "boolean", procs_hit: "number", oom_kills: "number" },
};
const OPTIONAL: Partial<Record<Report["event"], Record<string, FieldType>>> = {
  denied: { more: "boolean" },
  dns: { more: "boolean" },
  missing: { more: "boolean" },
  "guard-died": { signal: "number", status: "number" },
};

export function parseReport(line: string): Report | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  const event = o.event;
  if (typeof event !== "string" || !Object.hasOwn(SHAPES, event)) return undefined;
  const shape = SHAPES[event as Report["event"]];
  const optional = OPTIONAL[event as Report["event"]] ?? {};
  for (const [k, val] of Object.entries(o)) {
    if (k === "event") continue;
    const t = shape[k] ?? optional[k];
    if (!t || typeof val !== t) return undefined;
  }
  for (const k of Object.keys(shape)) if (!Object.hasOwn(o, k)) return undefined;
  return o as Report;
}
