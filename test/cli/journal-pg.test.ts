import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgTarget } from "../../src/journal/pg-connect.js";
import { PgJournal } from "../../src/journal/pg-journal.js";
import { scratch, type Scratch } from "../support/fs.js";
import { type TestDatabase, testDatabase } from "../support/pg.js";
import { baseEnv, runVak, spawnVak } from "../support/vak.js";

// `vak journal list` and `vak journal tail` on a shared PostgreSQL journal: the
// filters are the database's, and tail follows every host's commits
// (LISTEN/NOTIFY), not only this machine's.
describe("vak journal on PostgreSQL", () => {
  let db: TestDatabase;
  let s: Scratch;
  let env: Record<string, string>;
  let other: PgJournal;
  beforeAll(async () => {
    db = await testDatabase();
    s = scratch();
    const config = join(s.root, "config");
    mkdirSync(join(config, "vak"), { recursive: true });
    writeFileSync(join(config, "vak", "config.toml"), `[journal]\nurl = "${db.writerUrl}"\n`);
    env = baseEnv({ XDG_STATE_HOME: join(s.root, "state"), XDG_CONFIG_HOME: config });
    other = await PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false, host: "other-host" });
  });
  afterAll(async () => {
    await other?.close();
    s?.cleanup();
    await db?.drop();
  });

  it("list --kind and --limit are answered by the database, with the host of each session", async () => {
    for (const kind of ["exec", "agent", "exec"]) {
      const w = other.startSession({ kind, title: `a ${kind} on another host` });
      await w.end("ok");
    }
    const r = await runVak(["journal", "list", "--kind", "exec", "--json"], { cwd: s.ws, env });
    expect(r.code).toBe(0);
    const listed = JSON.parse(r.stdout) as { kind: string; host: string }[];
    expect(listed.map((x) => x.kind)).toEqual(["exec", "exec"]);
    expect(listed.every((x) => x.host === "other-host")).toBe(true);
    const newest = await runVak(["journal", "list", "--limit", "1"], { cwd: s.ws, env });
    expect(newest.stdout).toMatch(/a exec on another host/);
    expect(newest.stdout).toMatch(/the newest 1 of 3/);
    expect((await runVak(["journal", "list", "--since", "2099-01-01"], { cwd: s.ws, env })).stdout).toMatch(/no session in the journal matches/);
  });

  it("tail --all shows another host's session as it commits, each event once; tail ID follows it to its end", async () => {
    const tail = spawnVak(["journal", "tail", "--all"], { cwd: s.ws, env });
    let out = "";
    tail.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    let err = "";
    tail.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const until = async (re: RegExp) => {
      for (const end = Date.now() + 15_000; !re.test(out); await new Promise((r) => setTimeout(r, 20)))
        if (Date.now() > end) throw new Error(`timed out waiting for ${re}; tail said:\n${out}\n${err}`);
    };
    try {
      await until(/following every session/);
      const w = other.startSession({ kind: "exec", title: "live on another host" });
      await w.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true });
      await until(new RegExp(`${w.id} .*tool\\.result`));
      const one = spawnVak(["journal", "tail", w.id.slice(0, 12)], { cwd: s.ws, env });
      let oneOut = "";
      one.stdout!.on("data", (d: Buffer) => (oneOut += d.toString()));
      const oneDone = new Promise<number | null>((r) => one.on("close", r));
      for (const end = Date.now() + 15_000; !/tool\.result/.test(oneOut); await new Promise((r) => setTimeout(r, 20)))
        if (Date.now() > end) throw new Error(`tail ID showed:\n${oneOut}`);
      await w.end("ok");
      await until(new RegExp(`${w.id} .*session\\.ended`));
      expect(await oneDone).toBe(0);
      expect(oneOut).toMatch(/session\.started[\s\S]*tool\.result[\s\S]*session\.ended/);
      await new Promise((r) => setTimeout(r, 500));
      for (const kind of ["session\\.started", "tool\\.result", "session\\.ended"])
        expect(out.match(new RegExp(`${w.id} .*${kind}`, "g"))).toHaveLength(1);
      // From now: the sessions written before the tail began are not shown.
      expect(out).not.toMatch(/a agent on another host/);
    } finally {
      tail.kill("SIGINT");
    }
    expect(await new Promise((r) => tail.on("close", r))).toBe(0);
  });
});
