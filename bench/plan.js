// The launch plan's cost on a large workspace: decide() walks the writable
// grants for protected links, hard links and git configuration (src/policy/held.ts).
// Measured in-process against a plain readdir walk of the same tree and against
// a read-only plan (which walks nothing), interleaved.
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";

export async function planBench(ROOT) {
  const { decide } = await import(join(ROOT, "dist/policy/plan.js"));
  const { hostFacts } = await import(join(ROOT, "dist/sandbox/host.js"));
  const { scanHeld } = await import(join(ROOT, "dist/policy/held.js"));
  const RUNS = Number(process.env.BENCH_RUNS ?? 40) > 20 ? 20 : Number(process.env.BENCH_RUNS ?? 20);
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-plan-"));
  try {
    // 51,000 files in 5,100 directories, plus a repository: about the shape of a large project.
    let files = 0;
    for (let a = 0; a < 20; a++)
      for (let b = 0; b < 15; b++)
        for (let c = 0; c < 17; c++) {
          const d = join(ws, `src${a}`, `m${b}`, `p${c}`);
          mkdirSync(d, { recursive: true });
          for (let f = 0; f < 10; f++, files++) writeFileSync(join(d, `f${f}.ts`), "");
        }
    execFileSync("git", ["init", "-q"], { cwd: ws });
    const host = hostFacts();
    const grants = { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] };
    const plan = (mode) => () => {
      const t = process.hrtime.bigint();
      decide({ mode, sandbox: "namespaces", workspace: ws, grants, limits: {}, command: ["/bin/true"] }, host);
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const walk = () => {
      const t = process.hrtime.bigint();
      const stack = [ws];
      while (stack.length) {
        const dir = stack.pop();
        for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) stack.push(`${dir}/${e.name}`);
      }
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    // What a cache of the held paths would still have to do on every run to be safe: look at every
    // directory it walked (a new link or file anywhere changes its directory's ctime, which no
    // command can set back) before it could answer. Measured against the walk it would replace.
    const dirs = [];
    {
      const stack = [ws];
      while (stack.length) {
        const dir = stack.pop();
        dirs.push(dir);
        for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) stack.push(`${dir}/${e.name}`);
      }
    }
    const statDirs = () => {
      const t = process.hrtime.bigint();
      for (const d of dirs) lstatSync(d, { bigint: true });
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const held = () => {
      const t = process.hrtime.bigint();
      scanHeld(ws, [ws], host);
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const cands = [
      { name: "read-only plan (walks nothing)", run: plan("read-only") },
      { name: "plain readdir walk of the tree", run: walk },
      { name: "workspace-write plan (walks it)", run: plan("workspace-write") },
      { name: "held-path walk alone (scanHeld)", run: held },
      { name: `a cache's check: lstat of its ${dirs.length} dirs`, run: statDirs },
    ];
    for (const c of cands) c.run();
    const samples = cands.map(() => []);
    for (let i = 0; i < RUNS; i++) for (const [j, c] of cands.entries()) samples[j].push(c.run());
    console.log(`\nplan: decide() on a workspace of ${files} files (${RUNS} interleaved runs each)`);
    const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    const walkMed = med(samples[1]);
    for (const [j, c] of cands.entries()) {
      const m = med(samples[j]);
      console.log(`  ${c.name.padEnd(44)} median ${m.toFixed(2).padStart(7)} ms   ${j === 1 ? "(baseline)" : `x${(m / walkMed).toFixed(2)} of the walk`}   ${((m * 1000) / files).toFixed(2)} µs per file`);
    }
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}
