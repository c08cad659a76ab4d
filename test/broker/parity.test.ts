import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_APPROVAL_RULES, needsApproval } from "../../src/approvals/approval-rules.js";
import { TOOLS, toolCallToOp, toolEffect, toolJsonSchema } from "../../src/broker/registry.js";
import { scratch, type Scratch } from "../support/fs.js";
import { testBroker, type TestBroker } from "../support/broker.js";
import { ROOT } from "../support/paths.js";

/** One valid call of each tool; a new tool without one here fails the test below. */
const SAMPLES: Record<string, Record<string, unknown>> = {
  read_file: { path: "a.txt" },
  list_dir: {},
  glob: { pattern: "*.txt" },
  grep: { pattern: "hello" },
  write_file: { path: "b.txt", content: "written\n" },
  edit_file: { path: "a.txt", old_text: "hello", new_text: "howdy" },
  exec: { command: "echo from-exec" },
  web_fetch: { url: "http://127.0.0.1:9/" },
};

// Every tool the registry exposes runs through the broker and a sandboxed
// worker: none has a body of its own that touches the machine. The one
// exception is web_fetch (effect "net"), which the broker's host makes under
// the component's network grants: it starts no worker (below).
describe("tool parity", () => {
  let s: Scratch;
  let t: TestBroker;
  beforeAll(async () => {
    s = scratch();
    writeFileSync(join(s.ws, "a.txt"), "hello\n");
    t = await testBroker(s.ws);
  });
  afterAll(async () => {
    await t.close();
    s.cleanup();
  });

  it("every tool has a sample call here", () => {
    expect(TOOLS.map((x) => x.name).sort()).toEqual(Object.keys(SAMPLES).sort());
  });

  it.each(TOOLS.filter((x) => toolEffect(x) !== "net").map((x) => [x.name]))("%s runs as one op in a sandboxed worker", async (name) => {
    const call = toolCallToOp(name, SAMPLES[name]);
    expect(call.ok).toBe(true);
    if (!call.ok) return;
    const before = (await t.events()).length;
    const r = await t.broker.run(call.op);
    expect(r.ok).toBe(true);
    const mine = (await t.events()).slice(before);
    const spawned = mine.filter((e) => e.kind === "worker.spawned");
    expect(spawned).toHaveLength(1);
    expect(spawned[0]!.payload).toMatchObject({ sandbox: "namespaces", op: call.op.kind });
    expect((spawned[0]!.payload as { pid: number }).pid).toBeGreaterThan(0);
    expect(mine.some((e) => e.kind === "tool.result" && (e.payload as { ok: boolean }).ok)).toBe(true);
  });

  it("tools that change files or run commands say so, and the approval rules ask about exactly those", () => {
    expect(TOOLS.filter((x) => toolEffect(x) === "write" || toolEffect(x) === "exec").map((x) => x.name).sort()).toEqual(["edit_file", "exec", "write_file"]);
    for (const tool of TOOLS) {
      const call = toolCallToOp(tool.name, SAMPLES[tool.name]);
      if (!call.ok) throw new Error(call.message);
      expect(call.op.kind).toBe(tool.op);
      // A net op is a GET inside the network grants, its ceiling: it asks no more than a read.
      expect(needsApproval(DEFAULT_APPROVAL_RULES, call.op)).toBe(toolEffect(tool) === "write" || toolEffect(tool) === "exec");
    }
  });

  it("a tool whose op is of another kind than it declares is refused", () => {
    const read = TOOLS.find((x) => x.name === "read_file")!;
    const lying = { ...read, name: "read_file", toOp: () => ({ kind: "write", path: "x", content: "y" }) } as unknown as typeof read;
    const i = TOOLS.indexOf(read);
    (TOOLS as typeof read[])[i] = lying;
    try {
      expect(toolCallToOp("read_file", { path: "a.txt" })).toMatchObject({ ok: false, message: expect.stringContaining("declares read ops but made a write op") });
    } finally {
      (TOOLS as typeof read[])[i] = read;
    }
  });

  it("each tool's input has a JSON schema for the model, strict about unknown fields", () => {
    for (const tool of TOOLS) {
      const schema = toolJsonSchema(tool);
      expect(schema).toMatchObject({ type: "object", additionalProperties: false });
      expect(toolCallToOp(tool.name, { ...SAMPLES[tool.name], sneaky: true })).toMatchObject({ ok: false, message: expect.stringContaining("sneaky") });
    }
    expect(toolCallToOp("rm_rf", {})).toMatchObject({ ok: false, message: expect.stringContaining("no tool named") });
  });

  it("the registry and the protocol import nothing that touches the machine", () => {
    for (const file of ["src/broker/registry.ts", "src/protocol/ops.ts", "src/protocol/worker-protocol.ts"]) {
      const imports = [...readFileSync(join(ROOT, file), "utf8").matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]);
      expect(imports.filter((i) => !["zod", "./ops.js", "../protocol/ops.js"].includes(i!))).toEqual([]);
    }
  });

  it("web_fetch is made by the host under the component's network grants: no worker starts, and without a grant it reaches nothing", async () => {
    const call = toolCallToOp("web_fetch", SAMPLES.web_fetch);
    if (!call.ok) throw new Error(call.message);
    const before = (await t.events()).length;
    const r = await t.broker.run(call.op);
    expect(r).toMatchObject({ ok: false, code: "denied", message: expect.stringContaining("no network grant") });
    const mine = (await t.events()).slice(before);
    expect(mine.some((e) => e.kind === "worker.spawned")).toBe(false);
    expect(mine.some((e) => e.kind === "decision" && (e.payload as { allowed: boolean }).allowed === false)).toBe(true);
  });
});
