import { engineProblem } from "../net/engine.js";
import { containerPreflight } from "../sandbox/container.js";
import { bestSandbox, layers, probe, type Probe } from "../sandbox/probe.js";
import { installCheck, smokeTest } from "../sandbox/self-test.js";
import { fmt, own, processOutput } from "./output.js";

export async function doctorCommand(opts: { json?: boolean }): Promise<number> {
  const p: Probe = await probe();
  const best = bestSandbox(p);
  const smoke = best.kind === "unsupported" ? "not tried" : (await smokeTest(best.kind)) ?? "ok";
  const engine = engineProblem() ?? "ok";
  const install = installCheck();
  const container = containerLine();
  const ok = best.kind === "namespaces" && smoke === "ok" && engine === "ok" && install.ok;
  if (opts.json) {
    processOutput().out.json({ ok, sandbox: best.kind, missing: best.missing, smokeTest: smoke, egressEngine: engine, container, install: { ok: install.ok, root: install.root, held: install.held, detail: install.line }, layers: layers(p), probe: p });
    return ok ? 0 : 1;
  }
  // The probe's and the smoke test's text come from the kernel and a command: shown neutralised.
  const print = processOutput().out;
  print.line(fmt`kernel ${p.kernel} (${p.arch}), running as uid ${p.uid}`);
  for (const l of layers(p)) print.line(fmt`  ${l.ok ? "ok  " : "MISS"} ${l.name}: ${l.detail}`);
  print.line(fmt`  ${p.procs_limit === "none" ? "MISS" : "ok  "} process limit: ${describeProcs(p)}`);
  print.line(fmt`  ok   memory limit: ${p.memory_limit === "cgroup" ? "memory cgroup" : "RLIMIT_DATA (approximate: no memory cgroup here)"}`);
  print.line(fmt`  ${engine === "ok" ? "ok  " : "MISS"} egress gate engine: ${engine === "ok" ? "loaded (network grants work)" : engine}`);
  print.line(fmt`  ${install.ok ? "ok  " : "MISS"} Vak's installation: ${install.line}`);
  print.line(fmt`  ${container.ready ? "ok  " : "note"} container backend (--sandbox container, opt-in): ${container.detail}`);
  if (p.tiocsti_legacy === 1) print.line(own("  note terminal injection (TIOCSTI) is enabled on this kernel; the seccomp filter blocks it"));
  if (best.kind === "namespaces") print.line(fmt`sandbox: full (namespaces, Landlock, seccomp, write guard); end-to-end test: ${smoke}`);
  else if (best.kind === "reduced") {
    print.line(fmt`sandbox: reduced only (${best.missing.join("; ")}); end-to-end test: ${smoke}`);
    print.line(own("  reduced mode runs with Landlock, seccomp and the write guard on the host's own file system view."));
    print.line(own("  It refuses what it cannot guarantee: --allow-net, --deny-read inside a grant, and a private /proc."));
    print.line(own("  Use it explicitly with `vak exec --sandbox reduced`; it is never chosen for you."));
  } else print.line(fmt`sandbox: unavailable (${best.missing.join("; ")}); vak exec refuses to run restricted commands here`);
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
