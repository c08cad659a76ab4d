import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { testBroker, type TestBroker } from "../support/broker.js";
import { grepWithJavaScript } from "../../src/worker/ops/grep.js";

// Each built-in op, run for real through the broker and a sandboxed worker.
describe("broker ops", () => {
  let s: Scratch;
  let t: TestBroker;
  beforeEach(async () => {
    s = scratch();
    writeFileSync(join(s.ws, "a.txt"), "one\ntwo\nthree\nfour\n");
    mkdirSync(join(s.ws, "src"));
    writeFileSync(join(s.ws, "src", "main.ts"), "export const answer = 42;\n// TODO: more\n");
    writeFileSync(join(s.ws, "src", "util.js"), "function todo() {}\n");
    t = await testBroker(s.ws);
  });
  afterEach(async () => {
    await t.close();
    s.cleanup();
  });

  it("read: whole file, and by offset and limit", async () => {
    const all = await t.broker.run({ kind: "read", path: "a.txt" });
    expect(all).toMatchObject({ ok: true, output: "one\ntwo\nthree\nfour\n", target: join(s.ws, "a.txt") });
    const part = await t.broker.run({ kind: "read", path: "a.txt", offset: 2, limit: 2 });
    expect(part).toMatchObject({ ok: true, output: "two\nthree", data: { from: 2, to: 3, more: true } });
  });

  it("read: a missing file and a directory are named errors", async () => {
    // Named by its path in the workspace, not the worker's /proc/self/fd/N/nope.txt.
    expect(await t.broker.run({ kind: "read", path: "nope.txt" })).toMatchObject({ ok: false, code: "not-found", message: `ENOENT: no such file or directory, open '${join(s.ws, "nope.txt")}'` });
    expect(await t.broker.run({ kind: "read", path: "src" })).toMatchObject({ ok: false, code: "bad-request", message: expect.stringContaining("use list") });
  });

  it("list, glob and grep", async () => {
    expect(await t.broker.run({ kind: "list", path: "." })).toMatchObject({ ok: true, output: "a.txt\nsrc/" });
    expect(await t.broker.run({ kind: "glob", pattern: "*.ts" })).toMatchObject({ ok: true, output: "src/main.ts" });
    expect(await t.broker.run({ kind: "glob", pattern: "src/*.{ts,js}" })).toMatchObject({ ok: true, output: "src/main.ts\nsrc/util.js" });
    const g = await t.broker.run({ kind: "grep", pattern: "todo", ignoreCase: true });
    expect(g.ok && g.output.split("\n").sort()).toEqual(["src/main.ts:2:// TODO: more", "src/util.js:1:function todo() {}"]);
    const only = await t.broker.run({ kind: "grep", pattern: "todo", ignoreCase: true, glob: "*.js" });
    expect(only).toMatchObject({ ok: true, output: "src/util.js:1:function todo() {}" });
    expect(await t.broker.run({ kind: "grep", pattern: "(" })).toMatchObject({ ok: false, code: "bad-request" });
  });

  it("grep without ripgrep: the JavaScript walk finds the same lines and skips binary and huge files", () => {
    writeFileSync(join(s.ws, "bin.dat"), Buffer.from([0, 1, 2, 116, 111, 100, 111]));
    const r = grepWithJavaScript({ pattern: "todo", path: s.ws, ignoreCase: true });
    expect("output" in r && r.output.split("\n").sort()).toEqual(["src/main.ts:2:// TODO: more", "src/util.js:1:function todo() {}"]);
  });

  it("write creates a file and its directory; edit replaces a unique match", async () => {
    expect(await t.broker.run({ kind: "write", path: "new/dir/f.txt", content: "alpha beta alpha\n" })).toMatchObject({ ok: true, data: { bytes: 17 } });
    expect(readFileSync(join(s.ws, "new/dir/f.txt"), "utf8")).toBe("alpha beta alpha\n");
    expect(await t.broker.run({ kind: "edit", path: "new/dir/f.txt", old: "alpha", new: "gamma" })).toMatchObject({ ok: false, code: "not-unique" });
    expect(readFileSync(join(s.ws, "new/dir/f.txt"), "utf8")).toBe("alpha beta alpha\n");
    expect(await t.broker.run({ kind: "edit", path: "new/dir/f.txt", old: "beta", new: "delta" })).toMatchObject({ ok: true });
    expect(await t.broker.run({ kind: "edit", path: "new/dir/f.txt", old: "alpha", new: "$&$'", replaceAll: true })).toMatchObject({ ok: true, data: { replacements: 2 } });
    expect(readFileSync(join(s.ws, "new/dir/f.txt"), "utf8")).toBe("$&$' delta $&$'\n");
    expect(await t.broker.run({ kind: "edit", path: "new/dir/f.txt", old: "zzz", new: "y" })).toMatchObject({ ok: false, code: "not-found" });
  });

  it("a FIFO never hangs an op: read, write, edit and grep refuse or skip it", async () => {
    execFileSync("mkfifo", [join(s.ws, "pipe")]);
    expect(await t.broker.run({ kind: "read", path: "pipe" })).toMatchObject({ ok: false, code: "bad-request", message: expect.stringContaining("not a regular file") });
    expect(await t.broker.run({ kind: "write", path: "pipe", content: "x" })).toMatchObject({ ok: false });
    expect(await t.broker.run({ kind: "edit", path: "pipe", old: "a", new: "b" })).toMatchObject({ ok: false });
    expect(await t.broker.run({ kind: "grep", pattern: "answer" })).toMatchObject({ ok: true, output: "src/main.ts:1:export const answer = 42;" });
    expect(grepWithJavaScript({ pattern: "answer", path: s.ws })).toMatchObject({ output: "src/main.ts:1:export const answer = 42;" });
  });

  it("exec runs a shell command in the workspace and bounds it", async () => {
    const r = await t.broker.run({ kind: "exec", command: "pwd; echo oops >&2; exit 3" });
    expect(r).toMatchObject({ ok: true, data: { exitCode: 3 } });
    expect(r.ok && r.output).toBe(`${s.ws}\n[stderr]\noops\n`);
    const missing = await t.broker.run({ kind: "exec", command: "/no/such/program" });
    expect(missing).toMatchObject({ ok: true, data: { exitCode: 127 } });
  });

  it("a read-only session's broker refuses writes before any worker starts", async () => {
    const ro = await testBroker(s.ws, { mode: "read-only" });
    try {
      const r = await ro.broker.run({ kind: "write", path: "a.txt", content: "x" });
      expect(r).toMatchObject({ ok: false, code: "denied", message: expect.stringContaining("read-only") });
      const ex = await ro.broker.run({ kind: "exec", command: "echo x > a.txt" });
      expect(ex.ok && ex.data?.exitCode).not.toBe(0);
      expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("one\ntwo\nthree\nfour\n");
      expect((await ro.events()).some((e) => e.kind === "worker.spawned" && (e.payload as { op: string }).op === "write")).toBe(false);
    } finally {
      await ro.close();
    }
  });

  it("malformed ops are refused with a named error and no worker", async () => {
    for (const bad of [{ kind: "read" }, { kind: "read", path: "a.txt", extra: 1 }, { kind: "teleport", path: "a" }, null, "read a.txt", { kind: "read", path: "a\0b" }]) {
      const r = await t.broker.run(bad);
      expect(r).toMatchObject({ ok: false, code: "bad-request" });
    }
    expect((await t.events()).filter((e) => e.kind === "worker.spawned")).toHaveLength(0);
  });

  it("every op is on the record: request, decision, target, worker, result", async () => {
    await t.broker.run({ kind: "read", path: "a.txt" });
    await t.broker.run({ kind: "read", path: "../outside" });
    await t.broker.close();
    const kinds = (await t.events()).map((e) => e.kind);
    const firstOp = ["op.requested", "target.resolved", "decision", "worker.spawned", "tool.result"];
    expect(kinds.filter((k) => firstOp.includes(k)).slice(0, 5)).toEqual(firstOp);
    expect(kinds).toContain("worker.exited");
    const denied = (await t.events()).find((e) => e.kind === "decision" && (e.payload as { allowed: boolean }).allowed === false);
    expect(denied?.payload).toMatchObject({ rule: "outside-grants" });
    const result = (await t.events()).find((e) => e.kind === "tool.result" && (e.payload as { ok: boolean }).ok);
    expect(result?.payload).toMatchObject({ op: "read", bytes: 19 });
    expect(existsSync(join(s.ws, "..", "outside"))).toBe(true);
  });
});
