import { closeSync, constants, existsSync, fsyncSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { delimiter, dirname, join, resolve } from "node:path";
import { VakError } from "../policy/errors.js";
import { packageRoot } from "../policy/install.js";
import { type PathFacts, unwrapConfig, type VakInvocation, wrapConfig, type WrapReport } from "../mcp/wrap.js";
import { fmt, own, processOutput } from "./output.js";

/** `vak mcp wrap` and `vak mcp unwrap`: the file side of src/mcp/wrap.ts. */
const facts: PathFacts = {
  kind: (p) => {
    try {
      const st = statSync(p);
      return st.isDirectory() ? "dir" : st.isFile() ? "file" : undefined;
    } catch {
      return undefined;
    }
  },
  packageRoot: (dir) => {
    for (let d = dir; ; d = dirname(d)) {
      if (existsSync(join(d, "package.json"))) return d;
      if (dirname(d) === d) return undefined;
    }
  },
};

/** "vak" when the vak on the PATH is this one; else this Node and this script, so the client starts the same Vak. */
function vakInvocation(): VakInvocation {
  const script = join(packageRoot(), "bin", "vak.cjs");
  for (const d of (process.env.PATH ?? "").split(delimiter)) {
    const p = join(d, "vak");
    try {
      if (existsSync(p) && readFileSync(p, "utf8").slice(0, 4096) === readFileSync(script, "utf8").slice(0, 4096)) return ["vak"];
    } catch {
      // not readable: not ours
    }
  }
  return [process.execPath, script];
}

function readConfig(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new VakError("bad-input", `--config ${file}: cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
    return v as Record<string, unknown>;
  } catch {
    throw new VakError("bad-input", `--config ${file}: not a JSON object (a file with comments must be wrapped by hand)`);
  }
}

/** Replaces the file's content atomically, keeping its mode. */
function writeAtomically(file: string, text: string): void {
  const mode = statSync(file).mode & 0o777;
  const tmp = `${file}.vak-${process.pid}.tmp`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

/** What was done to each server; names and commands are the config's, shown through the output's neutraliser. */
function print(report: WrapReport[]): void {
  const { out } = processOutput();
  for (const r of report) out.line(fmt`${own(r.action.padEnd(9))} ${r.name} (${r.where}): ${r.detail}`);
  if (report.length === 0) out.line(own("no MCP servers found (looked for mcpServers, servers, mcp.servers and projects.*.mcpServers)"));
}

export function mcpWrap(opts: { config: string; dryRun?: boolean }): number {
  const file = resolve(opts.config);
  const before = readConfig(file);
  const { config, report } = wrapConfig(before, vakInvocation(), facts);
  const text = `${JSON.stringify(config, null, 2)}\n`;
  if (opts.dryRun) {
    processOutput().out.jsonBlock(config);
    print(report);
    return 0;
  }
  print(report);
  if (!report.some((r) => r.action === "wrapped")) return 0;
  const backup = `${file}.vak-backup`;
  // The first backup is the original; a later wrap (of servers added since) keeps it.
  if (!existsSync(backup)) {
    const fd = openSync(backup, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      writeSync(fd, readFileSync(file));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
  writeAtomically(file, text);
  processOutput().out.line(fmt`wrote ${file} (the original is in ${backup}; \`vak mcp unwrap --config ${opts.config}\` restores it)`);
  return 0;
}

export function mcpUnwrap(opts: { config: string }): number {
  const file = resolve(opts.config);
  const backupFile = `${file}.vak-backup`;
  const backup = existsSync(backupFile) ? readConfig(backupFile) : undefined;
  const { config, report } = unwrapConfig(readConfig(file), backup);
  print(report);
  if (report.length) writeAtomically(file, `${JSON.stringify(config, null, 2)}\n`);
  if (backup) unlinkSync(backupFile);
  processOutput().out.line(report.length ? fmt`restored ${file}` : own("nothing to unwrap"));
  return 0;
}
