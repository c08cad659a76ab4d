import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
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
      await new Promise((r) => child.on("close", r));
      // Vak itself holds it (it was handed to it); nothing it started does.
      expect(found.filter((c) => c !== "node")).toEqual([]);
      expect(found).toContain("node");
    } finally {
      closeSync(fd);
    }
  });

  it("the hostname and the machine's interfaces are the sandbox's own", async () => {
    const r = await sandboxSh(s.ws, `hostname; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`);
    expect(r.stdout.trim().split("\n")).toEqual(["vak", "lo"]);
  });
});
