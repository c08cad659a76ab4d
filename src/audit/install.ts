import { lstatSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { installation } from "../policy/install.js";
import { type Check, type Narrowing, octal } from "./finding.js";

/**
 * Vak's own installation: what every run executes (the CLI, dist/, the
 * launcher, the engine) must be changeable by its owner alone. A file anyone
 * else can write is code they can make Vak run with the user's authority.
 */
const MAX_FILES = 50_000;

function walk(root: string, into: string[]): void {
  let st;
  try {
    st = lstatSync(root);
  } catch {
    return;
  }
  into.push(root);
  if (!st.isDirectory() || into.length > MAX_FILES) return;
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return;
  }
  for (const n of names) if (into.length <= MAX_FILES) walk(join(root, n), into);
}

export function installChecks(uid: number): Check[] {
  const i = installation();
  const paths: string[] = [i.root];
  for (const part of ["package.json", "bin", "dist", "build/Release/vak-launcher", "build/Release/vak-engine.node"]) walk(join(i.root, part), paths);
  paths.push(i.node);
  const mine: Narrowing[] = [];
  const theirs: string[] = [];
  const foreign: string[] = [];
  let exampleMode = 0;
  for (const p of paths) {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) continue;
    if (st.uid !== uid && st.uid !== 0) foreign.push(`${p} (uid ${st.uid})`);
    if (st.mode & 0o022) {
      if (mine.length + theirs.length === 0) exampleMode = st.mode;
      if (st.uid === uid) mine.push({ path: p, bits: 0o022, dir: st.isDirectory() });
      else theirs.push(`${p} (uid ${st.uid})`);
    }
  }
  const out: Check[] = [];
  const writable = [...mine.map((w) => w.path), ...theirs];
  if (writable.length)
    out.push({ id: "install.writable", severity: "critical", path: mine[0]?.path ?? i.root, fixable: mine.length > 0, remove: mine.length ? mine : undefined,
      title: "Vak's installation is writable by others",
      detail: `${writable.length} path${writable.length > 1 ? "s" : ""} of ${i.root} can be changed by their group or anyone (${writable.slice(0, 3).join(", ")}${writable.length > 3 ? ", …" : ""}; mode ${octal(exampleMode)})`,
      fix: theirs.length ? `chmod -R go-w ${i.root} as the owner of each (${mine.length ? "vak audit --fix does yours; " : ""}the rest need their owner or root)` : `chmod -R go-w ${i.root} (vak audit --fix does this)` });
  if (foreign.length)
    out.push({ id: "install.owner", severity: "warn", path: i.root, fixable: false, title: "parts of Vak's installation belong to another user",
      detail: `${foreign.slice(0, 3).join(", ")}${foreign.length > 3 ? ", …" : ""}: that user can change what Vak runs`, fix: `reinstall Vak as yourself or as root (chown -R root: ${i.root})` });
  for (let d = dirname(i.root); ; d = dirname(d)) {
    try {
      const st = lstatSync(d);
      if (st.mode & 0o002 && !(st.mode & 0o1000))
        out.push({ id: "install.parent-writable", severity: "critical", path: d, fixable: st.uid === uid, remove: st.uid === uid ? [{ path: d, bits: 0o002, dir: true }] : undefined,
          title: "a parent of Vak's installation is writable by anyone", detail: `${d} has mode ${octal(st.mode)} without the sticky bit: anyone can replace ${i.root}`, fix: `chmod o-w ${d}` });
    } catch {
      // gone: nothing to replace
    }
    if (d === "/") break;
  }
  return out;
}
