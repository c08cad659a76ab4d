import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PROTOCOL_VERSION } from "../../src/protocol/worker-protocol.js";
import { WorkerProcess } from "../../src/broker/worker-process.js";
import { handle } from "../../src/worker/main.js";
import { decide } from "../../src/policy/plan.js";
import { hostFacts } from "../../src/sandbox/host.js";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { testBroker, type TestBroker } from "../support/broker.js";

const SECRET = "TOP-SECRET-OUTSIDE-THE-WORKSPACE";

let s: Scratch;
let t: TestBroker;
beforeEach(async () => {
  s = scratch({ git: true });
  writeFileSync(join(s.outside, "secret.txt"), `${SECRET}\n`);
  writeFileSync(join(s.ws, "inside.txt"), "inside\n");
  t = await testBroker(s.ws);
});
afterEach(async () => {
  await t.close();
  s.cleanup();
});

/**
 * A host process that flips `name` in dir between a harmless target and a
 * symlink out of the workspace, as fast as it can, until stopped.
 */
function swapper(dir: string, name: string, harmless: string, evil: string): ChildProcess {
  // A directory cannot be renamed over, so the live name is removed first (never following the link).
  const script = `
    const fs = require("fs"), p = require("path");
    const [dir, name, harmless, evil] = process.argv.slice(1);
    const live = p.join(dir, name), a = p.join(dir, ".swap-a"), b = p.join(dir, ".swap-b");
    for (let i = 0; ; i++) {
      try {
        fs.rmSync(a, { recursive: true, force: true }); fs.rmSync(b, { force: true });
        if (harmless === "DIR") { fs.mkdirSync(a); fs.writeFileSync(p.join(a, "f.txt"), "harmless\\n"); }
        else fs.writeFileSync(a, harmless);
        fs.symlinkSync(evil, b);
        try {
          if (fs.lstatSync(live).isSymbolicLink()) fs.unlinkSync(live); else if (harmless === "DIR") fs.rmSync(live, { recursive: true });
        } catch {}
        fs.renameSync(i % 2 ? a : b, live);
      } catch {}
    }`;
  return spawn(process.execPath, ["-e", script, dir, name, harmless, evil], { stdio: "ignore" });
}

/** Whether a race was real: some ops reached a worker and some were refused or caught. */
function raced(events: Awaited<ReturnType<TestBroker["events"]>>): { workers: number; refused: number } {
  return {
    workers: events.filter((e) => e.kind === "worker.spawned").length,
    refused: events.filter((e) => e.kind === "tool.result" && !(e.payload as { ok: boolean }).ok).length,
  };
}

describe("symlink-swap races", () => {
  it("during read: nothing outside the workspace is ever read", async () => {
    const sw = swapper(s.ws, "flip", "harmless\n", join(s.outside, "secret.txt"));
    try {
      const seen = new Set<string>();
      for (let i = 0; i < 60; i++) {
        const ops = await Promise.all([t.broker.run({ kind: "read", path: "flip" }), t.broker.run({ kind: "read", path: "flip" })]);
        for (const r of ops) {
          expect(JSON.stringify(r)).not.toContain(SECRET);
          seen.add(r.ok ? "read" : r.code);
        }
      }
      // The race was real: some reads got the file, others hit the link (refused by the broker or caught by the worker).
      expect(seen.has("read")).toBe(true);
      expect([...seen].some((c) => c !== "read")).toBe(true);
    } finally {
      sw.kill("SIGKILL");
    }
  });

  it("during read through a swapped parent directory", async () => {
    const sw = swapper(s.ws, "dir", "DIR", s.outside);
    try {
      for (let i = 0; i < 60; i++) {
        const [r, h] = await Promise.all([t.broker.run({ kind: "read", path: "dir/secret.txt" }), t.broker.run({ kind: "list", path: "dir" })]);
        expect(JSON.stringify(r)).not.toContain(SECRET);
        expect(JSON.stringify(h)).not.toContain("secret.txt");
      }
      const race = raced((await t.events()));
      expect(race.workers).toBeGreaterThan(10);
      expect(race.refused).toBeGreaterThan(10);
    } finally {
      sw.kill("SIGKILL");
    }
  });

  it("during write: nothing outside the workspace is ever written", async () => {
    const sw = swapper(s.ws, "dir", "DIR", s.outside);
    const sw2 = swapper(s.ws, "flip", "harmless\n", join(s.outside, "secret.txt"));
    try {
      for (let i = 0; i < 60; i++) {
        await Promise.all([
          t.broker.run({ kind: "write", path: "dir/planted.txt", content: "planted\n" }),
          t.broker.run({ kind: "write", path: "flip", content: "overwritten\n" }),
          t.broker.run({ kind: "edit", path: "flip", old: "harmless", new: "edited" }),
        ]);
      }
      const race = raced((await t.events()));
      expect(race.workers).toBeGreaterThan(20);
      expect(race.refused).toBeGreaterThan(20);
    } finally {
      sw.kill("SIGKILL");
      sw2.kill("SIGKILL");
    }
    expect(readdirSync(s.outside)).toEqual(["secret.txt"]);
    expect(readFileSync(join(s.outside, "secret.txt"), "utf8")).toBe(`${SECRET}\n`);
  });
});

describe("the swapped link is caught twice (invariant 7)", () => {
  it("by the worker alone: an op on a path with a link in it is refused as changed", () => {
    symlinkSync(s.outside, join(s.ws, "dir"));
    symlinkSync(join(s.outside, "secret.txt"), join(s.ws, "file"));
    const ops = [
      { kind: "read", path: join(s.ws, "dir", "secret.txt") },
      { kind: "read", path: join(s.ws, "file") },
      { kind: "list", path: join(s.ws, "dir") },
      { kind: "write", path: join(s.ws, "dir", "planted.txt"), content: "x" },
      { kind: "write", path: join(s.ws, "dir", "sub", "planted.txt"), content: "x" },
      { kind: "glob", pattern: "*", path: join(s.ws, "dir") },
      { kind: "write", path: join(s.ws, "file"), content: "x" },
      { kind: "edit", path: join(s.ws, "file"), old: "TOP", new: "x" },
    ];
    for (const op of ops) {
      const r = handle(JSON.stringify({ v: PROTOCOL_VERSION, id: "1", op }));
      expect(r).toMatchObject({ ok: false, error: { code: "changed" } });
      expect(JSON.stringify(r)).not.toContain(SECRET);
    }
    expect(readdirSync(s.outside)).toEqual(["secret.txt"]);
    expect(readFileSync(join(s.outside, "secret.txt"), "utf8")).toBe(`${SECRET}\n`);
  });

  it("by the OS sandbox alone: a worker that does follow links still reaches nothing outside", async () => {
    symlinkSync(join(s.outside, "secret.txt"), join(s.ws, "file"));
    const w = rogueWorker(`cat >/dev/null; printf '{"v":1,"id":"abc","ok":true,"output":"%s","truncated":false}\\n' "$(cat file ${s.outside}/secret.txt 2>&1 | tr -d '\\n\\"')"; echo x > ${s.outside}/planted.txt`);
    const r = await w.run(request);
    expect(r.ok).toBe(true);
    expect(r.ok && r.output).toContain("No such file");
    expect(JSON.stringify(r)).not.toContain(SECRET);
    await w.done;
    expect(readdirSync(s.outside)).toEqual(["secret.txt"]);
  });
});

describe("escapes by path spelling", () => {
  it.each([
    ["..", "../outside/secret.txt"],
    ["a/../..", "a/../../outside/secret.txt"],
    ["./ then ..", "./././../outside/secret.txt"],
    ["absolute", "OUTSIDE"],
    ["doubled slashes", "OUTSIDE_SLASHES"],
    ["/proc/self/root", "/proc/self/root/OUTSIDE"],
    ["/proc/self/cwd", "/proc/self/cwd/../outside/secret.txt"],
    ["/etc/passwd", "/etc/passwd"],
  ])("%s is refused by the broker, naming the rule", async (_name, raw) => {
    const path = raw
      .replace("OUTSIDE_SLASHES", `/${s.outside}//secret.txt`)
      .replace("/OUTSIDE", join(s.outside, "secret.txt"))
      .replace("OUTSIDE", join(s.outside, "secret.txt"));
    const r = await t.broker.run({ kind: "read", path });
    expect(r).toMatchObject({ ok: false, code: "denied" });
    expect(!r.ok && r.message).toMatch(/outside the workspace and every grant|symbolic link/);
    expect(JSON.stringify(r)).not.toContain(SECRET);
    const w = await t.broker.run({ kind: "write", path: raw.startsWith("/etc") ? "/etc/vak-pwned" : path, content: "x" });
    expect(w).toMatchObject({ ok: false, code: "denied" });
  });

  it("percent-encoded dots are a file name, not a way up", async () => {
    const r = await t.broker.run({ kind: "read", path: "%2e%2e/outside/secret.txt" });
    expect(r).toMatchObject({ ok: false, code: "not-found", target: join(s.ws, "%2e%2e/outside/secret.txt") });
    const w = await t.broker.run({ kind: "write", path: "%2e%2e%2f/x.txt", content: "x" });
    expect(w).toMatchObject({ ok: true, target: join(s.ws, "%2e%2e%2f/x.txt") });
    expect(readdirSync(s.outside)).toEqual(["secret.txt"]);
  });

  it("a symlink in the workspace that points out is not followed", async () => {
    symlinkSync(join(s.outside, "secret.txt"), join(s.ws, "link"));
    symlinkSync(s.outside, join(s.ws, "linkdir"));
    for (const path of ["link", "linkdir/secret.txt", "linkdir/new.txt"]) {
      expect(await t.broker.run({ kind: "read", path })).toMatchObject({ ok: false, code: "denied" });
      expect(await t.broker.run({ kind: "write", path, content: "x" })).toMatchObject({ ok: false, code: "denied" });
    }
    expect(await t.broker.run({ kind: "list", path: "linkdir" })).toMatchObject({ ok: false, code: "denied" });
    expect(await t.broker.run({ kind: "grep", pattern: "SECRET", path: "linkdir" })).toMatchObject({ ok: false, code: "denied" });
    const g = await t.broker.run({ kind: "grep", pattern: "SECRET" });
    expect(JSON.stringify(g)).not.toContain(SECRET);
    expect(readFileSync(join(s.outside, "secret.txt"), "utf8")).toBe(`${SECRET}\n`);
  });

  it("Vak's own state is never a target, even when a grant covers it", async () => {
    const state = hostFacts().stateDirs[0]!;
    const r = await t.broker.run({ kind: "read", path: join(state, "journal.db") });
    expect(r).toMatchObject({ ok: false, code: "denied" });
  });
});

describe("protected paths via edit, write and exec", () => {
  const config = () => join(s.ws, ".git", "config");
  it.each([".git/config", ".git/hooks/pre-commit", "sub/.git/hooks/post-checkout", ".vscode/tasks.json", ".envrc", ".claude/settings.json", "deep/er/.npmrc"])(
    "write_file %s is refused",
    async (path) => {
      const r = await t.broker.run({ kind: "write", path, content: "[core]\n\tfsmonitor = touch /tmp/pwned\n" });
      expect(r).toMatchObject({ ok: false, code: "denied", message: expect.stringContaining("protected path") });
      expect(existsSync(join(s.ws, path)) && readFileSync(join(s.ws, path), "utf8").includes("pwned")).toBe(false);
    },
  );

  it("edit_file of .git/config is refused", async () => {
    const before = readFileSync(config(), "utf8");
    const r = await t.broker.run({ kind: "edit", path: ".git/config", old: "[core]", new: "[core]\n\tfsmonitor = touch /tmp/pwned" });
    expect(r).toMatchObject({ ok: false, code: "denied", message: expect.stringContaining(".git/config") });
    expect(readFileSync(config(), "utf8")).toBe(before);
  });

  it("a workspace symlink to .git/config does not make it writable", async () => {
    symlinkSync(".git/config", join(s.ws, "cfg"));
    const before = readFileSync(config(), "utf8");
    expect(await t.broker.run({ kind: "write", path: "cfg", content: "x" })).toMatchObject({ ok: false, code: "denied" });
    expect(await t.broker.run({ kind: "edit", path: "cfg", old: "[core]", new: "x" })).toMatchObject({ ok: false, code: "denied" });
    expect(readFileSync(config(), "utf8")).toBe(before);
  });

  it("exec cannot write them either: the OS sandbox holds the same rule", async () => {
    const before = readFileSync(config(), "utf8");
    const r = await t.broker.run({ kind: "exec", command: "echo '[alias] x = !touch /tmp/pwned' >> .git/config; mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; echo ok" });
    expect(r.ok).toBe(true);
    expect(r.ok && r.output).toContain("ok");
    expect(readFileSync(config(), "utf8")).toBe(before);
    expect(existsSync(join(s.ws, ".git/hooks/pre-commit"))).toBe(false);
    expect(r.ok && (r.data?.denied as string[]).join("\n")).toContain(".git");
  });
});

/** A sandboxed process that plays a worker gone wrong, driven by the real WorkerProcess. */
function rogueWorker(script: string): WorkerProcess {
  const plan = decide(
    { mode: "workspace-write", sandbox: "namespaces", workspace: s.ws, grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: { timeoutMs: 30_000 }, command: ["/bin/sh", "-c", script] },
    hostFacts(),
  );
  return new WorkerProcess(plan, 1);
}
const request = { v: PROTOCOL_VERSION as 1, id: "abc", op: { kind: "read" as const, path: "/x" } };

describe("a worker gone wrong fails closed", () => {
  it("one that prints forever is stopped at the size bound", async () => {
    const w = rogueWorker("cat >/dev/null; yes AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA | tr -d '\\n'");
    expect(await w.run(request)).toMatchObject({ ok: false, code: "worker-failed", message: expect.stringContaining("bytes") });
    const r = await w.done;
    expect(r.code).not.toBe(0);
  });

  it("one that forks forever is contained and stopped", async () => {
    const w = rogueWorker("cat >/dev/null; f() { f | f & }; f; sleep 1; echo not-json");
    const r = await w.run(request, AbortSignal.timeout(3000));
    expect(r.ok).toBe(false);
    await w.done;
  });

  it("one that sleeps forever is cancelled at the op's timeout", async () => {
    const marker = `${Math.floor(Math.random() * 1e6) + 1000}.7`;
    const w = rogueWorker(`cat >/dev/null; sleep ${marker}`);
    const r = await w.run(request, AbortSignal.timeout(500));
    expect(r).toMatchObject({ ok: false, code: "cancelled" });
    expect(processesWith(marker)).toEqual([]);
  });

  it.each([
    ["not JSON", "echo 'hello there'"],
    ["another protocol version", `echo '{"v":2,"id":"abc","ok":true,"output":"x","truncated":false}'`],
    ["an unknown field", `echo '{"v":1,"id":"abc","ok":true,"output":"x","truncated":false,"admin":true}'`],
    ["another request's id", `echo '{"v":1,"id":"zzz","ok":true,"output":"x","truncated":false}'`],
    ["two responses", `printf '{"v":1,"id":"abc","ok":true,"output":"x","truncated":false}\\n{"v":1,"id":"abc","ok":true,"output":"y","truncated":false}\\n'`],
    ["nothing at all", "exit 0"],
    ["a crash", "kill -SEGV $$"],
    ["a missing executable", "exec /no/such/worker"],
  ])("one that answers with %s", async (_name, body) => {
    const w = rogueWorker(`cat >/dev/null; ${body}`);
    const r = await w.run(request);
    expect(r).toMatchObject({ ok: false, code: "worker-failed" });
  });

  it("a worker runs exactly one op", async () => {
    const w = rogueWorker(`cat >/dev/null; echo '{"v":1,"id":"abc","ok":true,"output":"x","truncated":false}'`);
    expect(await w.run(request)).toMatchObject({ ok: true, output: "x" });
    await expect(w.run(request)).rejects.toThrow(/exactly one op/);
  });

  it("the real worker refuses a malformed request with a named error", async () => {
    const boot = join(s.ws, "..", "boot.txt");
    writeFileSync(boot, "");
    for (const [input, message] of [
      ["garbage", /not JSON/],
      [JSON.stringify({ v: 9, id: "a", op: { kind: "read", path: "/x" } }), /protocol version 9/],
      [JSON.stringify({ v: 1, id: "a", op: { kind: "read", path: "/x" }, extra: 1 }), /malformed/],
      [JSON.stringify({ v: 1, id: "a", op: { kind: "exec", command: "id" } }), /run by the launcher/],
    ] as const) {
      const out = await new Promise<string>((resolve) => {
        const c = spawn(process.execPath, [join(__dirname, "../../dist/runtime/worker-boot.cjs")], { stdio: ["pipe", "pipe", "ignore"] });
        let o = "";
        c.stdout.on("data", (d: Buffer) => (o += d.toString()));
        c.on("close", () => resolve(o));
        c.stdin.end(input);
      });
      const lines = out.trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ ok: false, error: { message: expect.stringMatching(message) } });
    }
  });
});

describe("cancellation", () => {
  for (const sandbox of ["namespaces", "reduced"] as const) {
    it(`a cancelled op's grandchildren do not outlive it (${sandbox})`, async () => {
      const b = await testBroker(s.ws, { sandbox });
      const marker = `${Math.floor(Math.random() * 1e6) + 1000}.9`;
      try {
        const ac = new AbortController();
        const script = `(trap '' HUP TERM INT; sleep ${marker}; touch escaped1) & setsid sh -c 'sleep ${marker}; touch escaped2' & (sleep ${marker} &) ; echo started > started; sleep ${marker}`;
        const op = b.broker.run({ kind: "exec", command: script }, { signal: ac.signal });
        for (let i = 0; i < 200 && !existsSync(join(s.ws, "started")); i++) await new Promise((r) => setTimeout(r, 25));
        for (let i = 0; i < 200 && processesWith(`sleep ${marker}`).length < 4; i++) await new Promise((r) => setTimeout(r, 25));
        expect(processesWith(`sleep ${marker}`).length).toBeGreaterThanOrEqual(4);
        ac.abort();
        const r = await op;
        expect(r).toMatchObject({ ok: false, code: "cancelled" });
        // When the broker reports the cancel, nothing of the op is left.
        expect(processesWith(marker)).toEqual([]);
      } finally {
        for (const pid of processesWith(marker)) process.kill(pid, "SIGKILL");
        await b.close();
      }
      expect(existsSync(join(s.ws, "escaped1")) || existsSync(join(s.ws, "escaped2"))).toBe(false);
    });
  }

  it("closing the broker stops every worker, warm or busy", async () => {
    const b = await testBroker(s.ws, { poolSize: 2 });
    b.broker.prewarm();
    const marker = `${Math.floor(Math.random() * 1e6) + 1000}.3`;
    const op = b.broker.run({ kind: "exec", command: `sleep ${marker}` });
    for (let i = 0; i < 200 && processesWith(`sleep ${marker}`).length < 1; i++) await new Promise((r) => setTimeout(r, 25));
    await b.close();
    expect(await op).toMatchObject({ ok: false });
    expect(processesWith(marker)).toEqual([]);
  });
});

describe("policy generations", () => {
  it("a policy change with 20 ops in flight: none finishes under the old generation", async () => {
    const b = await testBroker(s.ws, { maxConcurrent: 8, poolSize: 2 });
    b.broker.prewarm();
    try {
      const ops = Array.from({ length: 20 }, (_, i) =>
        i % 2
          ? b.broker.run({ kind: "exec", command: `sleep 1; echo done > late-${i}` })
          : b.broker.run({ kind: "write", path: `w-${i}.txt`, content: "x" }).then(async (r) => (r.ok ? b.broker.run({ kind: "exec", command: `sleep 1; echo done > late-${i}` }) : r)),
      );
      await new Promise((r) => setTimeout(r, 300));
      await b.broker.setGeneration(2, "test: grants narrowed");
      const changedAt = (await b.events()).find((e) => e.kind === "policy.generation")!.seq;
      const results = await Promise.all(ops);
      for (const r of results) expect(r).toMatchObject({ ok: false });
      expect(results.map((r) => (r.ok ? "ok" : r.code)).every((c) => c === "revoked" || c === "cancelled")).toBe(true);
      await new Promise((r) => setTimeout(r, 1500));
      expect(readdirSync(s.ws).filter((f) => f.startsWith("late-"))).toEqual([]);
      await b.broker.close();
      // After the change, the journal holds no successful result of the old generation.
      const late = (await b.events()).filter((e) => e.seq > changedAt && e.kind === "tool.result" && (e.payload as { ok: boolean }).ok && e.generation < 2);
      expect(late).toEqual([]);
      expect(b.broker.generation).toBe(2);
    } finally {
      await b.close();
    }
  });

  it("the warm pool hands out a worker once, and drains on a policy change", async () => {
    const b = await testBroker(s.ws, { poolSize: 1 });
    b.broker.prewarm();
    try {
      for (let i = 0; i < 5; i++) {
        expect(await b.broker.run({ kind: "read", path: "inside.txt" })).toMatchObject({ ok: true, output: "inside\n" });
        await new Promise((r) => setTimeout(r, 100));
      }
      await b.broker.setGeneration(2);
      expect(await b.broker.run({ kind: "read", path: "inside.txt" })).toMatchObject({ ok: true });
      const spawned = (await b.events()).filter((e) => e.kind === "worker.spawned").map((e) => (e.payload as { pid: number }).pid);
      expect(new Set(spawned).size).toBe(spawned.length);
      expect((await b.events()).filter((e) => e.kind === "worker.spawned" && (e.payload as { warm: boolean }).warm).length).toBeGreaterThan(2);
    } finally {
      await b.close();
    }
  });
});

describe("Vak's state behind a symlinked HOME", () => {
  it("stays out of reach when the workspace is the real directory the link points to", async () => {
    const real = join(s.root, "realhome");
    const link = join(s.root, "home");
    mkdirSync(join(real, ".config", "vak"), { recursive: true });
    mkdirSync(join(real, ".local", "state", "vak"), { recursive: true });
    writeFileSync(join(real, ".config", "vak", "secrets.json"), '{"version":1,"secrets":{"x":{"value":"plain-store-value","created":"now"}}}');
    writeFileSync(join(real, ".local", "state", "vak", "journal.db"), "journal");
    symlinkSync(real, link);
    const env = { ...process.env, XDG_CONFIG_HOME: join(link, ".config"), XDG_STATE_HOME: join(link, ".local", "state") };
    const b = await testBroker(real, { host: hostFacts(env) });
    try {
      for (const path of [".config/vak/secrets.json", join(real, ".config/vak/secrets.json"), ".local/state/vak/journal.db"])
        expect(await b.broker.run({ kind: "read", path })).toMatchObject({ ok: false, code: "denied", message: expect.stringContaining("Vak's own state") });
      expect(await b.broker.run({ kind: "list", path: ".local/state/vak" })).toMatchObject({ ok: false, code: "denied" });
      expect(await b.broker.run({ kind: "write", path: ".config/vak/config.toml", content: '[approvals]\nexec = "allow"\n' })).toMatchObject({ ok: false, code: "denied" });
      const r = await b.broker.run({ kind: "exec", command: "cat .config/vak/secrets.json; ls -A .local/state/vak; echo x > .config/vak/config.toml; echo done" });
      expect(r.ok && r.output).toContain("done");
      expect(JSON.stringify(r)).not.toContain("plain-store-value");
      expect(JSON.stringify(r)).not.toContain("journal.db");
      expect(existsSync(join(real, ".config", "vak", "config.toml"))).toBe(false);
    } finally {
      await b.close();
    }
  });
});

describe("read-only means nothing is written", () => {
  it("drops explicit write grants too, on a downgrade and for a read-only broker", async () => {
    mkdirSync(join(s.ws, "extra"));
    const b = await testBroker(s.ws, { grants: { write: ["extra"] } });
    try {
      expect(await b.broker.run({ kind: "write", path: "extra/one.txt", content: "1" })).toMatchObject({ ok: true });
      await b.broker.setGeneration(2, "test: downgrade", { mode: "read-only" });
      expect(await b.broker.run({ kind: "write", path: "extra/two.txt", content: "2" })).toMatchObject({ ok: false, code: "denied" });
      const ex = await b.broker.run({ kind: "exec", command: "echo 3 > extra/three.txt; echo done" });
      expect(ex.ok && ex.output).toContain("done");
      expect(existsSync(join(s.ws, "extra", "two.txt")) || existsSync(join(s.ws, "extra", "three.txt"))).toBe(false);
    } finally {
      await b.close();
    }
  });
});

describe("a refusal is no oracle of the host", () => {
  /** Links in the workspace to every kind of thing outside it; refusals through each must read the same. */
  const targets = (): Record<string, string> => ({
    "an existing file": join(s.outside, "secret.txt"),
    "a missing file": join(s.outside, "missing.txt"),
    "an existing directory": s.outside,
    "a missing directory": `/nonexistent-${Math.random().toString(36).slice(2)}/deeper`,
    "a link loop outside": join(s.outside, "loop"),
    "a root-only file": "/etc/shadow",
    "/proc/self/root": "/proc/self/root/etc",
    "a chain out and back in": join(s.outside, "back"),
    "a relative way out": "../outside/secret.txt",
  });

  it("through a workspace link, the refusal is the same whatever is at the other end, and names nothing of it", async () => {
    symlinkSync(join(s.outside, "loop"), join(s.outside, "loop"));
    symlinkSync(join(s.ws, "inside.txt"), join(s.outside, "back"));
    const ops = (p: string) => [
      { kind: "read", path: p }, { kind: "read", path: `${p}/x` }, { kind: "list", path: p }, { kind: "glob", pattern: "*", path: p },
      { kind: "grep", pattern: "x", path: p }, { kind: "write", path: p, content: "x" }, { kind: "write", path: `${p}/new.txt`, content: "x" },
      { kind: "edit", path: p, old: "a", new: "b" },
    ];
    const seen = new Map<string, Set<string>>();
    for (const [what, target] of Object.entries(targets())) {
      const name = `link-${Object.keys(targets()).indexOf(what)}`;
      symlinkSync(target, join(s.ws, name));
      for (const [i, op] of ops(name).entries()) {
        const r = await t.broker.run(op);
        expect(r.ok, `${what}: ${JSON.stringify(op)}`).toBe(false);
        const message = (r as { message: string }).message.replaceAll(name, "LINK");
        for (const leak of [s.outside, "/etc", "/nonexistent", "/proc", "exist", "nothing", "loop", "secret", "directory", "ELOOP", "EACCES", "ENOENT"])
          expect(message, `${what}: ${message}`).not.toContain(leak);
        seen.set(`${i}`, (seen.get(`${i}`) ?? new Set()).add(`${(r as { code: string }).code}: ${message}`));
      }
    }
    // One answer per op, whatever was there.
    for (const [i, answers] of seen) expect([...answers], `op ${i}`).toHaveLength(1);
    // Nor does the record hold what the links lead to.
    const recorded = JSON.stringify(await t.events());
    expect(recorded).not.toContain(s.outside);
    expect(recorded).not.toContain("/etc/shadow");
  });

  it("an absolute path outside every grant is refused in the same words whether it exists, is a directory, a link or unreadable", async () => {
    symlinkSync("/etc/passwd", join(s.outside, "a-link"));
    const asked = [join(s.outside, "secret.txt"), join(s.outside, "missing.txt"), s.outside, join(s.outside, "a-link"), "/etc/shadow", "/root/.ssh/id_rsa", `/nonexistent-${Date.now()}/x`, "/proc/1/environ"];
    for (const path of asked)
      for (const op of [{ kind: "read", path }, { kind: "list", path }, { kind: "write", path, content: "x" }]) {
        const r = await t.broker.run(op);
        const grant = op.kind === "write" ? "--allow-write" : "--allow-read";
        expect(r).toMatchObject({ ok: false, code: "denied", message: `${path}: it is outside the workspace and every grant; grant it with ${grant} ${path}` });
      }
  });
});

describe("sizes a model controls, on the broker", () => {
  it("one replace_all cannot turn 20 KB into 80 MB: it is refused with the bound, and the file is unchanged", async () => {
    const file = join(s.ws, "small.txt");
    writeFileSync(file, "a".repeat(20 * 1024));
    const bomb = await t.broker.run({ kind: "edit", path: "small.txt", old: "a", new: "b".repeat(4000), replaceAll: true });
    expect(bomb).toMatchObject({ ok: false, code: "too-large", message: expect.stringMatching(/would make .* 81920000 bytes \(it is 20480\); an edit may make a file at most 16777216 bytes and grow it by at most 2097152/) });
    // Growth just past the bound is refused as well; within it the edit is made.
    writeFileSync(file, "a".repeat(1024));
    expect(await t.broker.run({ kind: "edit", path: "small.txt", old: "a", new: "c".repeat(2050), replaceAll: true })).toMatchObject({ ok: false, code: "too-large" });
    expect(readFileSync(file, "utf8")).toBe("a".repeat(1024));
    expect(await t.broker.run({ kind: "edit", path: "small.txt", old: "a", new: "c".repeat(1000), replaceAll: true })).toMatchObject({ ok: true });
    expect(readFileSync(file, "utf8").length).toBe(1024 * 1000);
  });

  it("an oversized op is refused with its size, never as 'the worker answered another request'", async () => {
    writeFileSync(join(s.ws, "f.txt"), "x\n");
    const cases: [string, object, RegExp][] = [
      ["old text of 3 MB", { kind: "edit", path: "f.txt", old: "x".repeat(3 * 1024 * 1024), new: "y" }, /the text to replace is larger than 2097152 bytes/],
      ["content of 4.5 MB in 1.5 M characters", { kind: "write", path: "g.txt", content: "€".repeat(1_500_000) }, /the content is larger than 2097152 bytes/],
      ["an input of 3 MB", { kind: "write", path: "g.txt", content: "é".repeat(1_100_000) }, /larger than 2097152 bytes/],
      ["content that JSON's escaping makes 12 MB", { kind: "write", path: "g.txt", content: "\u0001".repeat(2 * 1024 * 1024) }, /as sent to its worker, more than 6291456; send less at once/],
      ["an edit of two contents that escape to 8 MB", { kind: "edit", path: "f.txt", old: '"'.repeat(2_000_000), new: '"'.repeat(2_000_000) }, /as sent to its worker/],
    ];
    for (const [what, op, message] of cases) {
      const r = await t.broker.run(op);
      expect(r, what).toMatchObject({ ok: false, message: expect.stringMatching(message) });
      expect(JSON.stringify(r)).not.toContain("another request");
    }
    expect(existsSync(join(s.ws, "g.txt"))).toBe(false);
  });

  it("a model-written command cannot make a file past the default size, sparse or not", async () => {
    const r = await t.broker.run({ kind: "exec", command: "truncate -s 50G sparse; dd if=/dev/zero of=sparse2 bs=1 count=1 seek=2G 2>&1; truncate -s 900M fine; echo done" });
    expect(r).toMatchObject({ ok: true });
    expect(r.ok && r.output).toContain("done");
    for (const f of ["sparse", "sparse2"]) if (existsSync(join(s.ws, f))) expect(statSync(join(s.ws, f)).size).toBeLessThanOrEqual(1024 ** 3);
    expect(statSync(join(s.ws, "fine")).size).toBe(900 * 1024 * 1024);
    // A component's own limit still applies in its place.
    const small = await testBroker(s.ws, { limits: { maxFileBytes: 1024 } });
    try {
      await small.broker.run({ kind: "exec", command: "head -c 4096 /dev/zero > capped; true" });
      expect(statSync(join(s.ws, "capped")).size).toBe(1024);
    } finally {
      await small.close();
    }
  });
});
