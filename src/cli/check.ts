import { describe } from "../workload/workload-session.js";
import { loadSpec } from "../workload/spec.js";
import { fmt, own, processOutput } from "./output.js";

/** `vak check SPEC`: refuses a bad spec with file, line and field; else prints what each component can reach. */
export function checkCommand(file: string, opts: { json?: boolean; mode?: "read-only" | "workspace-write" }): number {
  const plan = loadSpec(file, { mode: opts.mode });
  const components = describe(plan);
  const { out } = processOutput();
  if (opts.json) {
    out.json({ name: plan.name, id: plan.id, spec: plan.source, hash: plan.hash, workspace: plan.workspace, harness: { model: plan.harness.model ?? null, grants: "none" }, components });
    return 0;
  }
  // A spec is the user's file, but it may come from a repository: its names and paths are shown neutralised like anything else.
  out.line(fmt`workload ${plan.name} (${plan.source}, sha256 ${plan.hash.slice(0, 16)}…)\nworkspace ${plan.workspace}\n\nharness: model ${plan.harness.model ?? "(from --model or your config)"}; reaches nothing itself`);
  for (const c of components) {
    const list = (label: string, xs: unknown[]) => {
      if (!xs.length) return out.line(fmt`  ${own(label.padEnd(10))} nothing`);
      xs.forEach((x, i) => out.line(fmt`  ${own(i === 0 ? label.padEnd(10) : " ".repeat(10))} ${typeof x === "string" ? x : JSON.stringify(x)}`));
    };
    const argv = (c.command ?? c.mcp) as string[] | null;
    // A component's name is checked by the spec's schema (lower-case letters, digits and -): it starts its line as Vak's own.
    out.line(fmt`\n${own(String(c.component))}: ${(c.tools as string[]).join(", ")}${argv ? fmt` (runs ${argv.join(" ")})` : ""}`);
    if ((c.commandPaths as string[]).length) list("its files", c.commandPaths as string[]);
    list("read", c.read as string[]);
    list("write", c.write as string[]);
    if ((c.denyRead as string[]).length) list("deny-read", c.denyRead as string[]);
    if ((c.denyWrite as string[]).length) list("deny-write", c.denyWrite as string[]);
    list("net", c.net as string[]);
    list("env", c.env as string[]);
    list("secrets", (c.secrets as { ref: string; to: string }[]).map((s) => `${s.ref} → ${s.to}`));
    list("stores", c.stores as string[]);
    list("limits", Object.entries(c.limits as object).map(([k, v]) => `${k} ${v}`));
    out.line(fmt`  ${own("approval".padEnd(10))} write: ${(c.approval as { write: string }).write}, commands: ${(c.approval as { exec: string }).exec}`);
    if ((c.tools as string[]).includes("exec") && (c.secrets as unknown[]).length)
      out.line(own(`  note: this component runs model-written commands and holds secrets; a command can print a secret disguised (reversed, split), and redaction cannot catch every disguise`));
  }
  return 0;
}
