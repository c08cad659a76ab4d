import { audit } from "../audit/audit.js";
import type { Finding } from "../audit/finding.js";
import { Redactor } from "../secrets/redact.js";
import { fmt, own, processOutput } from "./output.js";

/**
 * `vak audit [--json] [--fix] [--deep]`: exit 0 when nothing is at warn or
 * above, 1 otherwise. Paths and messages come from the file system and the
 * config, so every value is printed through the output (redacted, neutralised, kept off column 0).
 */
export async function auditCommand(opts: { json?: boolean; fix?: boolean; deep?: boolean }): Promise<number> {
  const { report, errors } = await audit({ fix: opts.fix, deep: opts.deep });
  const r = new Redactor();
  const { out, err } = processOutput(r);
  if (opts.json) {
    const safe = { ...report, findings: report.findings.map((f) => ({ ...f, title: r.text(f.title), detail: r.text(f.detail), fix: r.text(f.fix), ...(f.path === undefined ? {} : { path: r.text(f.path) }) })) };
    out.json(safe);
  } else {
    // Check ids and severities are Vak's own; titles, details, paths and fixes name what the file system and the config hold.
    for (const f of report.fixed) out.line(fmt`fixed ${own(f.id)}: ${f.path} ${f.from} → ${f.to} (journaled)`);
    const order: Finding["severity"][] = ["critical", "warn", "info"];
    for (const sev of order)
      for (const f of report.findings.filter((x) => x.severity === sev)) {
        out.line(fmt`${own(sev.toUpperCase().padEnd(8))} ${own(f.id)}: ${f.title}`);
        out.line(fmt`         ${f.detail}`);
        out.line(fmt`         fix: ${f.fix}${own(f.fixable ? " [--fix]" : "")}`);
      }
    const n = (sev: Finding["severity"]) => report.findings.filter((f) => f.severity === sev).length;
    out.line(own(report.findings.length === 0 ? "vak audit: nothing found" : `vak audit: ${n("critical")} critical, ${n("warn")} warn, ${n("info")} info${report.findings.some((f) => f.fixable) ? "; vak audit --fix applies the ones marked [--fix]" : ""}`));
  }
  for (const e of errors) err.line(fmt`vak audit: ${e}`);
  return report.ok && errors.length === 0 ? 0 : 1;
}
