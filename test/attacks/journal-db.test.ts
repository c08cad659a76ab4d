import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PgJournal } from "../../src/journal/pg-journal.js";
import { pgTarget } from "../../src/journal/pg-connect.js";
import { scratch, type Scratch } from "../support/fs.js";
import { type TestDatabase, testDatabase } from "../support/pg.js";
import { baseEnv, runVak, sandboxSh } from "../support/vak.js";

// The shared journal on PostgreSQL is a host service holding every host's
// record, reached with a connection string that can carry a password. These
// are the ways to reach it from where one should not, or to learn its
// password, or to rewrite it with the role hosts hold. The server is real.
describe("the PostgreSQL journal as an attack surface", () => {
  let db: TestDatabase;
  let s: Scratch;
  const password = `pw-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`;
  const pwRole = `vak_pw_${Math.random().toString(36).slice(2, 8)}`;
  let tcpUrl = "";
  const socketPath = () => join(db.socketDir, `.s.PGSQL.${db.port}`);

  beforeAll(async () => {
    db = await testDatabase();
    s = scratch();
    // A login that needs its password (TCP logins are scram-sha-256 on the test server), holding only the writer role.
    await db.admin(`CREATE ROLE ${pwRole} LOGIN PASSWORD '${password}'`);
    const role = (await db.admin<{ r: string }>("SELECT r.rolname AS r FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid = m.roleid JOIN pg_catalog.pg_roles u ON u.oid = m.member WHERE u.rolname = $1", [db.login]))[0]!.r;
    await db.admin(`GRANT ${role} TO ${pwRole}`);
    tcpUrl = `postgres://${pwRole}@127.0.0.1:${db.port}/${db.name}?sslmode=disable`;
  });
  afterAll(async () => {
    await db.admin(`DROP OWNED BY ${pwRole}`).catch(() => undefined);
    await db.drop();
    await db.admin(`DROP ROLE IF EXISTS ${pwRole}`).catch(() => undefined);
    s.cleanup();
  });

  /** The environment of a `vak` whose config names this journal, over TCP with the password by reference. */
  const vakEnv = (journal: string, extra: Record<string, string> = {}) => {
    const cfg = join(s.root, `config-${Math.random().toString(36).slice(2)}`);
    mkdirSync(join(cfg, "vak"), { recursive: true });
    writeFileSync(join(cfg, "vak", "config.toml"), `[journal]\n${journal}\n`);
    return baseEnv({ XDG_CONFIG_HOME: cfg, XDG_STATE_HOME: join(s.root, "state"), ...extra });
  };

  const probe = async (code: string, flags: string[] = []) => {
    const body = `
import socket, errno
try:
${code.split("\n").map((l) => "    " + l).join("\n")}
    print("REACHED")
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))
`;
    return (await sandboxSh(s.ws, `python3 -c '${body.replace(/'/g, `'"'"'`)}'`, flags)).stdout.trim();
  };

  it("the journal's unix socket is reachable from the host (the control for the two below)", async () => {
    const c = new pg.Client(pgTarget({ url: db.writerUrl, what: "test" }).config);
    await c.connect();
    expect((await c.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    await c.end();
  });

  it("a sandbox cannot connect to the journal's unix socket, even with its directory granted read and write", async () => {
    for (const grant of [["--allow-read", db.socketDir], ["--allow-write", db.socketDir]]) {
      const out = await probe(`s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("${socketPath()}")`, grant);
      expect(out, grant.join(" ")).toMatch(/^refused/);
    }
    // Without a grant the path is not even in its view.
    expect(await probe(`s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect("${socketPath()}")`)).toMatch(/^refused/);
  });

  it("a sandbox cannot reach the journal's TCP port on the host's loopback", async () => {
    for (const host of ["127.0.0.1", "localhost", "::ffff:127.0.0.1"]) {
      const out = await probe(`s = socket.create_connection(("${host}", ${db.port}), timeout=2)`);
      expect(out, host).toMatch(/^refused/);
    }
  });

  it("the journal's password is not in the environment or the argv of what vak exec runs", async () => {
    const env = vakEnv(`url = "${tcpUrl}"\npassword = "env:VAK_TEST_JOURNAL_PW"`, { VAK_TEST_JOURNAL_PW: password });
    const r = await runVak(["exec", "--", "/bin/sh", "-c", "cat /proc/self/environ | tr '\\0' '\\n'; cat /proc/1/cmdline /proc/self/cmdline | tr '\\0' ' '; env"], { cwd: s.ws, env });
    expect(r.code).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(password);
    expect(r.stdout).not.toContain("VAK_TEST_JOURNAL_PW");
    // And the run went into PostgreSQL through the password (the spool is taken in by the next open).
    const list = await runVak(["journal", "list", "--json"], { cwd: s.ws, env });
    expect(list.code).toBe(0);
    expect((JSON.parse(list.stdout) as { title: string }[]).some((x) => x.title.includes("/proc/self/environ"))).toBe(true);
  });

  it("a wrong password, or a URL holding one, never shows up in an error", async () => {
    const wrong = `${password}-wrong`;
    for (const journal of [`url = "${tcpUrl}"\npassword = "env:PW"`, `url = "env:URL"`]) {
      const env = vakEnv(journal, { PW: wrong, URL: `postgres://${pwRole}:${wrong}@127.0.0.1:${db.port}/${db.name}?sslmode=disable` });
      const r = await runVak(["journal", "list"], { cwd: s.ws, env });
      expect(r.code, journal).not.toBe(0);
      expect(r.stderr).toMatch(/could not be opened \(it refused the login/);
      expect(r.stderr + r.stdout).not.toContain(wrong);
    }
  });

  it("a password written into the config file is refused, and not repeated", async () => {
    const r = await runVak(["journal", "list"], { cwd: s.ws, env: vakEnv(`url = "postgres://${pwRole}:${password}@127.0.0.1:${db.port}/${db.name}"`) });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/holds a password, which must not be written in a file/);
    expect(r.stderr).not.toContain(password);
  });

  it("a password in a URL given on the command line is refused as well (argv is visible to every process)", async () => {
    const r = await runVak(["journal", "migrate", "--to", `postgres://${pwRole}:${password}@127.0.0.1:${db.port}/${db.name}`], { cwd: s.ws, env: vakEnv("") });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/holds a password/);
  });

  it("what an event says of the password is redacted before it is written", async () => {
    const j = await PgJournal.open({ target: pgTarget({ url: tcpUrl, password: "env:PW", what: "test", env: { PW: password } }), ingest: false });
    const w = j.startSession({ kind: "exec", title: `title ${password}` });
    await w.append("tool.result", { component: "exec" }, 1, { op: "read", ok: true, text: `the password is ${password}` });
    await j.close();
    const rows = await db.admin<{ t: string }>("SELECT payload AS t FROM vak.events UNION ALL SELECT title FROM vak.sessions");
    expect(rows.map((r) => r.t).join("\n")).not.toContain(password);
    expect(rows.map((r) => r.t).join("\n")).toContain("[REDACTED]");
  });

  it("the role hosts write as cannot change, remove or truncate events, drop the guards, or plant objects", async () => {
    const c = new pg.Client(pgTarget({ url: db.writerUrl, what: "test" }).config);
    await c.connect();
    const tries = [
      "UPDATE vak.events SET payload = '{}'",
      "DELETE FROM vak.events",
      "TRUNCATE vak.events CASCADE",
      "UPDATE vak.sessions SET title = 'x'",
      "DELETE FROM vak.heads",
      "INSERT INTO vak.anchors (chain, seq, hash, prune, pruned_at) VALUES ('x', 1, 'x', 'x', 'x')",
      "ALTER TABLE vak.events DISABLE TRIGGER USER",
      "DROP TRIGGER events_no_change ON vak.events",
      "DROP TRIGGER events_have_sessions ON vak.events",
      "CREATE TABLE vak.planted (x int)",
      "CREATE FUNCTION vak.search_words(t text) RETURNS text LANGUAGE sql AS $$ SELECT '' $$",
      "SET session_replication_role = replica",
    ];
    try {
      for (const sql of tries) await expect(c.query(sql), sql).rejects.toThrow(/permission denied|must be owner|already exists/);
    } finally {
      await c.end();
    }
  });

  it("the writer role cannot plant events on a chain that is no session, alone or among a real session's events", async () => {
    const j = await PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false });
    const w = j.startSession({ kind: "exec", title: "real" });
    await w.end("ok");
    await j.close();
    const c = new pg.Client(pgTarget({ url: db.writerUrl, what: "test" }).config);
    await c.connect();
    const row = (chain: string, seq: number) => `('${chain}', ${seq}, 1, 't', 'message', '{}', 0, '{}', '${"0".repeat(64)}', '${"0".repeat(64)}', '')`;
    const insert = (rows: string[]) => c.query(`INSERT INTO vak.events (chain, seq, session_seq, time, kind, actor, generation, payload, prev_hash, hash, search) VALUES ${rows.join(", ")}`);
    try {
      await expect(insert([row("no-such-session", 1)])).rejects.toThrow(/event of session no-such-session refused: the session is not in the journal/);
      await expect(insert([row(w.id, 100), row("no-such-session", 1)])).rejects.toThrow(/the session is not in the journal/);
    } finally {
      await c.end();
    }
    expect(await db.admin("SELECT 1 FROM vak.events WHERE chain = 'no-such-session' OR seq = 100")).toEqual([]);
  });

  it("pruning with the writer's connection is refused, saying what it needs", async () => {
    const j = await PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false });
    const w = j.startSession({ kind: "exec", title: "old" });
    await w.end("ok");
    await expect(j.prune(new Date(Date.now() + 1000))).rejects.toThrow(/needs the database owner's connection .*admin_url/);
    expect(await j.verify()).toMatchObject({ ok: true });
    await j.close();
  });

  it("a forged NOTIFY on the journal's channel reaches a watcher only as a hint: the events it names are read from the chain", async () => {
    const j = await PgJournal.open({ target: pgTarget({ url: db.writerUrl, what: "test" }), ingest: false });
    const seen: unknown[] = [];
    const w = await j.watch((c) => seen.push(c));
    const c = new pg.Client(pgTarget({ url: db.writerUrl, what: "test" }).config);
    await c.connect();
    await c.query(`NOTIFY vak_journal, '[["forged-session", 99]]'`);
    await c.query(`NOTIFY vak_journal, 'not json'`);
    await c.end();
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toEqual([{ session: "forged-session", sessionSeq: 99 }]);
    expect(await j.events("forged-session")).toEqual([]);
    await w.close();
    await j.close();
  });
});
