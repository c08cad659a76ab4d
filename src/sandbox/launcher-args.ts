/** The launch plan as the launcher's argv, and where the launcher is. */
import { existsSync } from "node:fs";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import { unhandled } from "../protocol/unhandled.js";
import type { LaunchPlan } from "../policy/plan.js";

/** The launcher binary built by node-gyp at install (build/Release/vak-launcher). */
export function launcherPath(): string {
  const p = installation().launcher;
  if (!existsSync(p))
    throw new VakError("unsupported", `the sandbox launcher is missing (${p}); run \`npm ci\` (or \`npx node-gyp rebuild\`) in the Vak package`);
  return p;
}

/**
 * Variables the dynamic loader and glibc read as a program starts (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`,
 * `GCONV_PATH`, …: glibc's own list of what it ignores for set-id programs, and every `LD_*`). In the launcher's
 * environment they would act on the launcher itself, which starts on the host, unconfined, before any sandbox
 * exists: a `set_env` of `LD_PRELOAD` naming a library in the workspace, which a sandbox can rewrite, would run
 * that library on the host at the next run. The launcher never gets them in its environment; they reach the
 * command as `--setenv` arguments, set by the launcher once it runs (native/args.c).
 */
const LOADER_ENV = new Set(["GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "MALLOC_TRACE", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR"]);

export const loaderVariable = (name: string): boolean => name.startsWith("LD_") || LOADER_ENV.has(name);

/** The launcher's own environment: the command's, less what the dynamic loader would read for the launcher (launcherArgs passes those). */
export function launcherEnv(plan: LaunchPlan): Record<string, string> {
  return Object.fromEntries(Object.entries(plan.env).filter(([k]) => !loaderVariable(k)));
}

/** How the launcher handles the command's output. */
export interface OutputOptions {
  /**
   * Bytes of output the command may write (stdout, stderr, and its terminal), counted by the launcher's
   * monitor, which stops the sandbox past them; for callers that give the launcher their own stdio.
   */
  maxOutput?: number | undefined;
  /** --explain: the guard reports the paths the command looked up that are not in its view. */
  explain?: boolean | undefined;
  /**
   * The pid of the resident host's client, whose process group the host found in the terminal's foreground
   * (src/resident/terminal.ts): the terminal at fds 0-1 is interactive, and what is typed there is read only while
   * that group is still the foreground (the launcher is in no session of the terminal's, so the kernel would not
   * stop it). Without it the launcher asks the terminal (it is vak's own).
   */
  foreground?: number | undefined;
  /**
   * Vak cannot see whether the output its own lines go to (its stderr: a pipe, a socket, a terminal) ends a line:
   * the monitor then relays what the command writes there and keeps the answer in a file (LineWord).
   */
  lineWord?: boolean | undefined;
}

/** The launch plan as the launcher's argv. The launcher refuses anything it does not know. */
export function launcherArgs(plan: LaunchPlan, io: number | { hostDir: string }, gate?: GateLink, output: OutputOptions & { goFd?: number | undefined; lineFd?: number | undefined } = {}): string[] {
  // A report fd (the token on the next one), or a directory of vak's holding both by name (the container backend).
  const a = typeof io === "number" ? ["--report-fd", String(io)] : ["--host-dir", io.hostDir];
  if (plan.network.kind === "gate") {
    if (!gate) throw new VakError("internal", "a plan with a network grant needs a running egress gate");
    a.push("--net-gate", gate.dir, "--net-port", String(plan.network.port));
    if (typeof io === "number") a.push("--net-token-fd", String(io + 1));
  }
  // The command waits, confined, for one byte on this descriptor before its exec (launchHeld in launcher.ts).
  if (output.goFd !== undefined) a.push("--go-fd", String(output.goFd));
  if (output.lineFd !== undefined) a.push("--line-fd", String(output.lineFd));
  if (plan.sandbox === "reduced") a.push("--reduced");
  a.push("--guard");
  for (const m of plan.mounts) {
    switch (m.kind) {
      case "tmpfs": a.push("--tmpfs", m.path, String(m.bytes)); break;
      case "symlink": a.push("--symlink", m.path, m.target); break;
      case "file": a.push("--file", m.path, m.content); break;
      case "ro": case "rw": case "mask": case "dir": case "dev": a.push(`--${m.kind}`, m.path); break;
      default: unhandled(m, "mount kind");
    }
  }
  for (const r of plan.protect) a.push(`--protect-${r.kind}`, r.pattern);
  a.push("--cwd", plan.cwd, "--hostname", "vak");
  const l = plan.limits;
  if (l.maxProcs) a.push("--max-procs", String(l.maxProcs));
  else if (plan.defaultMaxProcs) a.push("--default-max-procs", String(plan.defaultMaxProcs));
  if (l.maxMemoryBytes) a.push("--max-memory", String(l.maxMemoryBytes));
  if (l.maxFileBytes) a.push("--max-fsize", String(l.maxFileBytes));
  if (l.maxOpenFiles) a.push("--max-nofile", String(l.maxOpenFiles));
  if (l.maxCpuSeconds) a.push("--cpu-seconds", String(l.maxCpuSeconds));
  if (l.timeoutMs) a.push("--timeout-ms", String(l.timeoutMs));
  if (output.maxOutput) a.push("--max-output", String(output.maxOutput));
  if (output.explain) a.push("--explain");
  if (output.foreground) a.push("--foreground", String(output.foreground));
  // With --host-dir the environment arrives in a file, read after the launcher started (container backend).
  if (typeof io === "number") for (const [k, v] of Object.entries(plan.env)) if (loaderVariable(k)) a.push("--setenv", `${k}=${v}`);
  a.push("--", ...plan.command);
  return a;
}

/** Where the egress gate listens, and the token that names this worker to it. */
export interface GateLink {
  dir: string;
  token: string;
}
