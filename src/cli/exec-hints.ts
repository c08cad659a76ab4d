import { accessSync, constants, lstatSync, readFileSync, realpathSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { expandValue } from "../policy/expand.js";
import { installation } from "../policy/install.js";
import { isWithin } from "../policy/paths.js";
import type { LaunchPlan } from "../policy/plan.js";

/**
 * The lines that say what a run is missing and how to grant it: variables a
 * program reads that the allowlist dropped, a program that is another one
 * (or none) inside than on the host, a path outside the view and the flag or
 * profile that would show it. They name what is missing, never a value. The
 * presets are read from their index (dist/presets-index.json, built from
 * presets/*.toml), one small file, and only when a hint needs them.
 */
export interface PresetEntry {
  name: string;
  extends: string[];
  commands: string[];
  env: string[];
  read: string[];
  write: string[];
  net: string[];
}

export function presetIndex(): PresetEntry[] {
  try {
    return JSON.parse(readFileSync(join(installation().dist, "presets-index.json"), "utf8")) as PresetEntry[];
  } catch {
    return [];
  }
}

/** The programs a command line names: its program, and the words of a shell's -c script. */
export function commandNames(argv: readonly string[]): string[] {
  const names = new Set<string>();
  if (argv[0]) names.add(basename(argv[0]));
  if (argv.length >= 3 && /(^|\/)(ba|da|z|k)?sh$/.test(argv[0] ?? "") && argv[1] === "-c")
    for (const w of (argv[2] ?? "").split(/[\s;&|()`'"<>]+/).slice(0, 200)) if (/^[A-Za-z0-9_./+-]+$/.test(w)) names.add(basename(w));
  return [...names];
}

const MAX_NAMES = 8;
const list = (xs: string[]) => (xs.length > MAX_NAMES ? `${xs.slice(0, MAX_NAMES).join(", ")} and ${xs.length - MAX_NAMES} more` : xs.join(", "));
const matches = (name: string, pattern: string) => (pattern.endsWith("*") ? name.startsWith(pattern.slice(0, -1)) : name === pattern);

/**
 * Before a run: the variables a program on the command line reads (by its
 * preset's list) that are set on the host and were not passed. Names only.
 */
export function droppedEnvHints(plan: LaunchPlan, applied: readonly string[], hostEnv: NodeJS.ProcessEnv, index: PresetEntry[]): string[] {
  const names = commandNames(plan.command);
  const out: string[] = [];
  for (const p of index) {
    const cmd = p.commands.find((c) => names.includes(c));
    if (!cmd || applied.includes(p.name)) continue;
    const dropped = Object.keys(hostEnv).filter((k) => hostEnv[k] !== undefined && plan.env[k] === undefined && p.env.some((pat) => matches(k, pat))).sort();
    if (dropped.length) out.push(`${cmd} may read ${list(dropped)}, set on the host and not passed (values are never shown): --profile ${p.name} passes them, or --allow-env NAME`);
  }
  return out;
}

function which(name: string, path: string | undefined): string | undefined {
  for (const d of (path ?? "").split(":")) {
    if (!d.startsWith("/")) continue;
    try {
      accessSync(join(d, name), constants.X_OK);
      return join(d, name);
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Is a host path in the sandbox's view (a host directory bound there)? */
export function inView(plan: LaunchPlan, p: string): boolean {
  return plan.mounts.some((m) => (m.kind === "ro" || m.kind === "rw") && isWithin(p, m.path));
}

/** The preset whose grants would show a host path, if one would. */
export function presetFor(path: string, index: PresetEntry[], env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string | undefined {
  for (const p of index)
    for (const raw of [...p.read, ...p.write]) {
      const e = expandValue(raw, env, home);
      if (e.ok && e.value.startsWith("/") && isWithin(path, e.value)) return p.name;
    }
  return undefined;
}

/** What to grant so that a directory's programs are seen: a node_modules/.bin needs the packages beside it. */
function readGrantFor(dir: string): string {
  return /\/node_modules\/\.bin$/.test(dir) ? dirname(dirname(dir)) : dir;
}

function grantLine(dir: string, index: PresetEntry[]): string {
  const p = presetFor(dir, index);
  return `--allow-read ${readGrantFor(dir)}${p ? `, or --profile ${p}` : ""}`;
}

/**
 * The program a command names, as the host's PATH and the sandbox's find it:
 * `before` when it is another program inside (pyenv's python on the host,
 * /usr/bin/python3 here), `notFound` for when the sandbox finds none.
 */
export function programHints(plan: LaunchPlan, hostEnv: NodeJS.ProcessEnv, index: () => PresetEntry[]): { before?: string; notFound?: string } {
  const name = plan.command[0] ?? "";
  if (name.includes("/")) {
    if (!name.startsWith("/") || inView(plan, name)) return {};
    return { notFound: `${name} is outside the sandbox's view: ${grantLine(dirname(name), index())}` };
  }
  const host = which(name, hostEnv.PATH);
  if (!host || !plan.pathDropped.includes(dirname(host))) return {};
  const inside = which(name, plan.env.PATH);
  let real = host;
  try {
    real = realpathSync.native(host);
  } catch {
    // a dangling link: say what PATH says
  }
  const via = real !== host && !isWithin(real, readGrantFor(dirname(host))) ? ` (a link to ${real})` : "";
  const grant = grantLine(dirname(host), index());
  if (inside) return { before: `${name} is ${host}${via} on the host, but that directory is outside the sandbox, so ${inside} runs here instead: ${grant}` };
  return { notFound: `${name}: not found in the sandbox; on the host it is ${host}${via}: ${grant}` };
}

/** Paths looked at among a failed command's arguments and module path variables, and hint lines printed at most. */
const MAX_ARG_PATHS = 32;
const MAX_ARG_HINTS = 3;

/**
 * After a command failed: the paths it was given (its arguments, `--opt=PATH`
 * values, NODE_PATH and PYTHONPATH entries) that exist on the host but are
 * outside the sandbox's view, each with the grant that would show it: a script
 * or a module it could not find says why (`node /elsewhere/m.js`). Names only:
 * nothing is read but whether the path exists.
 */
export function outsidePathHints(plan: LaunchPlan, index: PresetEntry[]): string[] {
  const given = plan.command.slice(1).map((a) => (a.startsWith("-") && a.includes("=") ? a.slice(a.indexOf("=") + 1) : a)).filter((a) => a.includes("/"));
  const modules = ["NODE_PATH", "PYTHONPATH"].flatMap((k) => (plan.env[k] ?? "").split(":").filter(Boolean));
  const out: string[] = [];
  const seen = new Set<string>();
  for (const arg of [...given, ...modules].slice(0, MAX_ARG_PATHS)) {
    const p = resolve(plan.cwd, arg);
    if (seen.has(p) || inView(plan, p)) continue;
    seen.add(p);
    let dir: boolean;
    try {
      dir = lstatSync(p).isDirectory();
    } catch {
      continue; // not on the host either: nothing a grant would show
    }
    out.push(`${arg} is outside the sandbox's view, so the command could not see it: ${grantLine(dir ? p : dirname(p), index)}`);
    if (out.length >= MAX_ARG_HINTS) break;
  }
  return out;
}

/** After a shell said "not found" (exit 127): the PATH directories the sandbox left out, and what grants each. */
export function droppedPathHint(plan: LaunchPlan, index: PresetEntry[]): string | undefined {
  if (!plan.pathDropped.length) return undefined;
  const dirs = plan.pathDropped.slice(0, MAX_NAMES).map((d) => {
    const p = presetFor(d, index);
    return `${d}${p ? ` (--profile ${p})` : ""}`;
  });
  return `exit 127: a program was not found. These directories of your PATH are outside the sandbox: ${dirs.join(", ")}${plan.pathDropped.length > MAX_NAMES ? ", …" : ""}; --allow-read DIR keeps one`;
}
