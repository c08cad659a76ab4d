/** What a run of the launcher ended with, and the report file it writes. */
import { closeSync, constants as fsConstants, fstatSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { vakDirs } from "../policy/state.js";
import { parseReport, type Report } from "./report.js";

/** One of the command's stdio: a number is a descriptor of this process's (the resident host's, received from its client). */
export type StdioSlot = "inherit" | "pipe" | "ignore" | number;

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

/**
 * What the launcher's monitor says of the output where vak's own lines go, when it relays it (native/terminal.c):
 * how many writes it made there, and whether the last one ended a line.
 */
export interface LineWord {
  writes: number;
  atStart: boolean;
}

/** The monitor's word in its file (8 bytes at offset 0: writes × 2, plus 1 at a line's start); undefined when it keeps none. */
export function readLineWord(fd: number): LineWord | undefined {
  const b = Buffer.alloc(8);
  let n: number;
  try {
    n = readSync(fd, b, 0, 8, 0);
  } catch {
    return undefined;
  }
  if (n !== 8) return undefined;
  const w = b.readBigUInt64LE(0);
  return { writes: Number(w >> 1n), atStart: (w & 1n) === 1n };
}

export interface RunningSandbox {
  pid: number;
  /** The monitor's word on the output where vak's lines go, while it runs and after (undefined: it keeps none; vak looks itself). */
  lineWord?: (() => LineWord | undefined) | undefined;
  result: Promise<LaunchResult>;
  kill(signal: NodeJS.Signals): void;
  /** Stops the sandbox and every process in it, at once. */
  cancel(): void;
  stdout: NodeJS.ReadableStream | null;
  stderr: NodeJS.ReadableStream | null;
  stdin: NodeJS.WritableStream | null;
}

export const MAX_REPORT_BYTES = 1 << 20;
export const MAX_REPORT_LINES = 1000;

/** A directory of Vak's own for temporary files: never inside any grant (Vak's state is masked and guarded). */
export function privateTmp(): string {
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
export function reportFile(content = "", append = true): number {
  const dir = privateTmp();
  const flags = fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_EXCL | (append ? fsConstants.O_APPEND : 0) | fsConstants.O_NOFOLLOW;
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

export function readReport(fd: number): { reports: Report[]; malformed: string[] } {
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

/** The result of one run, from the launcher's exit and its report lines. */
export function resultOf(code: number, reports: Report[], malformed: string[]): LaunchResult {
  const setup = reports.find((r) => r.event === "setup-error");
  const exec = reports.find((r) => r.event === "exec-error");
  return {
    code,
    reports,
    setupError: setup?.event === "setup-error" ? { step: setup.step, message: setup.message } : undefined,
    execError: exec?.event === "exec-error" ? { errno: exec.errno, message: exec.message } : undefined,
    timedOut: reports.some((r) => r.event === "timeout"),
    outputExceeded: reports.some((r) => r.event === "output-exceeded"),
    guardDied: reports.some((r) => r.event === "guard-died"),
    denied: reports.filter((r): r is Extract<Report, { event: "denied" }> => r.event === "denied"),
    limits: reports.find((r): r is Extract<Report, { event: "limits" }> => r.event === "limits"),
    malformed,
  };
}
