import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { VAK_BIN } from "../support/paths.js";
import { client, CLIENT, hostPid, residentHosts, until, type Host } from "../support/resident.js";
import { httpsUpstream, testCa } from "../support/tls.js";
import { baseEnv } from "../support/vak.js";

/**
 * What a command run through the resident host inherits from its client: the
 * same as the command of the same `vak exec` in-process (node bin/vak.cjs,
 * given the same shell wrapper), never the host's, never the connection to
 * the host. Every client runs with VAK_RESIDENT=only: the host serves it or it
 * exits 125, and a difference it answers with `fallback` is one the host did
 * not serve (never one it served wrong).
 */

const resident = residentHosts("vak-inherit-");
afterAll(() => resident.stopAll());

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `vak exec ARGS` behind `sh -c WRAP` (which ends with `exec "$@"`): in-process, or through host h (VAK_RESIDENT=only). */
function run(h: Host | undefined, wrap: string, args: string[], cwd: string): Promise<Out> {
  const vak = h ? [CLIENT] : [process.execPath, VAK_BIN];
  const env = h ? baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }) : baseEnv({ VAK_RESIDENT: "off" });
  const child = spawn("/bin/sh", ["-c", wrap, "sh", ...vak, ...args], { cwd, env, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdin.on("error", () => undefined);
  child.stdin.end();
  // A command that hangs (reading the host's connection as its stdin) is the finding, not the test's timeout.
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** Processes whose command line holds marker as a word of its own, other than the client asking for it. */
function running(marker: string): number[] {
  return readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
    try {
      if (readlinkSync(`/proc/${p}/exe`) === CLIENT) return false;
    } catch {
      // another user's, or gone
    }
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").includes(marker);
    } catch {
      return false;
    }
  }).map(Number);
}

describe("a command through the resident host inherits what it would in-process", () => {
  // Each shell's own descriptor N, read from /proc/$$ (a redirection of the command's own would name another).
  it.each([
    ["stdin", 'exec "$@" <&-', "readlink /proc/$$/fd/0 >&2; timeout 5 cat; echo cat=$? >&2", 2],
    ["stdout", 'exec "$@" >&-', "readlink /proc/$$/fd/1 >&2; echo 'signal 15'; sleep 0.3; echo alive >&2", 2],
    ["stderr", 'exec "$@" 2>&-', "readlink /proc/$$/fd/2; echo 'signal 15' >&2; sleep 0.3; echo alive", 1],
  ] as const)("a client whose %s is closed: the command gets /dev/null there, never the client's connection to the host (it cannot read the host's replies, hang on them, or send it lines)", async (_, wrap, script, shown) => {
    const h = await resident.start();
    const ws = resident.workspace();
    const args = ["exec", "--", "/bin/sh", "-c", script];
    const [host, inProcess] = [await run(h, wrap, args, ws), await run(undefined, wrap, args, ws)];
    // Where the monitor relays a stream (a pipe of its own), the pipe's number is its own on each run.
    const seen = (o: Out) => (shown === 1 ? o.stdout : o.stderr).replace(/pipe:\[\d+\]/g, "pipe:");
    expect(seen(inProcess)).toMatch(/^(\/dev\/null|pipe:)\n(cat=0|alive)\n$/);
    expect(inProcess.code).toBe(0);
    expect({ code: host.code, said: seen(host) }).toEqual({ code: inProcess.code, said: seen(inProcess) });
  });

  it("a client whose stdin is closed, killed (kill -9) mid-command, leaves nothing running (its command holds no end of the connection that would keep the host from seeing it go)", async () => {
    const h = await resident.start();
    const ws = resident.workspace();
    const tag = `${1000 + Math.floor(Math.random() * 8000)}.${Math.floor(Math.random() * 1e6)}`;
    const child = spawn("/bin/sh", ["-c", 'exec "$@" <&- >/dev/null 2>&1', "sh", CLIENT, "exec", "--", "/bin/sleep", tag], { cwd: ws, env: baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }), stdio: "ignore" });
    const gone = new Promise((r) => child.on("exit", r));
    await until("the command to run", () => running(tag).length > 0);
    child.kill("SIGKILL");
    await gone;
    try {
      await until("the sandbox to be gone", () => running(tag).length === 0, 5000);
    } finally {
      for (const p of running(tag)) process.kill(p, "SIGKILL");
    }
  });

  it("the gate verifies every upstream whatever NODE_TLS_REJECT_UNAUTHORIZED=0 is in: the host's own environment (the client that started it) or an in-process vak's; a gate-held secret never goes to a server whose certificate does not verify", async () => {
    const untrusted = await testCa("Not trusted by the run");
    const up = await httpsUpstream(untrusted, ["127.0.0.1"]);
    try {
      const ws = resident.workspace();
      const value = `sk-unverified-${process.pid}-value`;
      const args = ["exec", "--allow-net", `127.0.0.1:${up.port}`, "--secret", "TOKEN=env:THE_KEY@127.0.0.1", "--", "/bin/sh", "-c", `curl -s -H "Authorization: Bearer $TOKEN" https://127.0.0.1:${up.port}/keyed`];
      // The host as the first command after an idle exit starts it: with that client's whole environment.
      const h = await resident.start({ env: { NODE_TLS_REJECT_UNAUTHORIZED: "0" } });
      const served = await run(h, `THE_KEY=${value} exec "$@"`, args, ws);
      // The gate's answer to curl: it refused, and why.
      expect(served.stdout, served.stderr).toContain("the upstream's certificate does not verify");
      const inProcess = await run(undefined, `THE_KEY=${value} NODE_TLS_REJECT_UNAUTHORIZED=0 exec "$@"`, args, ws);
      expect(inProcess.stdout, inProcess.stderr).toContain("the upstream's certificate does not verify");
      expect(up.requests).toEqual([]);
    } finally {
      await up.close();
    }
  });
});

describe("vak host started by hand (from a shell, a make recipe, a service manager) withholds what it inherited", () => {
  it("a descriptor above 2 it was handed is close-on-exec in the host, and no program it starts holds it: not a cmd: secret's command, not the sandbox", async () => {
    const rt = resident.runtimeDir();
    const held = join(resident.base, "held-by-the-shell");
    writeFileSync(held, "the caller's\n");
    const fd = openSync(held, "r+");
    const cfg = join(resident.base, "cfg-inherit");
    const seen = join(resident.base, "seen-by-cmd");
    mkdirSync(join(cfg, "vak"), { recursive: true });
    // The secret's command lists what it holds (a password manager started by the host would hold the same).
    writeFileSync(join(cfg, "vak", "config.toml"), `[secret_commands]\nprobe = ["/bin/sh", "-c", "for f in /proc/$$/fd/*; do readlink $f; done > ${seen}; echo v"]\n`);
    const env = baseEnv({ XDG_RUNTIME_DIR: rt, XDG_CONFIG_HOME: cfg });
    // At 60: above every number the spawn itself moves descriptors through.
    const child = spawn(process.execPath, [VAK_BIN, "host", "--idle-seconds", "120"], { env, stdio: ["ignore", "ignore", "ignore", ...Array<"ignore">(57).fill("ignore"), fd] });
    closeSync(fd);
    let pid = 0;
    try {
      await until("the host's pid file", () => existsSync(join(rt, "vak", "host.pid")));
      pid = hostPid(join(rt, "vak", "host.pid"));
      expect(pid).toBe(child.pid);
      expect(readlinkSync(`/proc/${pid}/fd/60`)).toBe(held);
      // O_CLOEXEC in fdinfo's octal flags.
      const flags = parseInt(/^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/${pid}/fdinfo/60`, "utf8"))![1]!, 8);
      expect(flags & 0o2000000, "the inherited descriptor is not close-on-exec in the host").not.toBe(0);
      const h: Host = { child, rt, sock: join(rt, "vak", "host.sock"), pid };
      const ws = resident.workspace();
      const r = await client(h, ["exec", "--secret", "W=cmd:probe", "--", "/bin/sh", "-c", "for f in /proc/self/fd/*; do readlink $f; done; echo ran"], { cwd: ws, env: { XDG_CONFIG_HOME: cfg } }).done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("ran");
      expect(r.stdout).not.toContain(held);
      expect(readFileSync(seen, "utf8")).not.toContain(held);
    } finally {
      if (pid > 1) process.kill(pid, "SIGKILL");
      else child.kill("SIGKILL");
    }
  });
});
