// npm run bench: Vak's costs as ratios and differences against baselines
// measured in the same run, interleaved so that machine noise hits both alike.
// Node processes run with NODE_EXTRA_CA_CERTS unset (some machines set it, and
// it triples Node's start-up).
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execSync } from "node:child_process";

import { interleaved as interleavedOf, time as timeOf } from "./measure.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { decide } = await import(join(ROOT, "dist/policy/plan.js"));
const { hostFacts } = await import(join(ROOT, "dist/sandbox/host.js"));
const { launcherArgs, launcherPath } = await import(join(ROOT, "dist/sandbox/launcher.js"));

const RUNS = Number(process.env.BENCH_RUNS ?? 40);
// BENCH_ONLY=whole runs section 2 alone (the whole command against node -e 0), for work on start-up; unset: everything.
const ONLY = process.env.BENCH_ONLY;
if (ONLY !== undefined && ONLY !== "whole") throw new Error(`BENCH_ONLY: the one section it can pick is 'whole', not '${ONLY}'`);
const env = { ...process.env };
delete env.NODE_EXTRA_CA_CERTS;

const time = (cmd, args, opts = {}) => timeOf(cmd, args, { ...opts, env: opts.env ?? env });
const interleaved = (cands) => interleavedOf(cands, RUNS);

function report(title, rows, target) {
  console.log(`\n${title} (${RUNS} interleaved runs each)`);
  const base = rows[0];
  for (const r of rows)
    console.log(`  ${r.name.padEnd(44)} median ${r.median.toFixed(2).padStart(7)} ms   p90 ${r.p90.toFixed(2).padStart(7)} ms   ${r === base ? "(baseline)" : `+${(r.median - base.median).toFixed(2)} ms, x${(r.median / base.median).toFixed(2)}`}`);
  if (target) console.log(`  target: ${target}`);
}

const ws = mkdtempSync(join(tmpdir(), "vak-bench-"));
try {
  // 1. The launcher against a bare spawn of the same program, from Node.
  const plan = decide(
    { mode: "workspace-write", sandbox: "namespaces", workspace: ws, grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: {}, command: ["/bin/true"] },
    hostFacts(env),
  );
  const args = launcherArgs(plan, 3);
  const launcher = launcherPath();
  if (!ONLY) report(
    "launcher: spawn of /bin/true from Node",
    await interleaved([
      { name: "bare spawn /bin/true", run: () => time("/bin/true", []) },
      { name: "vak-launcher, typical plan, /bin/true", run: () => time(launcher, args, { stdio: ["ignore", "ignore", "ignore", "pipe"], env: plan.env }) },
    ]),
    "within 5 ms of the bare spawn",
  );

  // 2. The whole CLI against Node's own start-up, plus peers where installed. The typical daily profile
  // is git's identity and node's config (presets, TOML, composition); where the time goes is measured
  // in the same rounds: the CLI's load (--version), planning without a launch (--dry-run), and the
  // launcher alone with the same plan; the rest is the record, the report and the exit.
  const vak = join(ROOT, "bin/vak.cjs");
  const TYPICAL = ["--profile", "git", "--profile", "node"];
  const { resolveGrants } = await import(join(ROOT, "dist/cli/exec-grants.js"));
  const typical = await resolveGrants({ workspace: ws, profile: ["git", "node"] }, { execDefaults: true, env });
  const typicalPlan = decide(
    { mode: typical.mode, sandbox: "namespaces", workspace: ws, grants: typical.grants, limits: typical.limits, command: ["/bin/true"], files: typical.files, setEnv: typical.setEnv },
    hostFacts(env),
  );
  const typicalArgs = launcherArgs(typicalPlan, 3);
  const NODE = "node -e 0";
  const WITH_PROFILE = `vak exec ${TYPICAL.join(" ")} -- /bin/true`;
  const cands = [
    { name: NODE, run: () => time(process.execPath, ["-e", "0"]) },
    { name: "vak exec -- /bin/true", run: () => time(process.execPath, [vak, "exec", "--", "/bin/true"], { cwd: ws }) },
    { name: WITH_PROFILE, run: () => time(process.execPath, [vak, "exec", ...TYPICAL, "--", "/bin/true"], { cwd: ws }) },
    { name: "  of which: vak --version (the CLI's load)", run: () => time(process.execPath, [vak, "--version"], { cwd: ws }) },
    { name: `  of which: vak exec --dry-run ${TYPICAL.join(" ")}`, run: () => time(process.execPath, [vak, "exec", "--dry-run", ...TYPICAL, "--", "/bin/true"], { cwd: ws }) },
    { name: "  of which: the launcher alone, /bin/true", run: () => time(launcher, typicalArgs, { stdio: ["ignore", "ignore", "ignore", "pipe"], env: typicalPlan.env }) },
  ];
  const loadBefore = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  const which = (b) => {
    try {
      return execSync(`command -v ${b}`, { encoding: "utf8" }).trim();
    } catch {
      // Where bench/resident.js installs the peers from npm.
      const local = join(ROOT, ".cache", "bench-peers", "node_modules", ".bin", b);
      return existsSync(local) ? local : "";
    }
  };
  const peers = [];
  const srt = which("srt"), codex = which("codex");
  const srtRuns = srt && (await time(srt, ["/bin/true"], { cwd: ws }).then(() => true, () => false));
  if (srtRuns) cands.push({ name: "sandbox-runtime: srt /bin/true", run: () => time(srt, ["/bin/true"], { cwd: ws }) });
  else peers.push(srt ? "sandbox-runtime (srt) is installed but does not run here" : "sandbox-runtime (srt) not installed here; measured elsewhere at about 460 ms");
  // npm's codex is a Node script that starts the native binary; bench/resident.js times the binary itself.
  if (codex) cands.push({ name: "codex sandbox -- /bin/true (npm wrapper)", run: () => time(codex, ["sandbox", "--", "/bin/true"], { cwd: ws }) });
  else peers.push("Codex not installed here; its native sandbox measured elsewhere at 53-74 ms");
  const rows = await interleaved(cands);
  report("whole command: vak exec against node -e 0", rows);
  const diff = rows.find((r) => r.name === WITH_PROFILE).median - rows.find((r) => r.name === NODE).median;
  const loadAfter = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(`  target: \`${WITH_PROFILE}\` within 25 ms of \`${NODE}\`: ${diff <= 25 ? "met" : "MISSED"} (+${diff.toFixed(1)} ms, medians; load average ${loadBefore} before, ${loadAfter} after, on ${cpus().length} CPUs)`);
  for (const p of peers) console.log(`  peer: ${p}`);
  if (!ONLY) {
    const { residentBench } = await import("./resident.js");
    await residentBench({ root: ROOT, env, runs: RUNS });
    const { planBench } = await import("./plan.js");
    await planBench(ROOT);
    const { journalBench } = await import("./journal.js");
    await journalBench(ROOT);
    const { brokerBench } = await import("./broker.js");
    await brokerBench(ROOT);
    const { egressBench } = await import("./egress.js");
    await egressBench({ vak, env });
    const { mcpBench } = await import("./mcp.js");
    await mcpBench({ root: ROOT, env });
    const { explainBench } = await import("./explain.js");
    await explainBench({ vak, env });
    const { tlsBench } = await import("./tls.js");
    await tlsBench({ vak, env });
    const { containerBench } = await import("./container.js");
    await containerBench({ vak, env, runs: RUNS });
  }
} finally {
  rmSync(ws, { recursive: true, force: true });
}
