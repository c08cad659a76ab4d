import { auditContext, type AuditContext } from "./context.js";
import { controlFileChecks } from "./control-files.js";
import { deepExposureChecks, exposureChecks } from "./exposure.js";
import { type AuditReport, atLeastWarn, type Check, type Finding } from "./finding.js";
import { applyFixes } from "./fix.js";
import { installChecks } from "./install.js";
import { recordChecks } from "./record.js";
import { ruleChecks } from "./rules.js";
import { installHeldCheck, sandboxChecks } from "./sandbox.js";
import { secretChecks } from "./secrets.js";
import { trustChecks } from "./trust.js";
import { workloadChecks } from "./workloads.js";

/** Every check family, in the order a reader should care: the sandbox first. */
export async function runChecks(ctx: AuditContext, deep: boolean): Promise<Check[]> {
  const out: Check[] = [];
  out.push(...(await sandboxChecks()));
  if (ctx.configError)
    out.push({ id: "config.invalid", severity: "critical", path: ctx.configPath, fixable: false, title: "the user config does not parse", detail: ctx.configError, fix: "correct it; every command that reads it refuses to start" });
  out.push(...controlFileChecks(ctx));
  out.push(...secretChecks(ctx));
  out.push(...ruleChecks(ctx));
  out.push(...(await recordChecks(ctx)));
  out.push(...installChecks(ctx.uid), ...installHeldCheck());
  const exposure = exposureChecks(ctx);
  out.push(...exposure.checks);
  if (deep) out.push(...(await deepExposureChecks(exposure.exposure)));
  out.push(...trustChecks(ctx), ...workloadChecks(ctx));
  return out;
}

const finding = ({ remove: _r, ...f }: Check): Finding => f;

/** `vak audit`: the checks, --fix's narrowings (journaled), then the checks again, so the report says what is left. */
export async function audit(opts: { fix?: boolean; deep?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<{ report: AuditReport; errors: string[] }> {
  const ctx = auditContext(opts.env);
  let checks = await runChecks(ctx, opts.deep ?? false);
  let fixed: AuditReport["fixed"] = [];
  let errors: string[] = [];
  if (opts.fix && checks.some((c) => c.fixable)) {
    ({ fixed, errors } = await applyFixes(checks, ctx));
    checks = await runChecks(auditContext(opts.env), opts.deep ?? false);
  }
  const findings = checks.map(finding);
  return { report: { version: 1, ok: !findings.some(atLeastWarn), deep: opts.deep ?? false, findings, fixed }, errors };
}
