import { realpathSync } from "node:fs";
import { describeSource, type Composition, type Granted } from "../policy/compose.js";
import { VakError } from "../policy/errors.js";
import { isWithin } from "../policy/paths.js";
import type { LaunchPlan } from "../policy/plan.js";
import { shownPath } from "../policy/config-text.js";
import { FIND_WHAT, scanStateSliced, shellQuote as shq, type StateBudget } from "../policy/state-entries.js";
import { EXIT_REFUSED } from "./exit.js";
import { ExecRecord } from "./exec-record.js";
import type { Payload } from "../journal/events.js";
import type { Journal } from "../journal/journal.js";
import { fmt, own, type Output } from "./output.js";
import type { Redactor } from "../secrets/redact.js";

/** Entries named on stderr; the journal keeps the scan's (state-entries.ts MAX_KEPT). */
const MAX_SHOWN = 20;

/** What of a run's context the refusal uses (exec.ts's ExecContext has them). */
interface RefusalContext {
  err: Output;
  journal?: Journal | undefined;
  servedBy?: Payload | undefined;
}

/**
 * Refuses a run whose sandbox could write a host tool's state (a profile's state_dirs, state_files) that already
 * holds a link, a hard-linked file, a FIFO, a socket or a device (src/policy/state-entries.ts), or that holds
 * more than Vak checks before a run: each is named on stderr (at most MAX_SHOWN) with the commands to look at
 * them and to remove them, and the refusal is on the journal. The same in-process and in the resident host
 * (ctx: its client's stderr, its journal). Returns when there is nothing to refuse.
 */
export async function refuseStateEntries(plan: LaunchPlan, c: Composition, ctx: RefusalContext, redactor: Redactor, budget?: StateBudget): Promise<void> {
  if (plan.sandbox === "none" || plan.grants.noLinks.length === 0) return;
  const scan = await scanStateSliced(plan.grants.noLinks, plan.grants.write, budget);
  if (scan.found === 0 && !scan.stopped) return;
  const roots = [...new Set(scan.stopped ? plan.grants.noLinks : scan.entries.map((e) => e.root))];
  const summary = scan.stopped
    ? `a host tool's state holds more than Vak checks before a run (${scan.stopped.entries} entries in ${scan.stopped.ms} ms, stopped at ${scan.stopped.at}); it looks there for links the tool on the host would follow`
    : `a host tool's state holds ${scan.found} ${scan.found === 1 ? "entry" : "entries"} the tool on the host would follow or share after this run, which no sandbox may make there`;
  ctx.err.line(fmt`vak: refused: ${own(summary)}${own(scan.found ? ":" : "")}`);
  for (const e of scan.entries.slice(0, MAX_SHOWN)) {
    const arrow = e.kind === "symbolic link" ? fmt` -> ${e.target}` : own("");
    ctx.err.line(fmt`vak:   ${shownPath(e.path)}${arrow}: ${own(e.why)}`);
  }
  if (scan.found > MAX_SHOWN) ctx.err.line(fmt`vak:   … and ${scan.found - MAX_SHOWN} more`);
  for (const root of roots) ctx.err.line(fmt`vak: ${shownPath(root)} is a host tool's state (${sourceOf(root, c)})`);
  const dirs = roots.map(shq).join(" ");
  ctx.err.line(fmt`vak: look at them: find ${dirs} ${own(FIND_WHAT)} -exec ls -ld {} +`);
  ctx.err.line(fmt`vak: remove them (a hard-linked file keeps its other names): find ${dirs} ${own(FIND_WHAT)} -delete`);
  const reason = scan.stopped ? "a host tool's state is larger than Vak checks before a run" : "a host tool's state holds links, hard-linked files, FIFOs, sockets or devices";
  await ExecRecord.refused(plan, {
    op: "state-entries", reason, roots, found: scan.found, stopped: scan.stopped ?? null,
    entries: scan.entries.map((e) => ({ path: e.path, kind: e.kind, ...(e.target !== undefined ? { target: e.target } : {}), why: e.why })),
  }, redactor, ctx.journal, ctx.servedBy);
  throw new VakError("unsafe-state", `nothing was run (exit ${EXIT_REFUSED}): ${reason}; remove them (above) and run again, or run without the profile that names that state`);
}

/** Which profile (or flag) made root a host tool's state. */
function sourceOf(root: string, c: Composition): string {
  const real = (p: string) => {
    try {
      return realpathSync.native(p);
    } catch {
      return p;
    }
  };
  const match = (x: Granted) => x.value === root || real(x.value) === root || isWithin(root, real(x.value));
  const d = c.lists.state_dirs.find(match);
  const f = d ? undefined : c.lists.state_files.find(match);
  return d ? `state_dirs of ${describeSource(d.source)}` : f ? `state_files of ${describeSource(f.source)}` : "state_dirs";
}
