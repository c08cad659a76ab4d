import { describe, expect, it } from "vitest";
import { VakError } from "../../src/policy/errors.js";
import { Redactor } from "../../src/secrets/redact.js";
import { CommitQueue, type PreparedEvent } from "../../src/journal/commit-queue.js";
import type { StoredEvent } from "../../src/journal/events.js";
import { SessionWriter } from "../../src/journal/session-writer.js";

// The group commit itself, with a commit this test lets return when it says
// (the backends' real commits are tested in journal.test.ts and many-hosts):
// what queues while a commit is in flight goes in together in the next one, in
// order, and is prepared (redacted) meanwhile, never with what the redactor
// did not know yet.
function harness() {
  const batches: PreparedEvent[][] = [];
  const gates: (() => void)[] = [];
  const redactor = new Redactor();
  const queue = new CommitQueue(
    (batch) => {
      batches.push(batch);
      return new Promise<StoredEvent[]>((resolve) => gates.push(() => resolve(batch.map((p, i) => ({ seq: i, session: p.session, sessionSeq: p.session_seq, time: p.time, kind: p.kind as StoredEvent["kind"], actor: JSON.parse(p.actor), generation: p.generation, payload: JSON.parse(p.payload), prevHash: "", hash: "" })))));
    },
    redactor,
    (e) => new VakError("journal", String(e)),
  );
  const session = new SessionWriter(queue, "s1", 0, { kind: "exec", started: "t", title: "t", workspace: null });
  const tick = () => new Promise((r) => setImmediate(r));
  return { batches, gates, redactor, queue, session, tick };
}

const op = (n: number, text = "") => ({ op: "read", ok: true, n, text });

describe("group commit", () => {
  it("appends made while a commit is in flight go in together in the next one, each settling only with its own commit", async () => {
    const h = harness();
    const first = h.session.append("tool.result", { component: "exec" }, 1, op(0));
    await h.tick();
    expect(h.batches).toHaveLength(1);
    const later = Array.from({ length: 10 }, (_, i) => h.session.append("tool.result", { component: "exec" }, 1, op(i + 1)));
    let settled = 0;
    for (const p of later) void p.then(() => settled++);
    await h.tick();
    await h.tick();
    // One commit in flight: nothing else is sent, and nothing of the later ones is acknowledged.
    expect(h.batches).toHaveLength(1);
    expect(settled).toBe(0);
    h.gates.shift()!();
    expect((await first).sessionSeq).toBe(1);
    await h.tick();
    expect(h.batches).toHaveLength(2);
    expect(h.batches[1]!.map((p) => p.session_seq)).toEqual(Array.from({ length: 10 }, (_, i) => i + 2));
    expect(settled).toBe(0);
    h.gates.shift()!();
    expect((await Promise.all(later)).map((e) => (e.payload as { n: number }).n)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
  });

  it("a secret the redactor learns while an event waits (already prepared) for the next commit is redacted from it", async () => {
    const h = harness();
    void h.session.append("tool.result", { component: "exec" }, 1, op(0));
    await h.tick();
    const waiting = h.session.append("tool.result", { component: "exec" }, 1, op(1, "the token is tok-3f9a1c77e2"));
    await h.tick();
    await h.tick();
    h.redactor.add("tok-3f9a1c77e2");
    h.gates.shift()!();
    await h.tick();
    expect(h.batches[1]![0]!.payload).not.toContain("tok-3f9a1c77e2");
    expect(h.batches[1]![0]!.payload).toContain("[REDACTED]");
    h.gates.shift()!();
    await waiting;
  });
});
