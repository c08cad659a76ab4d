import { describe } from "../workload/workload-session.js";
import { loadSpec } from "../workload/spec.js";

/** `vak check SPEC`: refuses a bad spec with file, line and field; else prints what each component can reach. */
export function checkCommand(file: string, opts: { json?: boolean; mode?: "read-only" | "workspace-write" }): number {
  const plan = loadSpec(file, { mode: opts.mode });
  const components = describe(plan);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ name: plan.name, id: plan.id, spec: plan.source, hash: plan.hash, workspace: plan.workspace, harness: { model: plan.harness.model ?? null, grants: "none" }, components })}\n`);
    return 0;
  }
  const out = process.stdout;
  out.write(`workload ${plan.name} (${plan.source}, sha256 ${plan.hash.slice(0, 16)}…)\nworkspace ${plan.workspace}\n\nharness: model ${plan.harness.model ?? "(from --model or your config)"}; reaches nothing itself\n`);
  for (const c of components) {
    const list = (label: string, xs: unknown[]) => out.write(`  ${label.padEnd(10)} ${xs.length ? xs.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join("\n" + " ".repeat(13)) : "nothing"}\n`);
    const argv = (c.command ?? c.mcp) as string[] | null;
    out.write(`\n${c.component}: ${(c.tools as string[]).join(", ")}${argv ? ` (runs ${argv.join(" ")})` : ""}\n`);
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
    out.write(`  ${"approval".padEnd(10)} write: ${(c.approval as { write: string }).write}, commands: ${(c.approval as { exec: string }).exec}\n`);
    if ((c.tools as string[]).includes("exec") && (c.secrets as unknown[]).length)
      out.write(`  note: this component runs model-written commands and holds secrets; a command can print a secret disguised (reversed, split), and redaction cannot catch every disguise\n`);
  }
  return 0;
}
