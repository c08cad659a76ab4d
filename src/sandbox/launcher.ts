import { spawn, type StdioOptions } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { VakError } from "../policy/errors.js";
import type { LaunchPlan } from "../policy/plan.js";

/** The launcher binary built by node-gyp at install (build/Release/vak-launcher). */
export function launcherPath(): string {
  const p = fileURLToPath(new URL("../../build/Release/vak-launcher", import.meta.url));
  if (!existsSync(p))
    throw new VakError("unsupported", `the sandbox launcher is missing (${p}); run \`npm ci\` (or \`npx node-gyp rebuild\`) in the Vak package`);
  return p;
}

/** The launch plan as the launcher's argv. The launcher refuses anything it does not know. */
export function launcherArgs(plan: LaunchPlan, reportFd: number): string[] {
  const a = ["--report-fd", String(reportFd)];
  if (plan.sandbox === "reduced") a.push("--reduced");
  a.push("--guard");
  for (const m of plan.mounts) {
    switch (m.kind) {
      case "tmpfs": a.push("--tmpfs", m.path, String(m.bytes)); break;
      case "symlink": a.push("--symlink", m.path, m.target); break;
      case "file": a.push("--file", m.path, m.content); break;
      default: a.push(`--${m.kind}`, m.path);
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
  a.push("--", ...plan.command);
  return a;
}

/** One line the launcher (or its guard) reports. */
export const ReportSchema = z.discriminatedUnion("event", [
  z.object({ event: z.literal("setup-error"), step: z.string(), message: z.string() }).strict(),
  z.object({ event: z.literal("warning"), step: z.string(), message: z.string() }).strict(),
  z.object({ event: z.literal("exec-error"), errno: z.number(), message: z.string() }).strict(),
  z.object({ event: z.literal("denied"), op: z.string(), path: z.string(), reason: z.string(), pid: z.number(), more: z.boolean().optional() }).strict(),
  z.object({ event: z.literal("signaled"), signal: z.number() }).strict(),
  z.object({ event: z.literal("timeout"), ms: z.number() }).strict(),
  z.object({ event: z.literal("limits"), procs_cgroup: z.boolean(), memory_cgroup: z.boolean(), procs_hit: z.number(), oom_kills: z.number() }).strict(),
]);
export type Report = z.infer<typeof ReportSchema>;

export interface LaunchResult {
  /** The launcher's exit status: the command's own, 124 on timeout, 125 when setup failed. */
  code: number;
  reports: Report[];
  setupError?: { step: string; message: string } | undefined;
  execError?: { errno: number; message: string } | undefined;
  timedOut: boolean;
  denied: Extract<Report, { event: "denied" }>[];
  limits?: Extract<Report, { event: "limits" }> | undefined;
  /** Lines the launcher wrote that did not parse: a bug or a tampered report, never ignored. */
  malformed: string[];
}

export interface RunningSandbox {
  pid: number;
  result: Promise<LaunchResult>;
  kill(signal: NodeJS.Signals): void;
  stdout: NodeJS.ReadableStream | null;
  stderr: NodeJS.ReadableStream | null;
  stdin: NodeJS.WritableStream | null;
}

const MAX_REPORT_LINE = 8192;
const MAX_REPORT_LINES = 1000;

/** Starts the launcher with the plan; stdio is the caller's choice. */
export function launch(plan: LaunchPlan, stdio: ["inherit" | "pipe" | "ignore", "inherit" | "pipe", "inherit" | "pipe"]): RunningSandbox {
  if (plan.sandbox === "none") throw new VakError("internal", "launch() is for sandboxed plans");
  const child = spawn(launcherPath(), launcherArgs(plan, 3), {
    stdio: [...stdio, "pipe"] as StdioOptions,
    env: plan.env,
    cwd: "/",
  });
  const reports: Report[] = [];
  const malformed: string[] = [];
  let buf = "";
  const report = child.stdio[3] as NodeJS.ReadableStream;
  report.setEncoding("utf8");
  report.on("data", (chunk: string) => {
    buf += chunk;
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (reports.length + malformed.length >= MAX_REPORT_LINES) continue;
      try {
        reports.push(ReportSchema.parse(JSON.parse(line)));
      } catch {
        malformed.push(line.slice(0, 200));
      }
    }
    if (buf.length > MAX_REPORT_LINE) {
      malformed.push(buf.slice(0, 200));
      buf = "";
    }
  });
  const reportClosed = new Promise<void>((r) => report.on("close", () => r()));
  const result = new Promise<LaunchResult>((resolve, reject) => {
    child.on("error", (e) => reject(new VakError("sandbox-setup", `cannot start the sandbox launcher: ${e.message}`)));
    child.on("close", async (code, signal) => {
      await reportClosed;
      const setup = reports.find((r) => r.event === "setup-error");
      const exec = reports.find((r) => r.event === "exec-error");
      resolve({
        code: code ?? (signal ? 128 + (signalNumber(signal) ?? 9) : 125),
        reports,
        setupError: setup?.event === "setup-error" ? { step: setup.step, message: setup.message } : undefined,
        execError: exec?.event === "exec-error" ? { errno: exec.errno, message: exec.message } : undefined,
        timedOut: reports.some((r) => r.event === "timeout"),
        denied: reports.filter((r): r is Extract<Report, { event: "denied" }> => r.event === "denied"),
        limits: reports.find((r): r is Extract<Report, { event: "limits" }> => r.event === "limits"),
        malformed,
      });
    });
  });
  return {
    pid: child.pid ?? -1,
    result,
    kill: (s) => {
      child.kill(s);
    },
    stdout: child.stdout,
    stderr: child.stderr,
    stdin: child.stdin,
  };
}

function signalNumber(s: NodeJS.Signals): number | undefined {
  return constants.signals[s];
}
