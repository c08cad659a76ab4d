import { closeSync, constants, fchmodSync, fstatSync, openSync } from "node:fs";
import { VakError } from "../policy/errors.js";
import type { AuditContext } from "./context.js";
import { type Check, type Fixed, type Narrowing, octal } from "./finding.js";
import { openAuditJournal } from "./record.js";

/**
 * `vak audit --fix`: only modes, and only bits taken away. The path is opened
 * without following a link (a link swapped in since the audit is refused, not
 * followed), checked to be the caller's own and of the kind audited, and its
 * mode changed through that descriptor, so the change lands on what was
 * checked. Each change is journaled before it is made; without a journal
 * nothing is changed.
 */
export function planFixes(checks: readonly Check[]): (Narrowing & { id: string })[] {
  const byPath = new Map<string, Narrowing & { id: string }>();
  for (const c of checks) {
    if (!c.fixable) continue;
    for (const r of c.remove ?? []) {
      const had = byPath.get(r.path);
      byPath.set(r.path, had ? { ...had, bits: had.bits | r.bits } : { ...r, id: c.id });
    }
  }
  return [...byPath.values()];
}

/** Takes bits away from one path's mode through a descriptor opened without following links; returns the modes before and after. */
export async function narrowMode(path: string, bits: number, dir: boolean, uid: number, record: (from: number, to: number) => void | Promise<void>): Promise<{ from: number; to: number }> {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | (dir ? constants.O_DIRECTORY : 0));
  } catch (e) {
    throw new VakError("bad-input", `${path}: not changed: it cannot be opened as a plain ${dir ? "directory" : "file"} (${(e as NodeJS.ErrnoException).code})`);
  }
  try {
    const st = fstatSync(fd);
    if (st.uid !== uid) throw new VakError("bad-input", `${path}: not changed: it belongs to uid ${st.uid}`);
    if (dir ? !st.isDirectory() : !st.isFile()) throw new VakError("bad-input", `${path}: not changed: it is no longer a ${dir ? "directory" : "file"}`);
    const from = st.mode & 0o7777;
    const to = from & ~bits;
    if (to !== from) {
      // On the record first: a change the journal cannot hold is not made.
      await record(from, to);
      fchmodSync(fd, to);
    }
    return { from, to };
  } finally {
    closeSync(fd);
  }
}

export async function applyFixes(checks: readonly Check[], ctx: AuditContext): Promise<{ fixed: Fixed[]; errors: string[] }> {
  const plan = planFixes(checks);
  if (plan.length === 0) return { fixed: [], errors: [] };
  const uid = ctx.uid;
  const journal = await openAuditJournal(ctx);
  const fixed: Fixed[] = [];
  const errors: string[] = [];
  try {
    const s = journal.startSession({ kind: "audit", title: "vak audit --fix", actor: { component: "audit" } });
    for (const p of plan) {
      try {
        const { from, to } = await narrowMode(p.path, p.bits, p.dir, uid, async (f, t) => {
          // Settles once committed (the session's start with it): the change is made only after.
          await s.append("audit.fixed", { component: "audit" }, 0, { check: p.id, path: p.path, from: octal(f), to: octal(t) });
        });
        if (from === to) continue;
        fixed.push({ id: p.id, path: p.path, from: octal(from), to: octal(to) });
      } catch (e) {
        errors.push((e as Error).message);
      }
    }
    await s.end(errors.length ? "error" : "ok");
  } finally {
    await journal.close();
  }
  return { fixed, errors };
}
