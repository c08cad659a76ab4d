import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Journal } from "../../src/journal/journal.js";
import { BACKENDS, type Field } from "../support/journal-backends.js";

// The journal's behaviour, the same on both backends: SQLite (one chain through
// every session) and PostgreSQL (one chain per session). Each test runs on each.
describe.each(BACKENDS.map((b) => [b().name, b] as const))("journal (%s)", (_name, make) => {
  const backend = make();
  beforeEach(() => backend.setup());
  afterEach(() => backend.teardown());

  /** A journal with two interleaved sessions and some events; a is "one", b is "two". */
  async function populated(): Promise<{ j: Journal; a: string; b: string }> {
    const j = await backend.open();
    const a = j.startSession({ kind: "exec", title: "one" });
    const b = j.startSession({ kind: "exec", title: "two" });
    await Promise.all([
      a.append("decision", { component: "exec" }, 1, { op: "openat", allowed: false, reason: "protected path .envrc", path: "/ws/.envrc" }),
      b.append("egress", { component: "web" }, 1, { method: "GET", asked: "http://x.test/", decision: "denied", reason: "no grant" }),
      a.append("worker.exited", { component: "exec" }, 1, { code: 0 }),
    ]);
    await a.end("ok");
    await b.end("ok");
    return { j, a: a.id, b: b.id };
  }

  /** The journal, closed and opened again: verify reads what is stored, not what was kept in memory. */
  async function reopenedVerify() {
    const j = await backend.open();
    try {
      return await j.verify();
    } finally {
      await j.close();
    }
  }

  it("keeps no string past 64 KiB, key or value, and redacts before it cuts", async () => {
    const j = await backend.open();
    j.redactor.add("hunter2-secret-value");
    const w = j.startSession({ kind: "exec", title: "long" });
    const long = `token hunter2-secret-value ${"x".repeat(100_000)}`;
    await w.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true, text: long, nested: [{ [`k${"y".repeat(70_000)}`]: 1 }] });
    await w.end("ok");
    const [, e] = await j.events(w.id);
    const p = e!.payload as { text: string; nested: Record<string, number>[] };
    expect(p.text).toMatch(/^token \[REDACTED\] x+… \[cut by the journal: \d+ bytes in all, sha256 [0-9a-f]{64}\]$/);
    expect(p.text.length).toBeLessThan(4300);
    expect(Object.keys(p.nested[0]!)[0]).toMatch(/^ky+… \[cut by the journal: 70001 bytes in all/);
    expect(JSON.stringify(e)).not.toContain("hunter2-secret-value");
    expect(await j.verify()).toMatchObject({ ok: true });
    await j.close();
  });

  it("records sessions and events in order, and verifies", async () => {
    const { j } = await populated();
    const [one] = await j.sessions();
    expect(one).toMatchObject({ title: "one", events: 4, outcome: "ok" });
    expect((await j.events(one!.id)).map((e) => e.kind)).toEqual(["session.started", "decision", "worker.exited", "session.ended"]);
    expect((await j.events(one!.id)).map((e) => e.sessionSeq)).toEqual([1, 2, 3, 4]);
    expect(await j.verify()).toMatchObject({ ok: true, events: 7 });
    expect((await j.events(one!.id, { after: 2 })).map((e) => e.sessionSeq)).toEqual([3, 4]);
    await j.close();
  });

  it("lists sessions by kind, start time, the newest n and the start of an id (vak journal list's filters)", async () => {
    const j = await backend.open();
    const started: string[] = [];
    for (const kind of ["exec", "agent", "workload:build", "exec"]) {
      const s = j.startSession({ kind, title: kind });
      await s.end("ok");
      started.push(s.id);
      await new Promise((r) => setTimeout(r, 5)); // distinct start times
    }
    const all = await j.sessions();
    expect(all.map((s) => s.id)).toEqual(started);
    expect((await j.sessions({ kind: "exec" })).map((s) => s.id)).toEqual([started[0], started[3]]);
    expect((await j.sessions({ kind: "workload" })).map((s) => s.kind)).toEqual(["workload:build"]);
    expect((await j.sessions({ kind: "work" })).length).toBe(0);
    expect((await j.sessions({ since: all[1]!.started, until: all[2]!.started })).map((s) => s.id)).toEqual([started[1], started[2]]);
    // The newest n, still oldest first.
    expect((await j.sessions({ limit: 2 })).map((s) => s.id)).toEqual([started[2], started[3]]);
    expect((await j.sessions({ kind: "exec", limit: 1 })).map((s) => s.id)).toEqual([started[3]]);
    expect((await j.sessions({ idPrefix: started[1]! })).map((s) => s.id)).toEqual([started[1]]);
    expect((await j.session(started[2]!.slice(0, -3)))?.id).toBe(started[2]);
    // A prefix several share names none (matching() lists them); a prefix with LIKE or SQL characters matches nothing.
    expect(await j.session("")).toBeUndefined();
    expect((await j.matching("")).length).toBe(4);
    expect(await j.matching("%")).toEqual([]);
    expect(await j.matching("_")).toEqual([]);
    expect(await j.matching("' OR '1'='1")).toEqual([]);
    await j.close();
  });

  it("finds events by full-text search over payloads, with FTS5's query forms", async () => {
    const { j, a } = await populated();
    const hits = await j.search("envrc");
    expect(hits).toHaveLength(1);
    expect(hits[0]!.payload).toMatchObject({ path: "/ws/.envrc" });
    expect(await j.search('"protected path"')).toHaveLength(1);
    expect(await j.search('"path protected"')).toHaveLength(0);
    expect(await j.search("prot*")).toHaveLength(1);
    expect(await j.search("nothing OR grant")).toHaveLength(1);
    expect(await j.search("protected NOT envrc")).toHaveLength(0);
    expect(await j.search("PROTECTED")).toHaveLength(1);
    expect(await j.search("denied", { session: a })).toHaveLength(0);
    // Not FTS5 syntax: searched as a phrase, never an error.
    expect(await j.search('x.test/" OR (')).toHaveLength(0);
    expect(await j.search("x.test")).toHaveLength(1);
    await j.close();
  });

  it("refuses UPDATE, DELETE and TRUNCATE through SQL", async () => {
    await (await populated()).j.close();
    const [update, del, truncate] = await backend.refusals();
    expect(update).toMatch(/append-only/);
    expect(del).toMatch(/append-only/);
    expect(truncate).toMatch(/append-only/);
    expect(await reopenedVerify()).toMatchObject({ ok: true, events: 7 });
  });

  it.each(["payload", "time", "kind", "actor", "generation"] as Field[])("a changed byte in an event's %s breaks verification at that event", async (field) => {
    const { j, a } = await populated();
    await j.close();
    await backend.change(a, 3, field, (v) => (field === "generation" ? String(Number(v) + 1) : v.slice(0, -2) + String.fromCharCode(v.charCodeAt(v.length - 2) ^ 1) + v.slice(-1)));
    const v = await reopenedVerify();
    expect(v.ok, field).toBe(false);
    if (!v.ok) {
      expect(v).toMatchObject({ session: a, sessionSeq: 3 });
      expect(v.problem).toMatch(/event \d+.* (was changed after it was written|does not follow)/);
    }
  });

  it("a deleted row breaks verification and is named", async () => {
    const { j, a } = await populated();
    await j.close();
    await backend.remove(a, [3]);
    const v = await reopenedVerify();
    expect(v).toMatchObject({ ok: false, session: a, sessionSeq: 4 });
    if (!v.ok) expect(v.problem).toMatch(/events (\d+) to \1.* are missing \(removed\)/);
  });

  it("removing the last events is detected too", async () => {
    const { j, b } = await populated();
    await j.close();
    await backend.remove(b, [3]);
    const v = await reopenedVerify();
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.problem).toContain("events at the end were removed");
  });

  it("reordered rows break verification", async () => {
    const { j, a } = await populated();
    await j.close();
    await backend.swap(a, 2, 3);
    const v = await reopenedVerify();
    expect(v).toMatchObject({ ok: false, session: a });
  });

  it("prune removes only old events, records itself, and the journal still verifies", async () => {
    const { j } = await populated();
    const cut = new Date(Date.now() + 1000);
    await new Promise((r) => setTimeout(r, 5));
    const r = await j.prune(cut);
    expect(r.events).toBe(7);
    expect((await j.sessions()).map((s) => s.kind)).toEqual(["journal"]);
    const [maintenance] = await j.sessions();
    expect((await j.events(maintenance!.id)).filter((e) => e.kind === "journal.pruned")).toHaveLength(1);
    expect(await j.verify()).toMatchObject({ ok: true });
    // The chain goes on from where the prune left it.
    const s = j.startSession({ kind: "exec", title: "after" });
    await s.end("ok");
    expect(await j.verify()).toMatchObject({ ok: true });
    await j.close();
    expect(await reopenedVerify()).toMatchObject({ ok: true });
  });

  it("a prune that is not on the record is detected", async () => {
    const { j, a } = await populated();
    await j.prune(new Date(Date.now() + 1000));
    const [maintenance] = await j.sessions();
    await j.close();
    await backend.remove(maintenance!.id, [2]); // the journal.pruned event
    const v = await reopenedVerify();
    expect(v.ok).toBe(false);
    void a;
  });

  it("secret shapes are redacted before they are written", async () => {
    const j = await backend.open();
    const s = j.startSession({ kind: "exec", title: "t" });
    await s.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true, text: "key sk-abcdefghijklmnopqrstuvwxyz0123 and Bearer abcdefghijklmnop" });
    await j.close();
    const all = await backend.allPayloads();
    expect(all).not.toContain("sk-abcdefghijklmnopqrstuvwxyz0123");
    expect(all).not.toContain("abcdefghijklmnop");
    expect(all).toContain("[REDACTED]");
  });

  it("a failed commit fails every append in it, and every append after it", async () => {
    const j = await backend.open();
    const s = j.startSession({ kind: "exec", title: "t" });
    await s.started;
    await backend.failCommitsWith("boom");
    const batch = [
      s.append("tool.result", { component: "exec" }, 1, { op: "a", ok: true }),
      s.append("tool.result", { component: "exec" }, 1, { op: "boom", ok: true }),
      s.append("tool.result", { component: "exec" }, 1, { op: "c", ok: true }),
    ];
    const settled = await Promise.allSettled(batch);
    expect(settled.map((x) => x.status)).toEqual(["rejected", "rejected", "rejected"]);
    expect(String((settled[0] as PromiseRejectedResult).reason)).toMatch(/could not be written .*nothing runs unrecorded/);
    await expect(s.append("tool.result", { component: "exec" }, 1, { op: "later", ok: true })).rejects.toThrow(/nothing runs unrecorded/);
    await expect(j.flush()).rejects.toThrow(/nothing runs unrecorded/);
    await j.close().catch(() => undefined);
    expect(await backend.allPayloads()).not.toMatch(/"op":"(a|c|later)"/);
  });

  it("an append settles only after its commit: what resolved is there when the journal is opened again", async () => {
    const j = await backend.open();
    const s = j.startSession({ kind: "exec", title: "t" });
    const stored = await Promise.all(Array.from({ length: 300 }, (_, i) => s.append("tool.result", { component: "exec" }, 1, { op: "n", ok: true, n: i })));
    expect(stored.map((e) => e.sessionSeq)).toEqual(Array.from({ length: 300 }, (_, i) => i + 2));
    const other = await backend.open();
    const events = await other.events(s.id);
    expect(events.map((e) => (e.payload as { n?: number }).n).slice(1)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(events.map((e) => e.hash)).toEqual([(await s.started).hash, ...stored.map((e) => e.hash)]);
    await other.close();
    await j.close();
  });

  it("watch reports commits made through another connection", async () => {
    const j = await backend.open();
    const seen: { session: string; sessionSeq: number }[] = [];
    const w = await j.watch((c) => seen.push(c));
    const other = await backend.open();
    const s = other.startSession({ kind: "exec", title: "elsewhere" });
    await s.append("tool.result", { component: "exec" }, 1, { op: "x", ok: true });
    await s.end("ok");
    for (let i = 0; i < 50 && !seen.some((c) => c.session === s.id && c.sessionSeq === 3); i++) await new Promise((r) => setTimeout(r, 50));
    expect(seen.filter((c) => c.session === s.id).at(-1)).toEqual({ session: s.id, sessionSeq: 3 });
    await w.close();
    await other.close();
    await j.close();
  });

  it("lists sessions by id or its start, and says which host started each", async () => {
    const { j, a } = await populated();
    expect((await j.session(a))?.id).toBe(a);
    expect((await j.session(a.slice(0, a.length - 3)))?.id).toBeDefined();
    expect(await j.session("no-such-session")).toBeUndefined();
    const hosts = (await j.sessions()).map((s) => s.host);
    expect(hosts.every((h) => (backend.name === "sqlite" ? h === null : typeof h === "string" && h.length > 0))).toBe(true);
    await j.close();
  });
});
