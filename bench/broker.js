// Broker: a brokered read of a 4 KiB file through a disposable sandboxed
// worker, cold (a new worker per op) and warm (a worker started ahead of time),
// beside a plain fs.readFile and a plain spawn measured in the same run.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const OPS = Number(process.env.BENCH_BROKER_OPS ?? 200);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
const line = (name, xs, base) =>
  console.log(`  ${name.padEnd(42)} p50 ${pct(xs, 0.5).toFixed(2).padStart(7)} ms   p99 ${pct(xs, 0.99).toFixed(2).padStart(7)} ms${base ? `   ${pct(xs, 0.5) >= base ? "+" : ""}${(pct(xs, 0.5) - base).toFixed(2)} ms vs a plain spawn` : ""}`);

export async function brokerBench(root) {
  const { Broker } = await import(join(root, "dist/broker/broker.js"));
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-broker-"));
  writeFileSync(join(ws, "file.txt"), "x".repeat(4095) + "\n");
  try {
    const plain = [];
    for (let i = 0; i < OPS; i++) {
      const t = performance.now();
      readFileSync(join(ws, "file.txt"));
      plain.push(performance.now() - t);
    }
    const spawned = [];
    for (let i = 0; i < Math.min(OPS, 100); i++) {
      const t = performance.now();
      await new Promise((r) => spawn("/bin/cat", [join(ws, "file.txt")], { stdio: "ignore" }).on("close", r));
      spawned.push(performance.now() - t);
    }
    const time = async (b, n, settle) => {
      const xs = [];
      for (let i = 0; i < n; i++) {
        if (settle) await settle();
        const t = performance.now();
        const r = await b.run({ kind: "read", path: "file.txt" });
        xs.push(performance.now() - t);
        if (!r.ok || r.output.length !== 4096) throw new Error(`bad read: ${JSON.stringify(r).slice(0, 200)}`);
      }
      return xs;
    };
    const cold = new Broker({ workspace: ws, mode: "workspace-write" });
    const coldTimes = await time(cold, Math.min(OPS, 50));
    await cold.close();
    // Warm: the pool holds a started worker; between ops it is given time to boot the next one.
    const warm = new Broker({ workspace: ws, mode: "workspace-write", poolSize: 2 });
    warm.prewarm();
    const warmTimes = await time(warm, OPS, () => new Promise((r) => setTimeout(r, 60)));
    await warm.close();
    console.log(`\nbroker: read of a 4 KiB file (${OPS} ops; cold ${Math.min(OPS, 50)})`);
    line("plain fs.readFile", plain);
    line("plain spawn of /bin/cat", spawned);
    line("brokered read, cold worker", coldTimes, pct(spawned, 0.5));
    line("brokered read, warm pool", warmTimes, pct(spawned, 0.5));
    console.log("  target: warm p50 under 3 ms");

    // Cancel: an exec op whose command left children and grandchildren
    // behind; the time from abort to the broker's report that all are gone.
    const cancel = new Broker({ workspace: ws, mode: "workspace-write" });
    const cancelTimes = [];
    for (let i = 0; i < 20; i++) {
      const ac = new AbortController();
      const op = cancel.run({ kind: "exec", command: "sleep 100 & (setsid sleep 100 &); (sleep 100 &); echo > started; sleep 100" }, { signal: ac.signal });
      while (!existsSync(join(ws, "started"))) await new Promise((r) => setTimeout(r, 5));
      unlinkSync(join(ws, "started"));
      const t = performance.now();
      ac.abort();
      const r = await op;
      cancelTimes.push(performance.now() - t);
      if (r.ok || r.code !== "cancelled") throw new Error(`bad cancel: ${JSON.stringify(r)}`);
    }
    await cancel.close();
    line("cancel of an op with grandchildren", cancelTimes);
    console.log("  target: under 100 ms");
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}
