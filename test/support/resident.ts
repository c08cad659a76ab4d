import { type ChildProcess, spawn } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, VAK_BIN } from "./paths.js";
import { baseEnv } from "./vak.js";

/**
 * Resident hosts (`vak host`) of a test file's own, each in a runtime
 * directory of its own, and runs of the native client against one. Every
 * client runs with VAK_RESIDENT=only, so that nothing it asks for quietly runs
 * in-process instead: the host serves it or it exits 125. stopAll() ends the
 * hosts it started, by their pids, and removes the directories.
 */
export const CLIENT = join(ROOT, "build/Release/vak-client");

export interface Host {
  child: ChildProcess;
  rt: string;
  sock: string;
  pid: number;
}

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface Client {
  child: ChildProcess;
  /** What it printed so far. */
  out(): string;
  done: Promise<Ran>;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until(what: string, ok: () => boolean, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** The pid a host wrote, never 0 or less (process.kill(0) would hit this test's own process group). */
export function hostPid(pidFile: string): number {
  const pid = Number(readFileSync(pidFile, "utf8"));
  if (!Number.isInteger(pid) || pid <= 1) throw new Error(`${pidFile} holds no pid`);
  return pid;
}

export function residentHosts(prefix: string) {
  const base = mkdtempSync(join(tmpdir(), prefix));
  const hosts: Host[] = [];
  let n = 0;
  /** A fresh runtime directory (0700), for a host a test starts its own way. */
  const runtimeDir = (): string => {
    const rt = join(base, `rt${++n}`);
    mkdirSync(rt, { mode: 0o700 });
    return rt;
  };
  return {
    base,
    hosts,
    runtimeDir,
    /** A host of this checkout's, or (bin) of another installation's bin/vak.cjs. */
    async start(opts: { idle?: number; env?: Record<string, string>; cwd?: string; bin?: string } = {}): Promise<Host> {
      const rt = runtimeDir();
      const child = spawn(process.execPath, [opts.bin ?? VAK_BIN, "host", "--idle-seconds", String(opts.idle ?? 120)], { env: baseEnv({ XDG_RUNTIME_DIR: rt, ...opts.env }), stdio: "ignore", cwd: opts.cwd });
      const pidFile = join(rt, "vak", "host.pid");
      await until("the host's pid file", () => existsSync(pidFile));
      const h = { child, rt, sock: join(rt, "vak", "host.sock"), pid: hostPid(pidFile) };
      hosts.push(h);
      return h;
    },
    workspace(): string {
      const d = join(base, `ws${++n}`);
      mkdirSync(d);
      return d;
    },
    stopAll(): void {
      for (const h of hosts) {
        try {
          process.kill(h.pid, "SIGKILL");
        } catch {
          // gone
        }
      }
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/**
 * A vak-client of host h (this checkout's, or the one at clientPath); stdin is left open when keepStdin (the
 * test writes it), else given input and ended.
 */
export function client(h: Host, args: string[], opts: { cwd: string; env?: Record<string, string>; input?: string; keepStdin?: boolean; wrapper?: string[]; clientPath?: string }): Client {
  const t0 = Date.now();
  const argv = [...(opts.wrapper ?? []), opts.clientPath ?? CLIENT, ...args];
  const child = spawn(argv[0]!, argv.slice(1), { cwd: opts.cwd, env: { ...baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }), ...opts.env }, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  // A client refused at once may be gone before its stdin is written: that EPIPE is not the test's finding.
  child.stdin!.on("error", () => undefined);
  if (!opts.keepStdin) child.stdin!.end(opts.input ?? "");
  const done = new Promise<Ran>((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr, ms: Date.now() - t0 })));
  return { child, out: () => stdout, done };
}

/**
 * A copy of this checkout's installation at dir, as npm lays one out (package.json, bin/, dist/, presets/, the
 * binaries of build/Release/), its node_modules a link to this checkout's: its files can be changed, replaced or
 * removed without touching ROOT. Returns dir.
 */
export function copyInstallation(dir: string): string {
  mkdirSync(join(dir, "build", "Release"), { recursive: true });
  for (const p of ["package.json", "bin", "dist", "presets"]) cpSync(join(ROOT, p), join(dir, p), { recursive: true, filter: (src) => src !== join(ROOT, "dist", "web") });
  for (const f of ["vak-launcher", "vak-client", "vak-resident.node", "vak-engine.node"]) copyFileSync(join(ROOT, "build", "Release", f), join(dir, "build", "Release", f));
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}
