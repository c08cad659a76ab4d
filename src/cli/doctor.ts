import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { engineProblem } from "../net/engine.js";
import { decide } from "../policy/plan.js";
import { hostFacts } from "../sandbox/host.js";
import { launch } from "../sandbox/launcher.js";
import { bestSandbox, layers, probe, type Probe } from "../sandbox/probe.js";
import { installHeld } from "../policy/install-held.js";
import { isWithin } from "../policy/paths.js";
import { protectedMatch } from "../policy/protected.js";

/**
 * Is Vak's own installation out of every sandbox's reach? It is held
 * read-only wherever a writable grant reaches it; this checks that the plan
 * for the current directory as a workspace (what `vak exec` uses by default)
 * holds every part of it that lies there.
 */
function installCheck(): { ok: boolean; line: string; root: string; held: number } {
  const host = hostFacts();
  const install = host.install!;
  const all = installHeld(install, [install.packageRoot, "/"]);
  const cwd = process.cwd();
  const inside = all.filter((h) => isWithin(h.path, cwd));
  if (inside.length === 0)
    return { ok: true, root: install.packageRoot, held: all.length, line: `${install.packageRoot} is outside this workspace; any grant that reaches it holds it read-only (${all.length} paths: the package, the modules it loads, its launchers, Node)` };
  let held: Set<string>;
  try {
    const plan = decide({ mode: "workspace-write", sandbox: "namespaces", workspace: cwd, grants: { read: [], write: [], denyRead: [], denyWrite: [], env: [] }, limits: {}, command: ["/bin/true"] }, host);
    held = new Set(plan.protect.filter((r) => r.kind === "abs").map((r) => r.pattern));
  } catch (e) {
    return { ok: false, root: install.packageRoot, held: 0, line: `cannot plan a sandbox for this directory: ${e instanceof Error ? e.message : String(e)}` };
  }
  const depth = cwd.split("/").filter(Boolean).length;
  const missing = inside.filter((h) => ![...held].some((p) => isWithin(h.path, p)) && !protectedMatch(h.path, { rootDepth: depth }));
  if (missing.length > 0) return { ok: false, root: install.packageRoot, held: inside.length - missing.length, line: `NOT held: ${missing.slice(0, 3).map((m) => m.path).join(", ")}` };
  return { ok: true, root: install.packageRoot, held: inside.length, line: `${install.packageRoot} lies in this workspace and is held read-only (${inside.length} paths: the package, the modules it loads, its launchers)` };
}

/** Tries a real sandboxed command end to end; returns the failure, if any. */
async function smokeTest(sandbox: "namespaces" | "reduced"): Promise<string | undefined> {
  const ws = mkdtempSync(join(tmpdir(), "vak-doctor-"));
  const scratch = { tmp: join(ws, ".scratch"), home: join(ws, ".scratch", "home") };
  try {
    if (sandbox === "reduced") mkdirSync(scratch.home, { recursive: true });
    const plan = decide(
      { mode: "workspace-write", sandbox, workspace: ws, grants: { read: [], write: [], denyRead: [], denyWrite: [], env: [] }, limits: { timeoutMs: 10_000 }, command: ["/bin/sh", "-c", "echo ok > probe && cat probe"], scratch },
      hostFacts(),
    );
    const sb = launch(plan, ["ignore", "pipe", "pipe"]);
    let out = "";
    let errText = "";
    sb.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    sb.stderr?.on("data", (d: Buffer) => (errText += d.toString()));
    const r = await sb.result;
    if (r.setupError) return `${r.setupError.step}: ${r.setupError.message}`;
    if (r.code !== 0 || out.trim() !== "ok") return `exit ${r.code}: ${errText.trim() || out.trim()}`;
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}

export async function doctorCommand(opts: { json?: boolean }): Promise<number> {
  const p: Probe = await probe();
  const best = bestSandbox(p);
  const smoke = best.kind === "unsupported" ? "not tried" : (await smokeTest(best.kind)) ?? "ok";
  const engine = engineProblem() ?? "ok";
  const install = installCheck();
  const ok = best.kind === "namespaces" && smoke === "ok" && engine === "ok" && install.ok;
  if (opts.json) {
    process.stdout.write(JSON.stringify({ ok, sandbox: best.kind, missing: best.missing, smokeTest: smoke, egressEngine: engine, install: { ok: install.ok, root: install.root, held: install.held, detail: install.line }, layers: layers(p), probe: p }) + "\n");
    return ok ? 0 : 1;
  }
  const out = (s: string) => process.stdout.write(s + "\n");
  out(`kernel ${p.kernel} (${p.arch}), running as uid ${p.uid}`);
  for (const l of layers(p)) out(`  ${l.ok ? "ok  " : "MISS"} ${l.name}: ${l.detail}`);
  out(`  ${p.procs_limit === "none" ? "MISS" : "ok  "} process limit: ${describeProcs(p)}`);
  out(`  ok   memory limit: ${p.memory_limit === "cgroup" ? "memory cgroup" : "RLIMIT_DATA (approximate: no memory cgroup here)"}`);
  out(`  ${engine === "ok" ? "ok  " : "MISS"} egress gate engine: ${engine === "ok" ? "loaded (network grants work)" : engine}`);
  out(`  ${install.ok ? "ok  " : "MISS"} Vak's installation: ${install.line}`);
  if (p.tiocsti_legacy === 1) out("  note terminal injection (TIOCSTI) is enabled on this kernel; the seccomp filter blocks it");
  if (best.kind === "namespaces") out(`sandbox: full (namespaces, Landlock, seccomp, write guard); end-to-end test: ${smoke}`);
  else if (best.kind === "reduced") {
    out(`sandbox: reduced only (${best.missing.join("; ")}); end-to-end test: ${smoke}`);
    out("  reduced mode runs with Landlock, seccomp and the write guard on the host's own file system view.");
    out("  It refuses what it cannot guarantee: --allow-net, --deny-read inside a grant, and a private /proc.");
    out("  Use it explicitly with `vak exec --sandbox reduced`; it is never chosen for you.");
  } else out(`sandbox: unavailable (${best.missing.join("; ")}); vak exec refuses to run restricted commands here`);
  return ok ? 0 : 1;
}

function describeProcs(p: Probe): string {
  switch (p.procs_limit) {
    case "pid-namespace": return "the pid namespace's own pid_max (pids cgroup for limits below 298)";
    case "cgroup": return "pids cgroup";
    case "rlimit": return "RLIMIT_NPROC (Vak runs as a regular user)";
    case "none": return "unavailable: root without a pids cgroup or a per-namespace pid_max; --max-procs is refused";
  }
}
