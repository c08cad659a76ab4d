import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { listRunning } from "../workload/running.js";
import type { AuditContext } from "./context.js";
import type { Check } from "./finding.js";

/**
 * Workloads running now from a spec whose file has changed since: what runs
 * is the generation started from the old text (its grants), not what the
 * file says. The running workload asks before it applies the edit (at its
 * next message), so this is drift to review, never fixed here.
 */
export function workloadChecks(ctx: AuditContext): Check[] {
  const out: Check[] = [];
  // Beside the journal file, or in the state directory for a journal that is not a file (running.ts).
  const dirs = [...new Set([dirname(ctx.journalPath), ctx.dirs.state])];
  for (const w of dirs.flatMap((d) => listRunning(d))) {
    let now: string | undefined;
    try {
      now = createHash("sha256").update(readFileSync(w.spec, "utf8")).digest("hex");
    } catch {
      now = undefined;
    }
    if (now === w.sha256) continue;
    out.push({ id: "trust.workload-drift", severity: "warn", path: w.spec, fixable: false, title: `the running workload ${w.name} runs another version of its spec than the file holds`,
      detail: `pid ${w.pid}${w.session ? `, session ${w.session}` : ""} runs generation ${w.generation} from sha256 ${w.sha256.slice(0, 12)}…; ${now ? `the file is ${now.slice(0, 12)}… now` : "the file cannot be read now"}: its grants are the old ones until the change is approved`,
      fix: `review the edit: the workload asks before applying it at its next message (or stop it and run it again${w.session ? `; its record: vak journal show ${w.session}` : ""})` });
  }
  return out;
}
