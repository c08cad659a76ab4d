// Journal: sustained events per second through the batched, hash-chained
// writer, and the latency of an acknowledged (durably committed) write at an
// offered 10,000 events/s, beside a plain SQLite insert loop in the same run.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const Database = require("better-sqlite3");
const SECONDS = Number(process.env.BENCH_JOURNAL_SECONDS ?? 2);
const payload = { op: "read", ok: true, path: "/workspace/src/index.ts", bytes: 4096, digest: "a".repeat(64) };

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];

export async function journalBench(root) {
  const { Journal } = await import(join(root, "dist/journal/journal.js"));
  const dir = mkdtempSync(join(tmpdir(), "vak-bench-journal-"));
  try {
    // Baseline: one durable INSERT per event, as a naive logger would do it.
    const db = new Database(join(dir, "plain.db"));
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec("CREATE TABLE e (seq INTEGER PRIMARY KEY, payload TEXT)");
    const ins = db.prepare("INSERT INTO e (payload) VALUES (?)");
    let plain = 0;
    const lat0 = [];
    for (const end = Date.now() + SECONDS * 1000; Date.now() < end; plain++) {
      const t = process.hrtime.bigint();
      ins.run(JSON.stringify(payload));
      lat0.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    db.close();

    // The journal, flat out: bursts of appends, each awaited (acknowledged).
    const j = Journal.open({ path: join(dir, "journal.db"), ingest: false });
    const s = j.startSession({ kind: "bench", title: "throughput" });
    let n = 0;
    const t0 = Date.now();
    while (Date.now() - t0 < SECONDS * 1000) {
      await Promise.all(Array.from({ length: 200 }, () => s.append("tool.result", { component: "bench" }, 1, payload)));
      n += 200;
    }
    const rate = n / ((Date.now() - t0) / 1000);

    // The journal at an offered 10,000 events/s: 100 events every 10 ms.
    const lat = [];
    const t1 = Date.now();
    const waits = [];
    while (Date.now() - t1 < SECONDS * 1000) {
      for (let i = 0; i < 100; i++) {
        const t = process.hrtime.bigint();
        waits.push(s.append("tool.result", { component: "bench" }, 1, payload).then(() => lat.push(Number(process.hrtime.bigint() - t) / 1e6)));
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all(waits);
    const v = j.verify();
    j.close();

    console.log(`\njournal: durable writes (${SECONDS} s each, synchronous=FULL, WAL)`);
    console.log(`  plain SQLite, one INSERT per event         ${(plain / SECONDS).toFixed(0).padStart(8)} events/s   p99 ${pct(lat0, 0.99).toFixed(2)} ms   (baseline)`);
    console.log(`  vak journal, batched commits, hash chain   ${rate.toFixed(0).padStart(8)} events/s   x${(rate / (plain / SECONDS)).toFixed(1)}`);
    console.log(`  vak journal at an offered 10,000 events/s: acknowledged write p50 ${pct(lat, 0.5).toFixed(2)} ms, p99 ${pct(lat, 0.99).toFixed(2)} ms`);
    console.log(`  target: 10,000 events/s sustained; the chain verified afterwards: ${v.ok ? `yes (${v.events} events)` : "NO"}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
