import { sep } from "node:path";
import { isVakError, VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";

/**
 * An error of a process whose installation was upgraded or rebuilt under it: a chunk of Vak's own bundle it
 * asked for is gone (a build removed it, a new version names its chunks otherwise), or, when `changed` says the
 * installation is no longer the one the process started from, anything else its code did not expect. Said as
 * that, with what to do, never as "internal error: Cannot find module './exec-config-….cjs'". Undefined for any
 * other error.
 */
export function upgradeError(e: unknown, changed?: string): VakError | undefined {
  if (isVakError(e) || !(e instanceof Error)) return undefined;
  const gone = missingChunk(e);
  if (!gone && !changed) return undefined;
  const what = [changed, gone && `${gone} is gone`].filter(Boolean).join("; ");
  return new VakError("upgraded", `Vak was upgraded or rebuilt while this ran (${what}), and this run could not go on with the old code: run it again`);
}

/** The chunk of Vak's own bundle a require could not find, as it was asked for; undefined for any other error. */
function missingChunk(e: Error): string | undefined {
  if ((e as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") return undefined;
  const asked = /^Cannot find module '([^']+)'/.exec(e.message)?.[1];
  const by = (e as { requireStack?: unknown }).requireStack;
  const from = Array.isArray(by) && typeof by[0] === "string" ? by[0] : "";
  return asked && from.startsWith(installation().dist + sep) ? asked : undefined;
}
