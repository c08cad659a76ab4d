import { closeSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak, sandboxSh } from "../support/vak.js";

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

  it("the hostname and the machine's interfaces are the sandbox's own", async () => {
    const r = await sandboxSh(s.ws, `hostname; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`);
    expect(r.stdout.trim().split("\n")).toEqual(["vak", "lo"]);
  });
});
