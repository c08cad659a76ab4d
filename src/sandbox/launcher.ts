import { spawn, type StdioOptions } from "node:child_process";
import { closeSync, constants as fsConstants, existsSync, fstatSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from "node:fs";
import { constants } from "node:os";
import { join } from "node:path";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import { unhandled } from "../protocol/unhandled.js";
import { vakDirs } from "../policy/state.js";
import type { LaunchPlan } from "../policy/plan.js";
import { parseReport, type Report } from "./report.js";

/** The launcher binary built by node-gyp at install (build/Release/vak-launcher). */
export function launcherPath(): string {
  const p = installation().launcher;
  if (!existsSync(p))
    throw new VakError("unsupported", `the sandbox launcher is missing (${p}); run \`npm ci\` (or \`npx node-gyp rebuild\`) in the Vak package`);
  return p;
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
}

/** The launch plan as the launcher's argv. The launcher refuses anything it does not know. */
export function launcherArgs(plan: LaunchPlan, reportFd: number, gate?: GateLink, output: OutputOptions = {}): string[] {
  const a = ["--report-fd", String(reportFd)];
  if (plan.network.kind === "gate") {
    if (!gate) throw new VakError("internal", "a plan with a network grant needs a running egress gate");
    a.push("--net-gate", gate.dir, "--net-port", String(plan.network.port), "--net-token-fd", String(reportFd + 1));
  }
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
  a.push("--", ...plan.command);
  return a;
}

/** Where the egress gate listens, and the token that names this worker to it. */
export interface GateLink {
  dir: string;
  token: string;
}

export interface LaunchResult {
  /** The launcher's exit status: the command's own, 124 on timeout, 125 when setup failed. */
  code: number;
  reports: Report[];
  setupError?: { step: string; message: string } | undefined;
  /** The write guard died while the command ran; the launcher stopped the sandbox. */
  guardDied: boolean;
  execError?: { errno: number; message: string } | undefined;
  timedOut: boolean;
  /** The command wrote more than OutputOptions.maxOutput; the launcher stopped the sandbox. */
  outputExceeded: boolean;
  denied: Extract<Report, { event: "denied" }>[];
  limits?: Extract<Report, { event: "limits" }> | undefined;
  /** Lines the launcher wrote that did not parse: a bug or a tampered report, never ignored. */
  malformed: string[];
}

export interface RunningSandbox {
  pid: number;
  result: Promise<LaunchResult>;
  kill(signal: NodeJS.Signals): void;
  /** Stops the sandbox and every process in it, at once. */
  cancel(): void;
  stdout: NodeJS.ReadableStream | null;
  stderr: NodeJS.ReadableStream | null;
  stdin: NodeJS.WritableStream | null;
}

const MAX_REPORT_BYTES = 1 << 20;
const MAX_REPORT_LINES = 1000;

/** A directory of Vak's own for temporary files: never inside any grant (Vak's state is masked and guarded). */
function privateTmp(): string {
  const d = vakDirs();
  const dir = join(d.runtime ?? join(d.state, "run"), "tmp");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/**
 * An unlinked temporary file for the launcher's report. A file rather than a
 * pipe: Node gives a raw fd to the child as is, where a pipe would cost a
 * Socket and the stream machinery on every start-up. Only the launcher, its
 * init and its guard hold it; the command's copy closes on exec.
 */
function reportFile(content = ""): number {
  const dir = privateTmp();
  const flags = fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_APPEND | fsConstants.O_NOFOLLOW;
  for (let attempt = 0; ; attempt++) {
    // O_EXCL makes the name's guessability harmless; a clash just picks another.
    const path = join(dir, `report-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`);
    try {
      const fd = openSync(path, flags, 0o600);
      unlinkSync(path);
      if (content) writeSync(fd, content);
      return fd;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 8) throw e;
    }
  }
}

function readReport(fd: number): { reports: Report[]; malformed: string[] } {
  const size = Math.min(fstatSync(fd).size, MAX_REPORT_BYTES);
  const buf = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const n = readSync(fd, buf, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  const reports: Report[] = [];
  const malformed: string[] = [];
  for (const line of buf.subarray(0, got).toString("utf8").split("\n")) {
    if (!line || reports.length + malformed.length >= MAX_REPORT_LINES) continue;
    const r = parseReport(line);
    if (r) reports.push(r);
    else malformed.push(line.slice(0, 200));
  }
  return { reports, malformed };
}

/** How often a running sandbox's report is looked at for lines to show at once (refusals while it runs). */
const WATCH_MS = 150;

/**
 * Follows the report while the sandbox runs: each complete line that parses,
 * once, as it arrives. The first look is after WATCH_MS, so a short command
 * pays nothing; each look is one fstat when nothing is new.
 */
function watchReport(fd: number, onReport: (r: Report) => void): { stop(): void } {
  let offset = 0;
  let lines = 0;
  const look = () => {
    let size: number;
    try {
      size = Math.min(fstatSync(fd).size, MAX_REPORT_BYTES);
    } catch {
      return;
    }
    if (size <= offset) return;
    const buf = Buffer.alloc(size - offset);
    const n = readSync(fd, buf, 0, buf.length, offset);
    const text = buf.subarray(0, n).toString("utf8");
    const end = text.lastIndexOf("\n");
    if (end < 0) return;
    offset += Buffer.byteLength(text.slice(0, end + 1));
    for (const line of text.slice(0, end).split("\n")) {
      if (!line || ++lines > MAX_REPORT_LINES) continue;
      const r = parseReport(line);
      if (r) onReport(r);
    }
  };
  const timer = setInterval(look, WATCH_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** Starts the launcher with the plan; stdio is the caller's choice. */
export function launch(
  plan: LaunchPlan,
  stdio: ["inherit" | "pipe" | "ignore", "inherit" | "pipe" | "ignore", "inherit" | "pipe" | "ignore"],
  gate?: GateLink,
  opts: { detached?: boolean; onReport?: ((r: Report) => void) | undefined } & OutputOptions = {},
): RunningSandbox {
  if (plan.sandbox === "none") throw new VakError("internal", "launch() is for sandboxed plans");
  const fd = reportFile();
  // The token travels in a file too, read and closed by the launcher at once: argv would be readable from inside.
  const tokenFd = plan.network.kind === "gate" && gate ? reportFile(gate.token) : undefined;
  let child;
  try {
    const fds = tokenFd === undefined ? [fd] : [fd, tokenFd];
    child = spawn(launcherPath(), launcherArgs(plan, 3, gate, { maxOutput: opts.maxOutput, explain: opts.explain }), { stdio: [...stdio, ...fds] as StdioOptions, env: plan.env, cwd: "/", detached: opts.detached ?? false });
  } catch (e) {
    closeSync(fd);
    throw e;
  } finally {
    if (tokenFd !== undefined) closeSync(tokenFd);
  }
  const watcher = opts.onReport ? watchReport(fd, opts.onReport) : undefined;
  const result = new Promise<LaunchResult>((resolve, reject) => {
    child.on("error", (e) => {
      watcher?.stop();
      closeSync(fd);
      reject(new VakError("sandbox-setup", `cannot start the sandbox launcher: ${e.message}`));
    });
    child.on("close", (code, signal) => {
      // Every writer is gone by now: the monitor reaps init, whose exit takes
      // the namespace (and the guard) with it, before exiting itself.
      watcher?.stop();
      const { reports, malformed } = readReport(fd);
      closeSync(fd);
      const setup = reports.find((r) => r.event === "setup-error");
      const exec = reports.find((r) => r.event === "exec-error");
      resolve({
        code: code ?? (signal ? 128 + (signalNumber(signal) ?? 9) : 125),
        reports,
        setupError: setup?.event === "setup-error" ? { step: setup.step, message: setup.message } : undefined,
        execError: exec?.event === "exec-error" ? { errno: exec.errno, message: exec.message } : undefined,
        timedOut: reports.some((r) => r.event === "timeout"),
        outputExceeded: reports.some((r) => r.event === "output-exceeded"),
        guardDied: reports.some((r) => r.event === "guard-died"),
        denied: reports.filter((r): r is Extract<Report, { event: "denied" }> => r.event === "denied"),
        limits: reports.find((r): r is Extract<Report, { event: "limits" }> => r.event === "limits"),
        malformed,
      });
    });
  });
  let cancelled = false;
  return {
    pid: child.pid ?? -1,
    result,
    kill: (s) => {
      child.kill(s);
    },
    cancel: () => {
      // The monitor kills the whole sandbox on SIGUSR1; SIGKILL is the backstop.
      if (cancelled) return;
      cancelled = true;
      child.kill("SIGUSR1");
      setTimeout(() => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        // The monitor did not answer: kill it (init and the command die with it), and its group when it has one.
        child.kill("SIGKILL");
        if (opts.detached && child.pid) {
          try {
            process.kill(-child.pid, "SIGKILL");
          } catch {
            // the group is gone already
          }
        }
      }, 200).unref();
    },
    stdout: child.stdout,
    stderr: child.stderr,
    stdin: child.stdin,
  };
}

function signalNumber(s: NodeJS.Signals): number | undefined {
  return constants.signals[s];
}
