// The resident host and its native client (src/resident/, native/client.c):
// `vak exec -- /bin/true` through the client with the host warm, with no host
// (first use: the client starts one for next time and runs this command in
// Node), and in-process (bin/vak.cjs, no client), against `node -e 0`, a bare
// spawn, and the peers' CLIs (installed into .cache/bench-peers from npm when
// missing: a folder of the bench's own, never the one the real-CLI tests read). All interleaved in one run; the targets are ratios to Codex.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadAverage, sleep, stats, time } from "./measure.js";

/** The peers' CLIs: on PATH, else in ROOT/.cache/bench-peers, else installed there from npm (once). */
function peerClis(root, env) {
  const dir = join(root, ".cache", "bench-peers");
  const bin = (name) => {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8", env }).trim();
    } catch {
      const p = join(dir, "node_modules", ".bin", name);
      return existsSync(p) ? p : "";
    }
  };
  const notes = [];
  if (!bin("codex") || !bin("srt")) {
    try {
      mkdirSync(dir, { recursive: true });
      if (!existsSync(join(dir, "package.json"))) writeFileSync(join(dir, "package.json"), '{"name":"bench-peers","private":true}\n');
      execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "@openai/codex@0.171.0", "@anthropic-ai/sandbox-runtime"], { cwd: dir, stdio: "ignore", env, timeout: 300_000 });
    } catch (e) {
      notes.push(`could not install the peers' CLIs from npm (${e.message.split("\n")[0]})`);
    }
  }
  return { codex: codexNative(bin("codex")), srt: bin("srt"), notes };
}

/** Codex's native binary (its npm bin is a Node wrapper that spawns it): the fastest form of Codex, the one to beat. */
function codexNative(wrapper) {
  if (!wrapper) return "";
  try {
    const pkg = join(realpathSync(wrapper), "..", "..", "node_modules", "@openai");
    for (const p of [join(pkg, "codex-linux-x64", "vendor"), join(realpathSync(wrapper), "..", "..", "..", "codex-linux-x64", "vendor")]) {
      if (!existsSync(p)) continue;
      for (const triple of readdirSync(p)) if (existsSync(join(p, triple, "bin", "codex"))) return join(p, triple, "bin", "codex");
    }
  } catch {
    // not laid out as npm installs it
  }
  return wrapper;
}

/** A repository with a node_modules of 200 packages of 10 directories of 10 files each. */
function makeProject(dir) {
  mkdirSync(dir, { mode: 0o700 });
  execFileSync("git", ["init", "-q"], { cwd: dir });
  writeFileSync(join(dir, "package.json"), '{"name":"project","private":true}\n');
  for (let p = 0; p < 200; p++)
    for (let d = 0; d < 10; d++) {
      const sub = join(dir, "node_modules", `pkg${p}`, `lib${d}`);
      mkdirSync(sub, { recursive: true });
      for (let f = 0; f < 10; f++) writeFileSync(join(sub, `f${f}.js`), "");
    }
}

/** Stops the host serving dir (by the pid it wrote), and waits until it is gone. */
async function stopHost(runtime) {
  const pidFile = join(runtime, "vak", "host.pid");
  for (let i = 0; i < 500 && !existsSync(pidFile); i++) await sleep(10);
  let pid;
  try {
    pid = Number(readFileSync(pidFile, "utf8"));
    if (!Number.isInteger(pid) || pid <= 1) return; // never process.kill(0): that is this process group
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  for (let i = 0; i < 500; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await sleep(10);
  }
}

export async function residentBench({ root, env, runs }) {
  const vak = join(root, "bin", "vak");
  const base = mkdtempSync(join(tmpdir(), "vak-bench-resident-"));
  const ws = join(base, "ws");
  const project = join(base, "project");
  const warmRt = join(base, "warm");
  const coldRt = join(base, "cold");
  for (const d of [ws, warmRt, coldRt]) mkdirSync(d, { mode: 0o700 });
  // A project as most are: a repository with a node_modules of 2,200 directories and 20,000 files, which the
  // held-path walk reads on every run that may write (the host keeps a cache of it: src/policy/walk-cache.ts,
  // which trusts a directory only once it is 3 s old, hence the wait).
  makeProject(project);
  // A journal of the bench's own: every vak here records there, not in the user's.
  env = { ...env, XDG_STATE_HOME: join(base, "state") };
  const warmEnv = { ...env, XDG_RUNTIME_DIR: warmRt, VAK_HOST_IDLE_SECONDS: "600" };
  const coldEnv = { ...env, XDG_RUNTIME_DIR: coldRt, VAK_HOST_IDLE_SECONDS: "600" };
  const peers = peerClis(root, env);
  // vak as npm installs it: node_modules/.bin/vak, a link to ../vak/bin/vak. Beside the workspace, never above
  // it: a node_modules/vak above a workspace is an installation whose files the plan holds (install-held.ts).
  const npm = join(base, "npm", "node_modules");
  mkdirSync(join(npm, ".bin"), { recursive: true });
  symlinkSync(root, join(npm, "vak"));
  symlinkSync(join("..", "vak", "bin", "vak"), join(npm, ".bin", "vak"));
  const linked = join(npm, ".bin", "vak");
  // BENCH_RESIDENT_BASELINE=DIR: another built checkout's host (started here, served by this client), to compare two hosts in one run.
  const baseline = process.env.BENCH_RESIDENT_BASELINE;
  const baseRt = join(base, "baseline");
  const baseEnv = { ...env, XDG_RUNTIME_DIR: baseRt, VAK_HOST_IDLE_SECONDS: "600", VAK_RESIDENT: "only" };
  if (baseline) {
    mkdirSync(baseRt, { mode: 0o700 });
    spawn(process.execPath, [join(baseline, "bin", "vak.cjs"), "host"], { env: baseEnv, stdio: "ignore", detached: true }).unref();
  }
  const cands = [
    { name: "bare spawn /bin/true", run: () => time("/bin/true", [], { env, cwd: ws }) },
    { name: "node -e 0", run: () => time(process.execPath, ["-e", "0"], { env, cwd: ws }) },
    { name: "vak exec, in-process (node bin/vak.cjs)", run: () => time(process.execPath, [join(root, "bin", "vak.cjs"), "exec", "--", "/bin/true"], { env: warmEnv, cwd: ws }) },
    // What \`vak\` ran before the client: bin/vak.cjs through its #! line (/usr/bin/env node).
    { name: "vak exec, in-process via #! (bin/vak.cjs)", run: () => time(join(root, "bin", "vak.cjs"), ["exec", "--", "/bin/true"], { env: warmEnv, cwd: ws }) },
    { name: "vak exec, client, host warm", run: () => time(vak, ["exec", "--", "/bin/true"], { env: warmEnv, cwd: ws }) },
    // Issue 14's daily command (git's identity and node's config) as \`vak\` runs it once the host is up.
    { name: "vak exec --profile git --profile node, client, host warm", run: () => time(vak, ["exec", "--profile", "git", "--profile", "node", "--", "/bin/true"], { env: warmEnv, cwd: ws }) },
    { name: "vak exec, client, host warm, npm's link", run: () => time(linked, ["exec", "--", "/bin/true"], { env: warmEnv, cwd: ws }) },
    { name: "vak exec, client, host warm, in a project", run: () => time(vak, ["exec", "--", "/bin/true"], { env: warmEnv, cwd: project }) },
    { name: "vak exec, in-process, in a project", run: () => time(process.execPath, [join(root, "bin", "vak.cjs"), "exec", "--", "/bin/true"], { env: warmEnv, cwd: project }) },
    {
      name: "vak exec, client, no host (cold)",
      run: async () => {
        const ms = await time(vak, ["exec", "--", "/bin/true"], { env: coldEnv, cwd: ws });
        await stopHost(coldRt); // the host this run started: the next cold run finds none
        return ms;
      },
    },
  ];
  if (baseline) cands.push({ name: "vak exec, client, baseline host warm", run: () => time(vak, ["exec", "--", "/bin/true"], { env: baseEnv, cwd: ws }) });
  if (peers.codex) cands.push({ name: "codex sandbox -- /bin/true (native)", run: () => time(peers.codex, ["sandbox", "--", "/bin/true"], { env, cwd: ws }) });
  else peers.notes.push("Codex's CLI could not be installed here: no ratio to it");
  if (peers.srt) {
    try {
      await time(peers.srt, ["/bin/true"], { env, cwd: ws });
      // srt exits 1 now and then here: such a run is counted and left out, not the end of the bench.
      const srt = { name: "sandbox-runtime: srt /bin/true", failed: 0 };
      srt.run = () => time(peers.srt, ["/bin/true"], { env, cwd: ws }).catch(() => ((srt.failed += 1), NaN));
      cands.push(srt);
    } catch (e) {
      peers.notes.push(`sandbox-runtime (srt) is installed but does not run here (${e.message.split("\n")[0]})`);
    }
  } else peers.notes.push("sandbox-runtime (srt) could not be installed here");

  try {
    await sleep(3200);
    for (const c of cands) await c.run(); // warm caches once; this starts the warm host
    await sleep(1500);
    await cands.find((c) => c.name.includes("host warm")).run();
    const loadBefore = loadAverage();
    const samples = cands.map(() => []);
    for (let i = 0; i < runs; i++) for (const [j, c] of cands.entries()) samples[j].push(await c.run());
    const rows = cands.map((c, j) => ({ name: c.failed ? `${c.name} (${c.failed} of ${runs} failed)` : c.name, ...stats(samples[j].filter((x) => !Number.isNaN(x))) }));
    const load = `${loadBefore} before, ${loadAverage()} after`;
    console.log(`\nresident host: vak exec -- /bin/true (${runs} interleaved runs each; load average ${load})`);
    const node = rows[1];
    const codex = rows.find((r) => r.name.startsWith("codex"));
    for (const r of rows)
      console.log(`  ${r.name.padEnd(40)} median ${r.median.toFixed(2).padStart(7)} ms   p90 ${r.p90.toFixed(2).padStart(7)} ms   x${(r.median / node.median).toFixed(2)} of node -e 0${codex ? `, x${(r.median / codex.median).toFixed(2)} of codex` : ""}`);
    const row = (part) => rows.find((r) => r.name.includes(part));
    const warm = row("host warm"), cold = row("(cold)"), inproc = row("(node bin/vak.cjs)"), shebang = row("via #!");
    if (codex) console.log(`  target: warm <= 0.5x codex: ${warm.median <= 0.5 * codex.median ? "met" : "NOT met"} (x${(warm.median / codex.median).toFixed(2)})`);
    const typical = row("--profile git");
    console.log(`  the typical profile through the client, host warm: ${(typical.median - node.median).toFixed(1)} ms over node -e 0 (issue 14's target: within 25 ms; in-process it is the "whole command" section's figure)`);
    const inProject = row("host warm, in a project");
    console.log(`  in a project of 2,200 directories (node_modules), host warm: +${(inProject.median - warm.median).toFixed(1)} ms over an empty workspace${codex ? ` (x${(inProject.median / codex.median).toFixed(2)} of codex, which reads nothing there)` : ""}; in-process there: ${row("in-process, in a project").median.toFixed(1)} ms`);
    const viaLink = row("npm's link");
    console.log(`  npm's bin link (node_modules/.bin/vak) costs x${(viaLink.median / warm.median).toFixed(2)} of bin/vak, host warm`);
    console.log(`  target: cold no slower than in-process: ${cold.median <= inproc.median ? "met" : "NOT met"} (x${(cold.median / inproc.median).toFixed(2)} of node bin/vak.cjs, x${(cold.median / shebang.median).toFixed(2)} of bin/vak.cjs via #!)`);
    for (const n of peers.notes) console.log(`  peer: ${n}`);
  } finally {
    await stopHost(warmRt);
    await stopHost(coldRt);
    if (baseline) await stopHost(baseRt);
    rmSync(base, { recursive: true, force: true });
  }
}

// Run alone: node bench/resident.js (after npm run build).
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  const root = new URL("..", import.meta.url).pathname;
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  await residentBench({ root, env, runs: Number(process.env.BENCH_RUNS ?? 40) });
}
