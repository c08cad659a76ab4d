import { engineProblem } from "../net/engine.js";
import { bestSandbox, layers, probe } from "../sandbox/probe.js";
import { installCheck, smokeTest } from "../sandbox/self-test.js";
import type { Check } from "./finding.js";

const slug = (name: string) => name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");

/**
 * The sandbox, as `vak doctor` sees it: every layer the kernel offers, which
 * sandbox that makes (the full one, the reduced one, or none), and a real
 * sandboxed command end to end. A layer the promised profile needs is
 * missing: vak exec refuses rather than run weaker, so this says why.
 */
export async function sandboxChecks(): Promise<Check[]> {
  const out: Check[] = [];
  const p = await probe();
  for (const l of layers(p).filter((x) => !x.ok))
    out.push({ id: `sandbox.layer.${slug(l.name)}`, severity: "warn", fixable: false, title: `the kernel lacks ${l.name}`,
      detail: `${l.name}: ${l.detail}; ${l.required === "always" ? "every sandbox needs it" : "the full (namespaces) sandbox needs it"}`, fix: "see `vak doctor`; a newer kernel, or the distribution's switch for it" });
  const best = bestSandbox(p);
  if (best.kind === "unsupported")
    out.push({ id: "sandbox.unavailable", severity: "critical", fixable: false, title: "no sandbox can be built here",
      detail: `missing: ${best.missing.join("; ")}; vak exec refuses to run restricted commands`, fix: "run Vak on a Linux 5.14+ x86_64 kernel with Landlock enabled" });
  else if (best.kind === "reduced")
    out.push({ id: "sandbox.reduced", severity: "warn", fixable: false, title: "only the reduced sandbox is available",
      detail: `missing: ${best.missing.join("; ")}; the full profile (private mounts, network namespace) cannot be built, and --allow-net is refused`, fix: "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0)" });
  if (best.kind !== "unsupported") {
    const smoke = await smokeTest(best.kind);
    if (smoke !== undefined)
      out.push({ id: "sandbox.smoke-test", severity: "critical", fixable: false, title: "a real sandboxed command failed",
        detail: `the ${best.kind} sandbox did not run /bin/sh end to end: ${smoke}`, fix: "run `vak doctor` for the layer that failed" });
  }
  const engine = engineProblem();
  if (engine !== undefined)
    out.push({ id: "sandbox.egress-engine", severity: "warn", fixable: false, title: "the egress gate's engine did not load",
      detail: `${engine}; network grants cannot be enforced, so they are refused`, fix: "reinstall Vak (npm ci builds build/Release/vak-engine.node)" });
  if (p.procs_limit === "none")
    out.push({ id: "sandbox.procs-limit", severity: "info", fixable: false, title: "no process limit can be enforced", detail: "root without a pids cgroup or a per-namespace pid_max: --max-procs is refused", fix: "run Vak as a regular user" });
  return out;
}

/** Vak's own installation is held read-only wherever a grant of this workspace reaches it. */
export function installHeldCheck(): Check[] {
  const i = installCheck();
  if (i.ok) return [];
  return [{ id: "install.not-held", severity: "critical", fixable: false, path: i.root, title: "Vak's installation is not held read-only from this workspace",
    detail: i.line, fix: "move the workspace out of Vak's installation, or install Vak outside it" }];
}
