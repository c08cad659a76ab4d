import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv, runVak, sandboxSh, spawnVak } from "../support/vak.js";

describe("nothing of the host's leaks in", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  it("host environment variables are absent (FAKE_SECRET, API keys, NODE_OPTIONS, LD_LIBRARY_PATH)", async () => {
    const env = baseEnv({ FAKE_SECRET: "s3cr3t-value", OPENAI_API_KEY: "sk-test-leak", NODE_OPTIONS: "--no-deprecation", LD_LIBRARY_PATH: "/tmp/evil-libs", SSH_AUTH_SOCK: "/tmp/agent.sock" });
    const r = await sandboxSh(s.ws, `env; cat /proc/self/environ /proc/1/environ | tr '\\0' '\\n'`, [], { env });
    expect(r.code).toBe(0);
    for (const v of ["s3cr3t-value", "sk-test-leak", "NODE_OPTIONS", "LD_LIBRARY_PATH", "SSH_AUTH_SOCK", "FAKE_SECRET"]) expect(r.stdout).not.toContain(v);
  });

  it("--allow-env passes exactly the named variable", async () => {
    const env = baseEnv({ FAKE_SECRET: "s3cr3t-value", SHARED: "visible" });
    const r = await sandboxSh(s.ws, `echo "shared=$SHARED secret=$FAKE_SECRET"`, ["--allow-env", "SHARED"], { env });
    expect(r.stdout.trim()).toBe("shared=visible secret=");
  });

  it("file descriptors the caller holds open are closed before the command runs", async () => {
    const path = join(s.outside, "held-open");
    writeFileSync(path, "held\n");
    const fd = openSync(path, "r");
    try {
      const r = await runVak(["exec", "--", "/bin/sh", "-c", "ls /proc/self/fd; cat <&5 || echo closed"], {
        cwd: s.ws,
        stdio: ["pipe", "pipe", "pipe", "ignore", "ignore", fd],
      });
      expect(r.stdout.split("\n").filter((l) => /^\d+$/.test(l)).map(Number).sort()).toEqual([0, 1, 2, 3]);
      expect(r.stdout).toContain("closed");
      expect(r.stdout).not.toContain("held");
    } finally {
      closeSync(fd);
    }
  });

  it("a descriptor the caller holds open reaches no process of the sandbox: not the launcher's monitor, init, resolver or relay either", async () => {
    // They parse what the command sends (the relay its proxy requests, the resolver its queries): none of them
    // may hold a file or socket of the caller's (an agent's pipe, a host socket, a file opened for writing).
    const path = join(s.outside, "held-open");
    writeFileSync(path, "held\n");
    const fd = openSync(path, "r+");
    const procs = (pid: number): number[] => {
      let kids: number[] = [];
      try {
        kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
      } catch {
        // gone
      }
      return [pid, ...kids.flatMap(procs)];
    };
    const holders = (pid: number): string[] =>
      procs(pid).flatMap((p) => {
        try {
          const comm = readFileSync(`/proc/${p}/comm`, "utf8").trim();
          return readdirSync(`/proc/${p}/fd`).some((f) => { try { return readlinkSync(`/proc/${p}/fd/${f}`) === path; } catch { return false; } }) ? [comm] : [];
        } catch {
          return [];
        }
      });
    try {
      const child = spawnVak(["exec", "--allow-net", "example.invalid", "--", "/bin/sh", "-c", "echo started; sleep 2"], {
        cwd: s.ws,
        // High up: not among the numbers the spawn itself moves descriptors through.
        stdio: ["pipe", "pipe", "pipe", ...Array<"ignore">(60).fill("ignore"), fd],
      });
      child.stdin?.end();
      await new Promise<void>((resolve) => child.stdout?.once("data", () => resolve()));
      await new Promise((r) => setTimeout(r, 300));
      const found = holders(child.pid!);
      // While vak runs: can this process list vak's descriptors (EACCES where vak is not dumpable and this is not root)?
      let listed = true;
      try {
        readdirSync(`/proc/${child.pid}/fd`);
      } catch (e) {
        listed = (e as NodeJS.ErrnoException).code !== "EACCES";
      }
      await new Promise((r) => child.on("close", r));
      // Nothing vak started holds it.
      expect(found.filter((c) => c !== "node")).toEqual([]);
      // The probe sees what it looks for: this process holds the file too.
      expect(readdirSync("/proc/self/fd").some((f) => { try { return readlinkSync(`/proc/self/fd/${f}`) === path; } catch { return false; } })).toBe(true);
      // Vak itself holds it (it was handed to it). Only root sees that: vak is not dumpable, so a process of the
      // same user (the container project's, which runs as nobody) may not read its descriptors.
      if (process.getuid?.() === 0) expect(found).toContain("node");
      else expect(listed).toBe(false);
    } finally {
      closeSync(fd);
    }
  });

  it("--full-access keeps what its caller handed on, as the command would run without Vak: a descriptor above 2 reaches the command", async () => {
    const path = join(s.outside, "handed-on");
    writeFileSync(path, "handed\n");
    const fd = openSync(path, "r");
    try {
      const r = await runVak(["exec", "--full-access", "--", "/bin/sh", "-c", "cat /proc/self/fd/60"], { cwd: s.ws, stdio: ["pipe", "pipe", "pipe", ...Array<"ignore">(57).fill("ignore"), fd] });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe("handed\n");
    } finally {
      closeSync(fd);
    }
  });

  // Known debt (src/cli/jobserver.ts): Node marks every descriptor from 0 to 15 it inherited close-on-exec as it
  // starts, and leaves no trace of which it inherited; only make's jobserver (named by MAKEFLAGS) is handed on there.
  it.fails("--full-access: a descriptor from 3 to 15 that no MAKEFLAGS names reaches the command (not yet: withheld)", async () => {
    const path = join(s.outside, "handed-low");
    writeFileSync(path, "low\n");
    const fd = openSync(path, "r");
    try {
      const r = await runVak(["exec", "--full-access", "--", "/bin/sh", "-c", "cat <&5"], { cwd: s.ws, stdio: ["pipe", "pipe", "pipe", "ignore", "ignore", fd] });
      expect(r.stdout).toBe("low\n");
    } finally {
      closeSync(fd);
    }
  });

  it("--full-access in a make recipe: the sub-make it runs still has make's jobserver (no \"jobserver unavailable\"), and it runs jobs in parallel", async () => {
    // make -j2 hands a recipe marked + the jobserver's pipe (MAKEFLAGS=--jobserver-auth=R,W); a sub-make that finds
    // it closed falls back to -j1 and says so.
    const vak = `${process.execPath} ${VAK_BIN}`;
    mkdirSync(join(s.ws, "sub"));
    // Two jobs that each wait for the other's file: they finish only if they run at once.
    writeFileSync(join(s.ws, "sub", "Makefile"), "all: a b\na:\n\ttouch a.started; for i in $$(seq 100); do [ -e b.started ] && exit 0; sleep 0.05; done; exit 1\nb:\n\ttouch b.started; for i in $$(seq 100); do [ -e a.started ] && exit 0; sleep 0.05; done; exit 1\n");
    writeFileSync(join(s.ws, "Makefile"), `all:\n\t+${vak} exec --full-access -- $(MAKE) -C sub\n`);
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn("make", ["-j2"], { cwd: s.ws, env: baseEnv(), stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      child.on("close", (code) => resolve({ code, out }));
    });
    expect(r.out).not.toContain("jobserver unavailable");
    expect(r.code, r.out).toBe(0);
  });

  it("the hostname and the machine's interfaces are the sandbox's own", async () => {
    const r = await sandboxSh(s.ws, `hostname; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`);
    expect(r.stdout.trim().split("\n")).toEqual(["vak", "lo"]);
  });
});

// Where the kernel writes a crashed process's memory as a file in its working directory (a pattern that is a plain
// name, not a pipe to a collector or a path elsewhere), the file's name starts with this; undefined elsewhere.
const corePrefix = (() => {
  const pattern = existsSync("/proc/sys/kernel/core_pattern") ? readFileSync("/proc/sys/kernel/core_pattern", "utf8").trim() : "|";
  const prefix = pattern.split("%")[0]!;
  return pattern.startsWith("|") || pattern.includes("/") || prefix === "" ? undefined : prefix;
})();

describe("the vak process's memory", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  // The vak process holds the run CA's private key (a read: grant terminates TLS), gate-held secrets and provider
  // keys. A crash must not write them as a core file into the workspace, where the next command (or the repository)
  // would have them; nor may another process of the user read them through ptrace or /proc/PID/mem.
  it.runIf(corePrefix !== undefined)("a vak exec that holds a run CA and crashes (SIGABRT, core dumps allowed) leaves no core file in the workspace", async () => {
    const child = spawnVak(["exec", "--allow-net", "read:127.0.0.1:9", "--", "/bin/sh", "-c", "echo started; sleep 30"], { cwd: s.ws, wrapper: ["/bin/sh", "-c", 'ulimit -c unlimited && exec "$@"', "sh"] });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    const closed = new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_code, signal) => resolve(signal)));
    for (let i = 0; i < 1000 && !out.includes("started"); i++) await new Promise((r) => setTimeout(r, 10));
    expect(out).toContain("started");
    child.kill("SIGABRT");
    expect(await closed).toBe("SIGABRT");
    expect(readdirSync(s.ws).filter((n) => n.startsWith(corePrefix!))).toEqual([]);
  });
});
