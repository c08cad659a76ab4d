import { audit } from "../audit/audit.js";
import type { Finding } from "../audit/finding.js";
import { Redactor } from "../secrets/redact.js";
import { visible } from "./visible.js";

/**
 * `vak audit [--json] [--fix] [--deep]`: exit 0 when nothing is at warn or
 * above, 1 otherwise. Paths and messages come from the file system and the
 * config, so every line is neutralised and redacted before it is printed.
 */
export async function auditCommand(opts: { json?: boolean; fix?: boolean; deep?: boolean }): Promise<number> {
  const { report, errors } = await audit({ fix: opts.fix, deep: opts.deep });
  const r = new Redactor();
  const clean = (s: string) => visible(r.text(s));
  if (opts.json) {
    const safe = { ...report, findings: report.findings.map((f) => ({ ...f, title: r.text(f.title), detail: r.text(f.detail), fix: r.text(f.fix), ...(f.path === undefined ? {} : { path: r.text(f.path) }) })) };
    process.stdout.write(`${JSON.stringify(safe)}\n`);
  } else {
    const out = (s: string) => process.stdout.write(`${clean(s)}\n`);
    for (const f of report.fixed) out(`fixed ${f.id}: ${f.path} ${f.from} → ${f.to} (journaled)`);
    const order: Finding["severity"][] = ["critical", "warn", "info"];
    for (const sev of order)
      for (const f of report.findings.filter((x) => x.severity === sev)) {
        out(`${sev.toUpperCase().padEnd(8)} ${f.id}: ${f.title}`);
        out(`         ${f.detail}`);
        out(`         fix: ${f.fix}${f.fixable ? " [--fix]" : ""}`);
      }
    const n = (sev: Finding["severity"]) => report.findings.filter((f) => f.severity === sev).length;
    out(report.findings.length === 0 ? "vak audit: nothing found" : `vak audit: ${n("critical")} critical, ${n("warn")} warn, ${n("info")} info${report.findings.some((f) => f.fixable) ? "; vak audit --fix applies the ones marked [--fix]" : ""}`);
  }
  for (const e of errors) process.stderr.write(`vak audit: ${clean(e)}\n`);
  return report.ok && errors.length === 0 ? 0 : 1;
}
