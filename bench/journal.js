// Journal: sustained events per second through the batched, hash-chained
// writer on each backend, SQLite and PostgreSQL, in the same run and
// interleaved (several rounds, each backend once a round, so that what other
// work the machine has hits both alike), each beside its own baseline (a plain
// insert of the same rows, no chain, no redaction): the latency of an
// acknowledged (durably committed) write at an offered 10,000 events/s, the
// CPU each event costs Vak's process (and PostgreSQL's server), and a verify
// of everything written (see measure()). PostgreSQL is the one VAK_TEST_PG
// names (a superuser's URL on a throwaway server), or a server started here
// for the run (test/support/pg-cluster.sh).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const Database = require("better-sqlite3");
const pg = require("pg");
const SECONDS = Number(process.env.BENCH_JOURNAL_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_JOURNAL_ROUNDS ?? 3);
// Every event a little different (a path and a digest of its own), as a real session's are: nothing is the same text twice.
let nth = 0;
const payload = () => {
  nth += 1;
  return { op: "read", ok: true, path: `/workspace/src/module-${nth}/index.ts`, bytes: 4096 + (nth % 1000), digest: (nth * 2654435761 % 2 ** 32).toString(16).padStart(8, "0").repeat(8) };
};
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const median = (xs) => pct(xs, 0.5);
const load = () => loadavg().map((x) => x.toFixed(1)).join(" ");

const append = (s) => s.append("tool.result", { component: "bench" }, 1, payload());

/**
 * Three loads on one journal: (1) one producer that waits for each burst of
 * 1000 appends to be acknowledged before it sends the next (nothing can join a
 * commit in flight); (2) producers that do not wait: up to 4 bursts
 * unacknowledged at any time, so appends queue while a commit is in flight and
 * go in together in the next one (group commit); (3) an offered 10,000
 * events/s, paced by the clock (every 5 ms, as many as are due), with the
 * latency of each acknowledgement (a durable commit).
 */
export async function measure(j, serverCpu = () => 0) {
  const s = j.startSession({ kind: "bench", title: "throughput" });
  const rates = {};
  {
    let n = 0;
    const t0 = Date.now();
    while (Date.now() - t0 < SECONDS * 1000) {
      await Promise.all(Array.from({ length: 1000 }, () => append(s)));
      n += 1000;
    }
    rates.waiting = n / ((Date.now() - t0) / 1000);
  }
  {
    let n = 0;
    const inFlight = [];
    const cpu0 = process.cpuUsage();
    const server0 = serverCpu();
    const t0 = Date.now();
    while (Date.now() - t0 < SECONDS * 1000) {
      inFlight.push(Promise.all(Array.from({ length: 1000 }, () => append(s))));
      if (inFlight.length >= 4) {
        await inFlight.shift();
        n += 1000;
      }
    }
    for (const b of inFlight) await b, (n += 1000);
    rates.grouped = n / ((Date.now() - t0) / 1000);
    // CPU of this process (every thread: SQLite's writer too; not PostgreSQL's server) per event: what the load average does not change much.
    const cpu = process.cpuUsage(cpu0);
    rates.cpuUs = (cpu.user + cpu.system) / n;
    rates.serverUs = ((serverCpu() - server0) * 1e6) / n;
  }
  const lat = [];
  const waits = [];
  const t1 = Date.now();
  let offered = 0;
  while (Date.now() - t1 < SECONDS * 1000) {
    const due = Math.floor(((Date.now() - t1) / 1000) * 10_000);
    for (; offered < due; offered++) {
      const t = process.hrtime.bigint();
      waits.push(append(s).then(() => lat.push(Number(process.hrtime.bigint() - t) / 1e6)));
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all(waits);
  const acked = lat.length / ((Date.now() - t1) / 1000);
  const tv = Date.now();
  const v = await j.verify();
  return { ...rates, p50: pct(lat, 0.5), p99: pct(lat, 0.99), offered: offered / SECONDS, acked, verify: v, verifyMs: Date.now() - tv, load: load() };
}

/** A row as the events table holds it, for the baselines. */
const row = (i) => ["s", i, i, new Date().toISOString(), "tool.result", '{"component":"bench"}', 1, JSON.stringify(payload()), "0".repeat(64), "0".repeat(64)];

function sqliteBaseline(dir) {
  // One durable INSERT per event, as a naive logger would do it.
  rmSync(join(dir, "plain.db"), { force: true });
  rmSync(join(dir, "plain.db-wal"), { force: true });
  const db = new Database(join(dir, "plain.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE e (seq INTEGER PRIMARY KEY, payload TEXT)");
  const ins = db.prepare("INSERT INTO e (payload) VALUES (?)");
  let n = 0;
  for (const end = Date.now() + SECONDS * 1000; Date.now() < end; n++) ins.run(JSON.stringify(payload()));
  db.close();
  return n / SECONDS;
}

async function pgBaseline(config) {
  // Batches of 1000 rows in one multi-row INSERT into a bare table, no index, no chain: what the server alone costs.
  const c = new pg.Client(config);
  c.on("error", () => undefined);
  await c.connect();
  try {
  await c.query("DROP TABLE IF EXISTS public.bench_plain");
  await c.query("CREATE TABLE public.bench_plain (chain text, seq int8, session_seq int8, time text, kind text, actor text, generation int4, payload text, prev_hash text, hash text)");
  let n = 0;
  const t0 = Date.now();
  while (Date.now() - t0 < SECONDS * 1000) {
    const rows = Array.from({ length: 1000 }, (_, i) => row(n + i));
    const cols = rows[0].map((_, k) => rows.map((r) => r[k]));
    await c.query("INSERT INTO public.bench_plain SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::int4[], $8::text[], $9::text[], $10::text[])", cols);
    n += 1000;
  }
  return n / ((Date.now() - t0) / 1000);
  } finally {
    await c.end();
  }
}

/** CPU seconds used so far by every process of the PostgreSQL server (its backends, WAL writer, checkpointer, autovacuum). */
export function serverCpuOf(postmaster) {
  const tick = 100; // USER_HZ
  return () => {
    let t = 0;
    for (const pid of readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        if (Number(f[1]) === postmaster || Number(pid) === postmaster) t += (Number(f[11]) + Number(f[12])) / tick;
      } catch {
        // gone meanwhile
      }
    }
    return t;
  };
}

/** A round's numbers, one line each. */
function roundLine(name, r, m) {
  return `  round ${r}  ${name.padEnd(10)} waiting ${m.waiting.toFixed(0).padStart(6)}/s  grouped ${m.grouped.toFixed(0).padStart(6)}/s  CPU ${m.cpuUs.toFixed(1)} µs/event${m.serverUs ? ` (+ server ${m.serverUs.toFixed(1)})` : ""}  offered ${m.offered.toFixed(0)}/s: acked ${m.acked.toFixed(0)}/s p50 ${m.p50.toFixed(0)} ms p99 ${m.p99.toFixed(0)} ms  verify ${m.verify.ok ? `ok ${m.verify.events} in ${m.verifyMs} ms` : "FAILED"}  (load ${m.load})`;
}

function summary(name, ms, base, baseName) {
  const r = (x) => `${x.toFixed(0).padStart(8)} events/s   x${(x / base).toFixed(2)} of ${baseName}`;
  const med = (k) => median(ms.map((m) => m[k]));
  console.log(`  ${name} (medians of ${ms.length} rounds)`);
  console.log(`    one producer waiting on each commit          ${r(med("waiting"))}`);
  console.log(`    producers not waiting (group commit)         ${r(med("grouped"))}   (rounds: ${ms.map((m) => m.grouped.toFixed(0)).join(", ")})`);
  const cpu = med("cpuUs");
  const server = med("serverUs");
  console.log(`    CPU per event: ${cpu.toFixed(1)} µs in the Vak process${server ? `, ${server.toFixed(1)} µs in PostgreSQL's server` : ""}: a whole core each would carry ${(1e6 / Math.max(cpu, server)).toFixed(0)} events/s`);
  console.log(`    offered ${med("offered").toFixed(0)}/s by the clock: ${med("acked").toFixed(0)} acknowledged/s, p50 ${med("p50").toFixed(1)} ms, p99 ${med("p99").toFixed(1)} ms to durable`);
  console.log(`    verified afterwards: ${ms.every((m) => m.verify.ok) ? `yes, every round` : "NO"}`);
}

export async function journalBench(root) {
  const { SqliteJournal } = await import(join(root, "dist/journal/sqlite-journal.js"));
  const { PgJournal } = await import(join(root, "dist/journal/pg-journal.js"));
  const { pgTarget } = await import(join(root, "dist/journal/pg-connect.js"));
  const { initDb } = await import(join(root, "dist/journal/pg-admin.js"));
  const dir = mkdtempSync(join(tmpdir(), "vak-bench-journal-"));
  let cluster;
  let adminUrl = process.env.VAK_TEST_PG;
  const db = `vak_bench_${process.pid}`;
  try {
    if (!adminUrl) {
      cluster = join(tmpdir(), `vak-bench-pg-${process.pid}`);
      adminUrl = execFileSync("bash", [join(root, "test/support/pg-cluster.sh"), "start", cluster], { encoding: "utf8" }).trim();
    }
    const root_ = new pg.Client(pgTarget({ url: adminUrl, what: "VAK_TEST_PG" }).config);
    await root_.connect();
    await root_.query(`CREATE DATABASE ${db} ENCODING 'UTF8' TEMPLATE template0`);
    const backend = (await root_.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const postmaster = Number(readFileSync(`/proc/${backend}/stat`, "utf8").split(") ")[1].split(" ")[1]);
    await root_.end();
    const serverCpu = serverCpuOf(postmaster);
    const u = new URL(adminUrl);
    u.pathname = `/${db}`;
    const target = pgTarget({ url: u.toString(), what: "bench" });
    await initDb(target);

    console.log(`\njournal: durable writes, ${SECONDS} s each, ${ROUNDS} rounds, SQLite then PostgreSQL in each (SQLite: synchronous=FULL, WAL; PostgreSQL ${u.searchParams.get("host") ? "over a unix socket" : "over TCP"}, synchronous_commit=on); load average ${load()} before, on ${cpus().length} cores`);
    const runs = { sqlite: [], pg: [], sqlitePlain: [], pgPlain: [] };
    for (let r = 1; r <= ROUNDS; r++) {
      runs.sqlitePlain.push(sqliteBaseline(dir));
      for (const f of ["journal.db", "journal.db-wal", "journal.db-shm"]) rmSync(join(dir, f), { force: true });
      const sqlite = await SqliteJournal.open({ path: join(dir, "journal.db"), ingest: false });
      const s = await measure(sqlite);
      await sqlite.close();
      console.log(roundLine("SQLite", r, s));
      runs.sqlite.push(s);
      runs.pgPlain.push(await pgBaseline(target.config));
      const pj = await PgJournal.open({ target, ingest: false });
      const p = await measure(pj, serverCpu);
      await pj.close();
      console.log(roundLine("PostgreSQL", r, p));
      runs.pg.push(p);
    }
    const sqlitePlain = median(runs.sqlitePlain);
    const pgPlain = median(runs.pgPlain);
    console.log(`  plain SQLite, one INSERT per event              ${sqlitePlain.toFixed(0).padStart(8)} events/s   (baseline)`);
    summary("vak journal on SQLite, batched, hash chain", runs.sqlite, sqlitePlain, "plain SQLite");
    console.log(`  plain PostgreSQL, 1000-row INSERTs, no index  ${pgPlain.toFixed(0).padStart(8)} events/s   (baseline)`);
    summary("vak journal on PostgreSQL, batched, chains", runs.pg, pgPlain, "plain PostgreSQL");
    const grouped = (ms) => median(ms.map((m) => m.grouped));
    console.log(`  PostgreSQL against SQLite (vak journal, group commit, medians): x${(grouped(runs.pg) / grouped(runs.sqlite)).toFixed(2)}`);
    // Met in a round: the offered 10,000/s is acknowledged (durably) as fast as it is offered, and flat out the journal goes past it.
    const met = (m) => m.grouped >= 10_000 && m.acked >= 0.97 * m.offered && m.offered >= 9_500;
    const verdict = (ms) => `${ms.filter(met).length >= Math.ceil(ms.length / 2) ? "met" : "NOT met"} (in ${ms.filter(met).length} of ${ms.length} rounds)`;
    console.log(`  target: 10,000 events/s sustained with batched commits: SQLite ${verdict(runs.sqlite)}, PostgreSQL ${verdict(runs.pg)} (load average ${load()} after, on ${cpus().length} cores)`);
  } finally {
    try {
      const c = new pg.Client(pgTarget({ url: adminUrl, what: "VAK_TEST_PG" }).config);
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
      await c.end();
    } catch {
      // the server may not have started
    }
    if (cluster) execFileSync("bash", [join(root, "test/support/pg-cluster.sh"), "stop", cluster]);
    rmSync(dir, { recursive: true, force: true });
  }
}
