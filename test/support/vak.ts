import { spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { VAK_BIN } from "./paths.js";

/** Vak's state (the journal) for this test file's runs: never the machine's own. */
export const TEST_STATE = mkdtempSync(join(tmpdir(), "vak-test-state-"));

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The --json summary line, when the run printed one. */
  summary?: Record<string, unknown>;
}

/**
 * The backend the attack tests run against: the namespace backend, or (in the
 * vitest project "container", test/support/container-setup.ts) the container
 * backend, which `vak exec` then gets as `--sandbox container`.
 */
export const BACKEND: "namespaces" | "container" = process.env.VAK_TEST_SANDBOX === "container" ? "container" : "namespaces";

/** A clean environment for the vak process itself: no CA bundle override, no stray secrets. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/root",
    LANG: "C.UTF-8",
    XDG_STATE_HOME: TEST_STATE,
  };
  // The container backend's engine and the image record the run built (test/support/container-global.ts).
  if (BACKEND === "container")
    for (const k of ["DOCKER_HOST", "CONTAINER_HOST", "XDG_CACHE_HOME"]) if (process.env[k]) env[k] = process.env[k]!;
  return { ...env, ...extra };
}

/** `vak exec …` on the backend under test: the container project adds --sandbox container unless a test chose a sandbox itself. */
export function onBackend(args: readonly string[]): string[] {
  if (BACKEND !== "container" || args[0] !== "exec" || args.some((a) => a === "--sandbox" || a === "--full-access")) return [...args];
  return ["exec", "--sandbox", "container", ...args.slice(1)];
}

export interface VakOptions {
  cwd: string;
  env?: Record<string, string>;
  input?: string;
  /** Extra fds the vak process inherits (for the inherited-fd test). */
  stdio?: StdioOptions;
  wrapper?: string[];
}

export function spawnVak(args: string[], opts: VakOptions): ChildProcess {
  const argv = [...(opts.wrapper ?? []), process.execPath, VAK_BIN, ...onBackend(args)];
  return spawn(argv[0]!, argv.slice(1), {
    cwd: opts.cwd,
    env: opts.env ?? baseEnv(),
    stdio: opts.stdio ?? ["pipe", "pipe", "pipe"],
  });
}

/** Runs `vak ARGS` to completion and collects its output. */
export function runVak(args: string[], opts: VakOptions): Promise<RunResult> {
  const child = spawnVak(args, opts);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  if (opts.input !== undefined) child.stdin?.end(opts.input);
  else child.stdin?.end();
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      const line = stderr.split("\n").reverse().find((l) => l.startsWith("{") && l.includes('"exit"'));
      resolve({ code, signal, stdout, stderr, summary: line ? (JSON.parse(line) as Record<string, unknown>) : undefined });
    });
  });
}

/** `vak exec [flags] -- sh -c SCRIPT` in a workspace. */
export function sandboxSh(cwd: string, script: string, flags: string[] = [], opts: Partial<VakOptions> = {}): Promise<RunResult> {
  return runVak(["exec", "--json", ...flags, "--", "/bin/sh", "-c", script], { cwd, ...opts });
}
