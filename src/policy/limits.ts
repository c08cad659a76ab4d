/**
 * Limits on what a sandboxed command may use: time, output, processes,
 * memory, file size, CPU, open files. The launcher holds each with the
 * mechanism the host has (native/limits.c chooses: a pids cgroup, the pid
 * namespace's pid_max, RLIMIT_NPROC, a memory cgroup or RLIMIT_DATA) and
 * reports which; a limit asked for that cannot be held is refused, never dropped.
 * Plain types here, no zod: `vak exec` loads this module on its start-up path
 * (the schema for limits that arrive as data is LimitsSchema in grants.ts).
 */
export interface Limits {
  timeoutMs?: number | undefined;
  maxOutputBytes?: number | undefined;
  maxProcs?: number | undefined;
  maxMemoryBytes?: number | undefined;
  maxFileBytes?: number | undefined;
  maxCpuSeconds?: number | undefined;
  maxOpenFiles?: number | undefined;
}

/**
 * The process count when nothing is asked for. Applied only where the host can
 * hold it (see choose_procs() in native/limits.c); an explicit --max-procs is
 * held exactly or refused.
 */
export const DEFAULT_MAX_PROCS = 1024;

/**
 * What a model-written command (an agent's `exec`, a component's tool) gets
 * when its component sets no limit of that kind: a file-size ceiling, so that
 * one file (a sparse one too) cannot grow without bound.
 */
export const DEFAULT_COMMAND_LIMITS: Readonly<Limits> = { maxFileBytes: 1024 * 1024 * 1024 };
