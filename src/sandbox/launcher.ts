import type { StdioOptions } from "node:child_process";
import type { Writable } from "node:stream";
import { closeSync, fstatSync, readSync, writeSync } from "node:fs";
import { constants } from "node:os";
import { VakError } from "../policy/errors.js";
import type { LaunchPlan } from "../policy/plan.js";
import { launchInContainer } from "./container.js";
import { launcherArgs, launcherEnv, launcherPath, type GateLink, type OutputOptions } from "./launcher-args.js";
import { type LineWord, MAX_REPORT_BYTES, MAX_REPORT_LINES, readLineWord, readReport, reportFile, resultOf, type LaunchResult, type RunningSandbox, type StdioSlot } from "./launch-result.js";
import { parseReport, type Report } from "./report.js";

export { launcherArgs, launcherEnv, launcherPath, type GateLink, type OutputOptions } from "./launcher-args.js";
export { type LaunchResult, type LineWord, type RunningSandbox } from "./launch-result.js";

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


/**
 * Starts a process without fork(2), whose copy of a large parent's page tables costs milliseconds with the event
 * loop stopped (the resident host's posix_spawn, src/resident/native.ts). The child's descriptor i is fds[i]; cwd /.
 */
export interface Spawner {
  spawn(path: string, argv: string[], env: string[], fds: number[]): { pid: number; pidfd: number };
  /** Once the child has exited (and is reaped): its code, or -1 and the signal that killed it. */
  exited(pidfd: number, done: (code: number, signal: number) => void): void;
  /** [read, write], both close-on-exec. */
  pipe(): [number, number];
}

type LaunchOptions = { detached?: boolean; onReport?: ((r: Report) => void) | undefined; spawner?: Spawner | undefined } & OutputOptions;

/** Starts the launcher with the plan; stdio is the caller's choice. */
export function launch(
  plan: LaunchPlan,
  // A number is a descriptor of this process's (the resident host's, received from its client).
  stdio: [StdioSlot, StdioSlot, StdioSlot],
  gate?: GateLink,
  opts: LaunchOptions = {},
): RunningSandbox {
  if (plan.sandbox === "none") throw new VakError("internal", "launch() is for sandboxed plans");
  if (plan.sandbox === "container") return launchInContainer(plan, stdio, gate, opts);
  return spawnLauncher(plan, stdio, gate, opts, false);
}

/** A sandbox whose command waits, fully confined, for start(). */
export interface HeldSandbox extends RunningSandbox {
  start(): void;
  /** The word's end closed unwritten (also by cancel() and a SIGKILL): the command never runs, the launcher exits 125. */
  never(): void;
}

/**
 * Starts the launcher with the plan, which builds the whole sandbox but holds the command before its exec until
 * start() (the launcher's --go-fd): the sandbox's set-up and the commit of the run's start then overlap, and the
 * command still runs only once its record is durable. Namespaces and reduced mode (the container backend's
 * launcher runs behind the engine's CLI: launch() it once the record is durable).
 */
export function launchHeld(plan: LaunchPlan, stdio: [StdioSlot, StdioSlot, StdioSlot], gate?: GateLink, opts: LaunchOptions = {}): HeldSandbox {
  if (plan.sandbox !== "namespaces" && plan.sandbox !== "reduced") throw new VakError("internal", `launchHeld() is for the launcher's own sandboxes, not ${plan.sandbox}`);
  return spawnLauncher(plan, stdio, gate, opts, true);
}

function spawnLauncher(plan: LaunchPlan, stdio: [StdioSlot, StdioSlot, StdioSlot], gate: GateLink | undefined, opts: LaunchOptions, held: boolean): HeldSandbox {
  // "inherit" is this process's own descriptor of that number; "pipe" and "ignore" need Node's spawn.
  const own = stdio.map((x, i) => (x === "inherit" ? i : x));
  if (opts.spawner && own.every((x) => typeof x === "number") && !opts.detached) return spawnWith(opts.spawner, plan, own as [number, number, number], gate, opts, held);
  // child_process (and with it net and the streams) loads only here, for a caller without a spawner.
  const { spawn } = process.getBuiltinModule("node:child_process");
  const fd = reportFile();
  // The token travels in a file too, read and closed by the launcher at once: argv would be readable from inside.
  const tokenFd = plan.network.kind === "gate" && gate ? reportFile(gate.token) : undefined;
  const line = opts.lineWord ? lineFile() : undefined;
  let child;
  try {
    const fds: (number | "pipe")[] = tokenFd === undefined ? [fd] : [fd, tokenFd];
    // The word to start: a socket of the child's, the next descriptor after the report (and the token).
    const goFd = held ? 3 + fds.length : undefined;
    if (held) fds.push("pipe");
    const lineFd = line ? 3 + fds.length : undefined;
    if (line) fds.push(line.fd);
    child = spawn(launcherPath(), launcherArgs(plan, 3, gate, { maxOutput: opts.maxOutput, explain: opts.explain, foreground: opts.foreground, goFd, lineFd }), { stdio: [...stdio, ...fds] as StdioOptions, env: launcherEnv(plan), cwd: "/", detached: opts.detached ?? false });
  } catch (e) {
    closeSync(fd);
    line?.close();
    throw e;
  } finally {
    if (tokenFd !== undefined) closeSync(tokenFd);
  }
  const watcher = opts.onReport ? watchReport(fd, opts.onReport) : undefined;
  const result = new Promise<LaunchResult>((resolve, reject) => {
    child.on("error", (e) => {
      watcher?.stop();
      closeSync(fd);
      line?.close();
      reject(new VakError("sandbox-setup", `cannot start the sandbox launcher: ${e.message}`));
    });
    child.on("close", (code, signal) => {
      // Every writer is gone by now: the monitor reaps init, whose exit takes
      // the namespace (and the guard) with it, before exiting itself.
      watcher?.stop();
      const { reports, malformed } = readReport(fd);
      closeSync(fd);
      line?.close();
      resolve(resultOf(code ?? (signal ? 128 + (signalNumber(signal) ?? 9) : 125), reports, malformed));
    });
  });
  // Closed unwritten, it tells a held command never to start; written, it is closed at once (unread, it would hold
  // the child's 'close' until the sandbox's last process let go of its end).
  const go = held ? (child.stdio[3 + (tokenFd === undefined ? 1 : 2)] as (Writable & { destroy(): void }) | null) : null;
  go?.on("error", () => undefined);
  const never = () => go?.destroy();
  let cancelled = false;
  return {
    pid: child.pid ?? -1,
    lineWord: line?.word,
    result,
    start: () => {
      if (go && !go.destroyed) go.write(Buffer.of(1), () => go.destroy());
    },
    never,
    kill: (s) => {
      if (s === "SIGKILL") never();
      child.kill(s);
    },
    cancel: () => {
      never();
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

/** spawnLauncher, with a Spawner: descriptors only (no streams), the word to start on a pipe of its own. */
function spawnWith(sp: Spawner, plan: LaunchPlan, stdio: [number, number, number], gate: GateLink | undefined, opts: LaunchOptions, held: boolean): HeldSandbox {
  const fd = reportFile();
  const tokenFd = plan.network.kind === "gate" && gate ? reportFile(gate.token) : undefined;
  const fds = tokenFd === undefined ? [...stdio, fd] : [...stdio, fd, tokenFd];
  const line = opts.lineWord ? lineFile() : undefined;
  let go = -1;
  let child: { pid: number; pidfd: number };
  try {
    const goFd = held ? fds.length : undefined;
    let goRead = -1;
    if (held) [goRead, go] = sp.pipe();
    try {
      if (held) fds.push(goRead);
      const lineFd = line ? fds.length : undefined;
      if (line) fds.push(line.fd);
      const path = launcherPath();
      const args = launcherArgs(plan, 3, gate, { maxOutput: opts.maxOutput, explain: opts.explain, foreground: opts.foreground, goFd, lineFd });
      child = sp.spawn(path, [path, ...args], Object.entries(launcherEnv(plan)).map(([k, v]) => `${k}=${v}`), fds);
    } finally {
      if (goRead >= 0) closeSync(goRead);
    }
  } catch (e) {
    closeSync(fd);
    line?.close();
    if (go >= 0) closeSync(go);
    throw new VakError("sandbox-setup", `cannot start the sandbox launcher: ${(e as Error).message}`);
  } finally {
    if (tokenFd !== undefined) closeSync(tokenFd);
  }
  const watcher = opts.onReport ? watchReport(fd, opts.onReport) : undefined;
  let exited = false;
  const result = new Promise<LaunchResult>((resolve) => {
    sp.exited(child.pidfd, (code, signal) => {
      exited = true;
      never();
      watcher?.stop();
      const { reports, malformed } = readReport(fd);
      closeSync(fd);
      line?.close();
      resolve(resultOf(code >= 0 ? code : 128 + signal, reports, malformed));
    });
  });
  const never = () => {
    if (go < 0) return;
    closeSync(go);
    go = -1;
  };
  // Never a signal to a pid once reaped: it may be another process's by then.
  const signal = (s: NodeJS.Signals) => {
    if (!exited) process.kill(child.pid, s);
  };
  let cancelled = false;
  return {
    pid: child.pid,
    lineWord: line?.word,
    result,
    start: () => {
      if (go < 0) return;
      try {
        writeSync(go, Buffer.of(1));
      } catch {
        // The launcher is gone already (EPIPE): its result says how.
      }
      never();
    },
    never,
    kill: (s) => {
      if (s === "SIGKILL") never();
      signal(s);
    },
    cancel: () => {
      never();
      if (cancelled) return;
      cancelled = true;
      signal("SIGUSR1");
      setTimeout(() => {
        if (!exited) signal("SIGKILL");
      }, 200).unref();
    },
    stdout: null,
    stderr: null,
    stdin: null,
  };
}

/**
 * The file where the monitor keeps its word on the output where vak's lines go (not appended to: it writes at
 * offset 0). Once the launcher has exited, its last word is kept and the file closed.
 */
function lineFile(): { fd: number; word: () => LineWord | undefined; close(): void } {
  const fd = reportFile("", false);
  let open = true;
  let last: LineWord | undefined;
  return {
    fd,
    word: () => (open ? (last = readLineWord(fd)) : last),
    close: () => {
      if (!open) return;
      last = readLineWord(fd);
      open = false;
      closeSync(fd);
    },
  };
}

function signalNumber(s: NodeJS.Signals): number | undefined {
  return constants.signals[s];
}
