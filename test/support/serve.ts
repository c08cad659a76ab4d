import { type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { head, rawRequest, type RawResponse } from "./raw-http.js";
import { baseEnv, spawnVak } from "./vak.js";

/**
 * A real `vak serve` for tests: its own state and config directories (the
 * [server] table is written to its user config), started with --json, and
 * stopped by PID.
 */
export interface Served {
  url: string;
  token: string;
  /** The login URL `vak serve` prints (on plain loopback: the instance's own *.localhost name). */
  loginUrl?: string;
  port: number;
  proc: ChildProcess;
  stderr: () => string;
  state: string;
  close(): Promise<void>;
}

export interface ServeOptions {
  workspace: string;
  /** The user's config.toml text (its [server] table, say). */
  config?: string;
  args?: string[];
  env?: Record<string, string>;
  /** Wrap the vak process (e.g. to run it in a network namespace). */
  wrapper?: string[];
}

export async function serve(o: ServeOptions): Promise<Served> {
  const root = mkdtempSync(join(tmpdir(), "vak-serve-test-"));
  const state = join(root, "state");
  const config = join(root, "config");
  mkdirSync(join(config, "vak"), { recursive: true });
  if (o.config) writeFileSync(join(config, "vak", "config.toml"), o.config);
  const proc = spawnVak(["serve", "--json", ...(o.args ?? [])], { cwd: o.workspace, env: baseEnv({ XDG_STATE_HOME: state, XDG_CONFIG_HOME: config, ...o.env }), wrapper: o.wrapper });
  let stderr = "";
  proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`vak serve did not start: ${stderr}`)), 20_000);
    proc.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf("\n");
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`vak serve exited (${code}): ${stderr}`));
    });
  });
  const { url, token, loginUrl } = JSON.parse(line) as { url: string; token: string; loginUrl?: string };
  return {
    url, token, loginUrl, port: Number(new URL(url).port), proc, state, stderr: () => stderr,
    close: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
        proc.once("exit", () => resolve());
        proc.kill("SIGTERM");
        setTimeout(() => proc.exitCode === null && proc.kill("SIGKILL"), 10_000).unref();
      }),
  };
}

/** Starts `vak serve` expecting it to refuse: resolves with its exit code and stderr. */
export function serveRefused(o: ServeOptions): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const root = mkdtempSync(join(tmpdir(), "vak-serve-test-"));
  const config = join(root, "config");
  mkdirSync(join(config, "vak"), { recursive: true });
  if (o.config) writeFileSync(join(config, "vak", "config.toml"), o.config);
  const proc = spawnVak(["serve", "--json", ...(o.args ?? [])], { cwd: o.workspace, env: baseEnv({ XDG_STATE_HOME: join(root, "state"), XDG_CONFIG_HOME: config, ...o.env }) });
  let stderr = "";
  let stdout = "";
  proc.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
  proc.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
  return new Promise((resolve) => {
    const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}

/** An authorised request to a running vak serve (raw HTTP/1.1 on loopback). */
export function apiRequest(srv: { port: number; token: string }): (method: string, path: string, body?: string) => Promise<RawResponse> {
  return (method, path, body) => {
    const hs: [string, string][] = [["Host", `127.0.0.1:${srv.port}`], ["Authorization", `Bearer ${srv.token}`]];
    if (body !== undefined) hs.push(["Content-Type", "application/json"], ["Content-Length", String(Buffer.byteLength(body))]);
    return rawRequest(head(method, path, hs), { port: srv.port, body, timeoutMs: 30_000 });
  };
}

/** Creates an agent session (a scripted model); meanwhile lists the sessions, one request after another: the slowest answer, and how many. */
export async function createWhileListing(req: ReturnType<typeof apiRequest>, model: string): Promise<{ answer: RawResponse; ms: number; slowest: number; asked: number }> {
  const t0 = Date.now();
  let done = false;
  const creating = req("POST", "/api/sessions", JSON.stringify({ kind: "agent", mode: "workspace-write", model: `scripted:${model}` })).finally(() => (done = true));
  let slowest = 0;
  let asked = 0;
  while (!done) {
    const t = Date.now();
    expect((await req("GET", "/api/sessions")).status).toBe(200);
    slowest = Math.max(slowest, Date.now() - t);
    asked += 1;
    await new Promise((res) => setTimeout(res, 20));
  }
  return { answer: await creating, ms: Date.now() - t0, slowest, asked };
}
