// vak exec --explain: what handing the command's lookups to the guard costs
// (a lookup-heavy shell loop, and /bin/true), against the same run without it.
// Without --explain the filter has no lookup rules at all: the plain run is the
// cost of "not asked for".
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const RUNS = Number(process.env.BENCH_RUNS ?? 40);

function time(cmd, args, opts) {
  return new Promise((resolve, reject) => {
    const t = process.hrtime.bigint();
    const child = spawn(cmd, args, { stdio: "ignore", env: opts.env, cwd: opts.cwd });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - t) / 1e6) : reject(new Error(`${args.join(" ")} exited ${code}`))));
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function explainBench({ vak, env }) {
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-explain-"));
  try {
    const loop = "i=0; while [ $i -lt 500 ]; do test -e /nonexistent/$i; cat /etc/hostname >/dev/null; i=$((i+1)); done";
    const cands = [
      ["vak exec -- /bin/true", ["exec", "--", "/bin/true"]],
      ["vak exec --explain -- /bin/true", ["exec", "--explain", "--", "/bin/true"]],
      ["vak exec -- sh (500 misses, 500 cats)", ["exec", "--", "sh", "-c", loop]],
      ["vak exec --explain -- sh (the same)", ["exec", "--explain", "--", "sh", "-c", loop]],
      // A --deny-read path in the view hands the same lookups to the guard (to refuse a read of it by name).
      ["vak exec -- sh (the same, again)", ["exec", "--", "sh", "-c", loop]],
      ["vak exec --deny-read secret (in view) -- sh", ["exec", "--deny-read", "secret", "--", "sh", "-c", loop]],
    ];
    writeFileSync(join(ws, "secret"), "x\n");
    for (const [, a] of cands) await time(process.execPath, [vak, ...a], { env, cwd: ws });
    const samples = cands.map(() => []);
    for (let i = 0; i < RUNS; i++) for (const [j, [, a]] of cands.entries()) samples[j].push(await time(process.execPath, [vak, ...a], { env, cwd: ws }));
    console.log(`\n--explain: the guard sees the command's lookups (${RUNS} interleaved runs each)`);
    for (let j = 0; j < cands.length; j += 2) {
      const base = median(samples[j]);
      const ex = median(samples[j + 1]);
      console.log(`  ${cands[j][0].padEnd(44)} median ${base.toFixed(2).padStart(7)} ms   (baseline)`);
      console.log(`  ${cands[j + 1][0].padEnd(44)} median ${ex.toFixed(2).padStart(7)} ms   ${ex >= base ? "+" : ""}${(ex - base).toFixed(2)} ms, x${(ex / base).toFixed(2)}`);
    }
    console.log("  not asked for: the filter has no lookup rules, so a run without --explain (or a --deny-read path in its view) pays nothing");
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}
