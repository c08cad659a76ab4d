import { closeSync, existsSync, ftruncateSync, fstatSync, mkdirSync, openSync, readdirSync, writeSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "../support/journal-backends.js";
import { baseEnv, runVak } from "../support/vak.js";

// A spooled run the journal cannot take whole, as a flood from a sandbox (or a
// damaged disk) can leave one: it must not break the journal for every later
// command, and the rest of the record must still go in.
// On both backends: a PostgreSQL journal takes the local spool in just as SQLite does.
describe.each(BACKENDS.map((b) => [b().name, b] as const))("taking in spool files (%s)", (_name, make) => {
  const backend = make();
  let spool: string;
  beforeEach(async () => {
    await backend.setup();
    spool = join(backend.state(), "vak", "spool");
    mkdirSync(spool, { recursive: true, mode: 0o700 });
  });
  afterEach(() => backend.teardown());

  const journal = (...args: string[]) => runVak(["journal", ...args], { cwd: "/", env: baseEnv(backend.env()) });

  /** A finished run's spool file, as `vak exec` writes one; middle() may append anything between its events. */
  function spoolFile(session: string, middle: (fd: number) => void = () => {}): string {
    const path = join(spool, `${session}.1.done.jsonl`);
    const fd = openSync(path, "a", 0o600); // every write at the end, as the spool writes
    const line = (o: unknown) => writeSync(fd, `${JSON.stringify(o)}\n`);
    const time = new Date().toISOString();
    const actor = { component: "exec" };
    line({ header: { session, kind: "exec", title: `run ${session}`, workspace: null, started: time, pid: 1 } });
    line({ kind: "session.started", actor, generation: 0, payload: { kind: "exec", title: `run ${session}` }, time });
    line({ kind: "egress", actor, generation: 1, payload: { method: "GET", asked: "http://before.test/", decision: "denied", reason: "no grant" }, time });
    middle(fd);
    line({ kind: "egress", actor, generation: 1, payload: { method: "GET", asked: "http://after.test/", decision: "denied", reason: "no grant" }, time });
    line({ kind: "session.ended", actor: { component: "host" }, generation: 0, payload: { outcome: "ok" }, time });
    closeSync(fd);
    return path;
  }

  const show = async (id: string) =>
    (JSON.parse((await journal("show", id, "--json")).stdout) as { events: { kind: string; payload: Record<string, unknown> }[] }).events;

  it("a run with a line longer than a string can hold is taken in around it, and later runs still go in", async () => {
    spoolFile("a-huge", (fd) => {
      // 600 MB of one line, as a hole in a sparse file: no disk, but every byte must be read past.
      ftruncateSync(fd, fstatSync(fd).size + 600 * 1024 * 1024);
      writeSync(fd, "\n");
    });
    spoolFile("b-later");
    const list = await journal("list", "--json");
    expect(list.code).toBe(0);
    expect(list.stderr).toMatch(/took in .*a-huge.* in part: line 4 is 629145600 bytes, over the \d+-byte limit/);
    const sessions = JSON.parse(list.stdout) as { id: string; outcome: string }[];
    expect(sessions.map((s) => [s.id, s.outcome])).toEqual([["a-huge", "ok"], ["b-later", "ok"]]);
    const events = await show("a-huge");
    expect(events.map((e) => e.kind)).toEqual(["session.started", "egress", "decision", "egress", "session.ended"]);
    expect(events[2]!.payload).toMatchObject({ op: "journal.ingest", allowed: false, line: 4, bytes: 629145600 });
    expect(existsSync(join(spool, "a-huge.1.done.jsonl.partial"))).toBe(true);
    expect((await journal("verify")).code).toBe(0);
  });

  it.each([
    ["a damaged line", "{\"kind\":\"egress\",\"actor\":{\"comp"],
    ["a line that is JSON but not an event", "{\"kind\":\"no.such.kind\",\"payload\":{}}"],
  ])("a run with %s in the middle is taken in around it, not refused whole", async (_t, bad) => {
    spoolFile("c-damaged", (fd) => writeSync(fd, `${bad}\n`));
    const list = await journal("list", "--json");
    expect(list.code).toBe(0);
    expect(list.stderr).toContain("line 4 is not a readable event");
    const events = await show("c-damaged");
    expect(events.map((e) => e.kind)).toEqual(["session.started", "egress", "decision", "egress", "session.ended"]);
    expect(readdirSync(spool)).toEqual(["c-damaged.1.done.jsonl.partial"]);
  });
});
