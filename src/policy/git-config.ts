import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { HeldPath } from "./chain.js";
import { VakError } from "./errors.js";

/**
 * What a repository's git configuration makes git run or read, found without
 * running git: git itself would run core.fsmonitor while telling us.
 *
 * The reader follows git's own grammar (config.c): `[section]`,
 * `[section "sub"]` and the old `[section.sub]`, variables with or without a
 * value, double quotes, the escapes \n \t \b \\ \" and line continuation,
 * `#` and `;` comments, a UTF-8 byte order mark, and a variable on the header's
 * line. Anything else is a line git refuses too; we refuse it as well rather
 * than guess what git would read (fail closed), and so do includes past
 * git's depth of 10 and files past 1 MiB.
 */
export interface GitConfigEntry {
  /** section[.subsection].name, section and name lower-cased as git compares them. */
  key: string;
  /** The value, or undefined for a bare `name` (boolean true). */
  value: string | undefined;
  /** The file it came from. */
  file: string;
}

export class GitConfigError extends VakError {
  constructor(file: string, what: string) {
    super("unsupported", `cannot read the git configuration ${file} (${what}); Vak reads what it names before a sandbox may write near it. Fix the file, or grant narrower writable paths`);
  }
}

const MAX_BYTES = 1 << 20;
const MAX_INCLUDE_DEPTH = 10;

/** Reads a file git would read: undefined when it does not exist (git skips it too). */
export function readGitFile(file: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new GitConfigError(file, `not readable: ${code ?? String(e)}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return undefined;
    if (st.size > MAX_BYTES) throw new GitConfigError(file, `larger than ${MAX_BYTES} bytes`);
    const buf = Buffer.alloc(st.size + 1);
    let got = 0;
    for (;;) {
      const n = readSync(fd, buf, got, buf.length - got, got);
      if (n === 0) break;
      got += n;
      if (got === buf.length) throw new GitConfigError(file, "it grew while being read");
    }
    const bytes = buf.subarray(0, got);
    const text = bytes.toString("utf8");
    if (!Buffer.from(text, "utf8").equals(bytes)) throw new GitConfigError(file, "not valid UTF-8");
    return text;
  } finally {
    closeSync(fd);
  }
}

const isAlpha = (c: string) => (c >= "A" && c <= "Z") || (c >= "a" && c <= "z");
const isAlnum = (c: string) => isAlpha(c) || (c >= "0" && c <= "9");

/** Parses one config file's text into entries. */
export function parseGitConfig(text: string, file: string): GitConfigEntry[] {
  const scan = scanGitConfig(text, file);
  if (scan.error) throw new GitConfigError(file, scan.error.what);
  return scan.entries.map((e) => ({ key: e.key, value: e.value, file: e.file }));
}

/** An entry with where it is: its first and last line (a value continued with a backslash spans several). */
export interface PlacedEntry extends GitConfigEntry {
  line: number;
  lastLine: number;
  /** The section, lower-cased; the subsection as git reads it (undefined for none); the variable, lower-cased. */
  section: string;
  sub: string | undefined;
  name: string;
}

/** A section header, with its line and where on that line it ends (just past its `]`). */
export interface PlacedHeader {
  line: number;
  end: number;
  section: string;
  sub: string | undefined;
}

/** What scanGitConfig read: every header and entry in order, and where the file stops being readable, if it does. */
export interface GitConfigScan {
  headers: PlacedHeader[];
  entries: PlacedEntry[];
  /** Where each comment starts (`#` or `;` outside quotes, to the end of its line): line and column. */
  comments: { line: number; start: number }[];
  /** The first line of what could not be read (the item that failed started there), and why. */
  error?: { line: number; what: string } | undefined;
}

/** Where the grammar stops: the first line of the item being read, and why. */
class Unreadable {
  constructor(readonly line: number, readonly what: string) {}
}

/**
 * The grammar, with every header and entry placed on its lines: for the held-path walk (parseGitConfig, which
 * refuses a file it cannot read) and for a copy written without credentials (strip-git-config.ts, which keeps
 * nothing from where the file stops being readable). Line numbers count the host file's lines (a CR LF is one end).
 */
export function scanGitConfig(text: string, file: string): GitConfigScan {
  const headers: PlacedHeader[] = [];
  const entries: PlacedEntry[] = [];
  const comments: GitConfigScan["comments"] = [];
  let s = text.startsWith("\uFEFF") ? text.slice(1) : text;
  s = s.replace(/\r\n/g, "\n");
  let i = 0;
  let line = 1;
  let lineStart = 0;
  let itemLine = 1;
  let section: { name: string; sub: string | undefined } | undefined;
  const fail = (what: string): never => {
    throw new Unreadable(itemLine, `line ${line}: ${what}`);
  };
  const peek = () => s[i];
  try {
    while (i < s.length) {
      const c = s[i]!;
      itemLine = line;
      if (c === "\n") {
        line++;
        i++;
        lineStart = i;
        continue;
      }
      if (c === " " || c === "\t") {
        i++;
        continue;
      }
      if (c === "#" || c === ";") {
        comments.push({ line, start: i - lineStart });
        while (i < s.length && s[i] !== "\n") i++;
        continue;
      }
      if (c === "[") {
        i++;
        let name = "";
        while (i < s.length && (isAlnum(s[i]!) || s[i] === "-" || s[i] === ".")) name += s[i++];
        if (name === "") fail("empty section name");
        let sub: string | undefined;
        if (peek() === " " || peek() === "\t") {
          while (peek() === " " || peek() === "\t") i++;
          if (peek() !== '"') fail("a section's subsection must be quoted");
          i++;
          sub = "";
          for (;;) {
            const d = s[i];
            if (d === undefined || d === "\n") fail("unterminated subsection");
            i++;
            if (d === '"') break;
            if (d === "\\") {
              const e = s[i];
              if (e === undefined || e === "\n") fail("unterminated subsection");
              sub += e;
              i++;
            } else sub += d;
          }
        } else if (name.includes(".")) {
          // [section.sub]: the old spelling, subsection lower-cased.
          const dot = name.indexOf(".");
          sub = name.slice(dot + 1).toLowerCase();
          name = name.slice(0, dot);
          if (name === "") fail("empty section name");
        }
        if (peek() !== "]") fail("bad section header");
        i++;
        section = { name: name.toLowerCase(), sub };
        headers.push({ line, end: i - lineStart, section: section.name, sub });
        continue;
      }
      if (!isAlpha(c)) fail(`unexpected character ${JSON.stringify(c)}`);
      if (section === undefined) fail("a variable before any section");
      let name = "";
      while (i < s.length && (isAlnum(s[i]!) || s[i] === "-")) name += s[i++];
      while (peek() === " " || peek() === "\t") i++;
      let value: string | undefined;
      if (peek() === "=") {
        i++;
        value = readValue();
      } else if (peek() === undefined || peek() === "\n" || peek() === "#" || peek() === ";") {
        value = undefined;
      } else fail("bad variable name");
      const sec = section!;
      const lower = name.toLowerCase();
      entries.push({
        key: `${sec.sub === undefined ? sec.name : `${sec.name}.${sec.sub}`}.${lower}`, value, file,
        line: itemLine, lastLine: line, section: sec.name, sub: sec.sub, name: lower,
      });
    }
  } catch (e) {
    if (e instanceof Unreadable) return { headers, entries, comments, error: { line: e.line, what: e.what } };
    throw e;
  }
  return { headers, entries, comments };

  function readValue(): string {
    let v = "";
    let quoted = false;
    let pendingSpace = "";
    let started = false;
    for (;;) {
      const c = s[i];
      if (c === undefined || (c === "\n" && !quoted)) break;
      if (c === "\n") fail("unterminated quote");
      i++;
      if (!quoted && (c === "#" || c === ";")) {
        comments.push({ line, start: i - 1 - lineStart });
        while (i < s.length && s[i] !== "\n") i++;
        break;
      }
      if (!quoted && (c === " " || c === "\t")) {
        if (started) pendingSpace += c;
        continue;
      }
      if (pendingSpace) {
        v += pendingSpace;
        pendingSpace = "";
      }
      started = true;
      if (c === '"') {
        quoted = !quoted;
        continue;
      }
      if (c === "\\") {
        const e = s[i];
        i++;
        if (e === "\n") {
          line++;
          lineStart = i;
          continue;
        }
        if (e === "n") v += "\n";
        else if (e === "t") v += "\t";
        else if (e === "b") v += "\b";
        else if (e === "\\" || e === '"') v += e;
        else fail("bad escape in a value");
        continue;
      }
      v += c;
    }
    if (quoted) fail("unterminated quote");
    return v;
  }
}

const expandHome = (p: string, home: string) => (p === "~" ? home : p.startsWith("~/") ? join(home, p.slice(2)) : p);

/**
 * A config file and every file it includes (include.path, includeIf.*.path:
 * all of them, whatever their condition, since a condition can come true
 * later), in git's order. Each include is also held: creating a missing one
 * would add configuration.
 */
export function readConfigTree(file: string, home: string, held: HeldPath[], depth = 0): GitConfigEntry[] {
  if (depth > MAX_INCLUDE_DEPTH) throw new GitConfigError(file, `includes nested deeper than ${MAX_INCLUDE_DEPTH}`);
  const text = readGitFile(file);
  if (text === undefined) return [];
  const out: GitConfigEntry[] = [];
  for (const e of parseGitConfig(text, file)) {
    out.push(e);
    if (e.value === undefined) continue;
    if (e.key === "include.path" || (e.key.startsWith("includeif.") && e.key.endsWith(".path"))) {
      const p = expandHome(e.value, home);
      const target = isAbsolute(p) ? p : resolve(dirname(file), p);
      held.push({ path: target, why: `included by ${file} (${e.key}): git configuration` });
      out.push(...readConfigTree(target, home, held, depth + 1));
    }
  }
  return out;
}

const BOOLEAN = new Set(["", "true", "false", "yes", "no", "on", "off", "1", "0"]);

/** Keys whose value is a command line git runs (or hands to a shell). */
const COMMAND_KEYS = new Set([
  "core.fsmonitor", "core.pager", "core.editor", "core.sshcommand", "core.askpass", "core.gitproxy", "sequence.editor",
  "diff.external", "gpg.program", "gpg.ssh.defaultkeycommand", "credential.helper", "interactive.difffilter",
  "sendemail.sendmailcmd", "sendemail.smtpserver", "sendemail.tocmd", "sendemail.cccmd", "sendemail.headercmd",
  "uploadpack.packobjectshook", "web.browser",
]);
/** section.<anything>.key patterns whose value is a command. */
const COMMAND_PATTERNS: [string, string][] = [
  ["diff.", ".command"], ["diff.", ".textconv"], ["merge.", ".driver"], ["filter.", ".clean"], ["filter.", ".smudge"],
  ["filter.", ".process"], ["credential.", ".helper"], ["gpg.", ".program"], ["difftool.", ".cmd"], ["difftool.", ".path"],
  ["mergetool.", ".cmd"], ["mergetool.", ".path"], ["man.", ".cmd"], ["man.", ".path"], ["browser.", ".cmd"],
  ["browser.", ".path"], ["remote.", ".uploadpack"], ["remote.", ".receivepack"], ["hook.", ".command"],
  ["trailer.", ".cmd"], ["trailer.", ".command"], ["lfs.customtransfer.", ".path"], ["lfs.extension.", ".clean"],
  ["lfs.extension.", ".smudge"],
];

function isCommandKey(key: string, value: string): boolean {
  if (key === "core.fsmonitor") return !BOOLEAN.has(value.toLowerCase());
  if (COMMAND_KEYS.has(key) || key.startsWith("pager.")) return true;
  if (key.startsWith("alias.") || (key.startsWith("submodule.") && key.endsWith(".update"))) return value.trimStart().startsWith("!");
  return COMMAND_PATTERNS.some(([a, b]) => key.startsWith(a) && key.endsWith(b));
}

/** The words of a command line that name files: anything with a slash, or starting with ~ or a dot. */
export function pathWords(command: string): string[] {
  return command
    .replace(/^\s*!/, "")
    .split(/[\s;&|()<>`'"=]+/)
    .filter((w) => w.includes("/") || w.startsWith("~") || (w.startsWith(".") && w.length > 1 && w !== ".."));
}

/**
 * What one repository's configuration names: the hooks directory it moves to,
 * the attribute and exclude files it adds, and every file a command it
 * configures would run (relative paths as git resolves them: from the top of
 * the worktree, or from the git directory of a bare repository).
 */
export function heldByConfig(entries: readonly GitConfigEntry[], base: string, home: string): HeldPath[] {
  const held: HeldPath[] = [];
  const at = (p: string) => {
    const x = expandHome(p, home);
    return isAbsolute(x) ? x : resolve(base, x);
  };
  for (const e of entries) {
    if (e.value === undefined || e.value === "") continue;
    const where = `${e.key} in ${e.file}`;
    if (e.key === "core.hookspath") held.push({ path: at(e.value), why: `the hooks directory named by ${where}` });
    else if (e.key === "core.attributesfile" || e.key === "core.excludesfile") held.push({ path: at(e.value), why: `named by ${where}` });
    else if (isCommandKey(e.key, e.value))
      for (const w of pathWords(e.value)) held.push({ path: at(w), why: `a program named by ${where}, which git runs` });
  }
  return held;
}

/** The user's and the system's configuration, as the host's git reads them (GIT_CONFIG_* honoured). */
export function hostConfigFiles(env: NodeJS.ProcessEnv, home: string): string[] {
  const files: string[] = [];
  if (!env.GIT_CONFIG_NOSYSTEM) files.push(env.GIT_CONFIG_SYSTEM || "/etc/gitconfig");
  if (env.GIT_CONFIG_GLOBAL) files.push(env.GIT_CONFIG_GLOBAL);
  else {
    const xdg = env.XDG_CONFIG_HOME?.startsWith("/") ? env.XDG_CONFIG_HOME : join(home, ".config");
    files.push(join(xdg, "git", "config"), join(home, ".gitconfig"));
  }
  return files;
}

/** GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n from the environment, as entries. */
export function envConfig(env: NodeJS.ProcessEnv): GitConfigEntry[] {
  const n = Number(env.GIT_CONFIG_COUNT ?? 0);
  const out: GitConfigEntry[] = [];
  for (let k = 0; Number.isSafeInteger(n) && k < Math.min(n, 1000); k++) {
    const key = env[`GIT_CONFIG_KEY_${k}`];
    if (!key) continue;
    const dot = key.indexOf(".");
    const last = key.lastIndexOf(".");
    const norm = dot < 0 ? key.toLowerCase() : `${key.slice(0, dot).toLowerCase()}${key.slice(dot, last)}${key.slice(last).toLowerCase()}`;
    out.push({ key: norm, value: env[`GIT_CONFIG_VALUE_${k}`], file: "the GIT_CONFIG_* environment" });
  }
  return out;
}
