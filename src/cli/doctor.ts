import { engineProblem } from "../net/engine.js";
import { containerPreflight } from "../sandbox/container.js";
import { bestSandbox, layers, probe, type Probe } from "../sandbox/probe.js";
import { installCheck, smokeTest } from "../sandbox/self-test.js";

export async function doctorCommand(opts: { json?: boolean }): Promise<number> {
  const p: Probe = await probe();
  const best = bestSandbox(p);
  const smoke = best.kind === "unsupported" ? "not tried" : (await smokeTest(best.kind)) ?? "ok";
  const engine = engineProblem() ?? "ok";
  const install = installCheck();
  const container = containerLine();
  const ok = best.kind === "namespaces" && smoke === "ok" && engine === "ok" && install.ok;
  if (opts.json) {
    process.stdout.write(JSON.stringify({ ok, sandbox: best.kind, missing: best.missing, smokeTest: smoke, egressEngine: engine, container, install: { ok: install.ok, root: install.root, held: install.held, detail: install.line }, layers: layers(p), probe: p }) + "\n");
    return ok ? 0 : 1;
  }
  const out = (s: string) => process.stdout.write(s + "\n");
  out(`kernel ${p.kernel} (${p.arch}), running as uid ${p.uid}`);
  for (const l of layers(p)) out(`  ${l.ok ? "ok  " : "MISS"} ${l.name}: ${l.detail}`);
  out(`  ${p.procs_limit === "none" ? "MISS" : "ok  "} process limit: ${describeProcs(p)}`);
  out(`  ok   memory limit: ${p.memory_limit === "cgroup" ? "memory cgroup" : "RLIMIT_DATA (approximate: no memory cgroup here)"}`);
  out(`  ${engine === "ok" ? "ok  " : "MISS"} egress gate engine: ${engine === "ok" ? "loaded (network grants work)" : engine}`);
  out(`  ${install.ok ? "ok  " : "MISS"} Vak's installation: ${install.line}`);
  out(`  ${container.ready ? "ok  " : "note"} container backend (--sandbox container, opt-in): ${container.detail}`);
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

/** Whether `--sandbox container` could run (it is opt-in: its absence never fails the doctor). */
function containerLine(): { ready: boolean; detail: string } {
  try {
    const img = containerPreflight();
    return { ready: true, detail: `${img.image} (${img.engine}); the engine itself is asked only when a run starts` };
  } catch (e) {
    return { ready: false, detail: e instanceof Error ? e.message.replace(/^--sandbox container: /, "") : String(e) };
  }
}

function describeProcs(p: Probe): string {
  switch (p.procs_limit) {
    case "pid-namespace": return "the pid namespace's own pid_max (pids cgroup for limits below 298)";
    case "cgroup": return "pids cgroup";
    case "rlimit": return "RLIMIT_NPROC (Vak runs as a regular user)";
    case "none": return "unavailable: root without a pids cgroup or a per-namespace pid_max; --max-procs is refused";
  }
}
