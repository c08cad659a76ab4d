import { dirname } from "node:path";
import { scanGitConfig, type PlacedEntry, type PlacedHeader } from "./git-config.js";
import { TOKEN_SHAPES as SHAPES, type Stripped } from "./strip-credentials.js";

/**
 * A git config file shown to a sandbox without its credentials (the git preset's ~/.gitconfig,
 * ~/.config/git/config and /etc/gitconfig, and every file they include). It is read with git's own grammar
 * (git-config.ts: quotes, escapes, continuation lines, case-insensitive names, a variable on its header's line),
 * and what is removed is decided on what git reads, not on how a line looks:
 *
 * - every `[credential]` section, whole: a helper may hold the token itself (`!f() { echo password=…; }; f`);
 * - a section whose subsection holds a credential: `[url "https://tok@host/"]` (whose insteadOf would hand
 *   it to git), `[http "https://u:p@host/"]`, `[includeIf "hasconfig:remote.*.url:https://tok@…"]`;
 * - a variable whose name says it holds one: http.extraHeader (any `*header*`), sendemail.smtpPass,
 *   imap.pass, and any name with auth, token, pass, secret, cookie, credential, api key or private key in it;
 * - a value with a URL's userinfo anywhere (remote.*.url, url.*.insteadOf and pushInsteadOf), a proxy with
 *   `user@`, or a credential's words or shape (a token in an alias); identity (user.name, user.email and the
 *   author's and committer's) is checked for userinfo and shapes only, so that a name is never lost to a word;
 * - an include whose target the caller does not show the same way (`include` says why: see redacted-files.ts).
 *
 * What is kept is kept byte for byte, less its comments (git never reads them, and a commented-out token is
 * still a token); a removed line becomes a comment of Vak's, so that lines are numbered as on the host, and a
 * header that shares its line with a removed variable stays on it. A kept variable whose header was
 * removed would be read by git in another section: it is removed too. Where the grammar stops (a line git would
 * refuse, or might read otherwise), everything from there on is removed: fail closed. What it cannot recognise
 * as a credential (a password passed to a command in an alias without a credential's words) it keeps.
 */
export const REMOVED_LINE = "# (vak removed this line: a credential, or what it could not read with certainty; the sandbox never sees it)";

const USERINFO = /[a-z][a-z0-9+.-]*:\/\/[^/]*@/i;
const VALUE_WORDS = /authorization|oauth|bearer\s|basic\s|token|passw|secret|api[-_]?key|private[-_]?key|cookie|credential/i;
/** On a variable's name, lower-cased (git's names are letters, digits and -). */
const NAME_WORDS = /auth|token|pass|secret|cookie|credential|header|api-?key|private-?key/;
/** Sections whose subsection is a URL (or a condition on one): a credential's words in it count too. */
const URL_SECTIONS = new Set(["url", "http", "includeif"]);
const IDENTITY = new Set(["user.name", "user.email", "author.name", "author.email", "committer.name", "committer.email"]);

const credentialIn = (s: string, words: boolean): boolean => USERINFO.test(s) || SHAPES.test(s) || (words && VALUE_WORDS.test(s));

/** Why a whole section is removed, if it is. */
function sectionProblem(section: string, sub: string | undefined): string | undefined {
  if (section === "credential") return "a credential section";
  if (sub !== undefined && credentialIn(sub, URL_SECTIONS.has(section))) return "a credential in its subsection";
  return undefined;
}

/** Why a variable is removed, its section aside, if it is. */
function entryProblem(e: PlacedEntry): string | undefined {
  if (NAME_WORDS.test(e.name)) return "its name says it holds a credential";
  if (e.value === undefined) return undefined;
  if (e.name === "proxy" && e.value.includes("@")) return "a proxy with its user";
  const identity = IDENTITY.has(`${e.section}.${e.name}`);
  if (credentialIn(e.value, !identity)) return "a credential in its value";
  return undefined;
}

/** How the plan names a variable: its subsection (which may be a URL) left out. */
const keyName = (section: string, sub: string | undefined, name?: string): string => `${section}${sub === undefined ? "" : ".*"}${name === undefined ? "" : `.${name}`}`;

const isInclude = (e: PlacedEntry): boolean => e.name === "path" && (e.section === "include" || e.section === "includeif");

/**
 * The file an include names, as git opens it: `~/` is the home directory, a relative path is beside the
 * including file. undefined where that is not certain: `~user/`, `%(prefix)/`, or a path with `.`, `..` or
 * `//` in it (git opens it as written, and `..` after a link leads where a lexical reading does not).
 */
export function includeTarget(value: string | undefined, file: string, home: string): string | undefined {
  if (!value) return undefined;
  let p = value;
  if (p.startsWith("~/")) p = home + p.slice(1);
  else if (p.startsWith("~") || p.startsWith("%(")) return undefined;
  if (!p.startsWith("/")) p = `${dirname(file)}/${p}`;
  if (p.split("/").slice(1).some((x) => x === "" || x === "." || x === "..")) return undefined;
  return p;
}

export interface GitStripOptions {
  home: string;
  /** Why an include's target (undefined: not certain) is not followed, or undefined when it is shown without its credentials too. */
  include: (target: string | undefined) => string | undefined;
}

export function stripGitConfig(text: string, file: string, opts: GitStripOptions): Stripped {
  const original = text.split("\n");
  const lines = (text.startsWith("\uFEFF") ? text.slice(1) : text).replace(/\r\n/g, "\n").split("\n");
  const scan = scanGitConfig(text, file);
  const dropped = new Set<number>();
  const removed: string[] = [];
  const drop = (first: number, last: number, what: string) => {
    for (let l = first; l <= last; l++) dropped.add(l);
    removed.push(`${first === last ? `line ${first}` : `lines ${first}-${last}`} (${what})`);
  };

  const headerDropped = new Set<PlacedHeader>();
  for (const h of scan.headers) {
    const why = sectionProblem(h.section, h.sub);
    if (!why) continue;
    headerDropped.add(h);
    if (!dropped.has(h.line)) drop(h.line, h.line, `[${keyName(h.section, h.sub)}]: ${why}`);
  }
  const entryDropped = new Set<PlacedEntry>();
  const dropEntry = (e: PlacedEntry, why: string) => {
    entryDropped.add(e);
    drop(e.line, e.lastLine, `${keyName(e.section, e.sub, e.name)}: ${why}`);
  };
  for (const e of scan.entries) {
    const why = sectionProblem(e.section, e.sub) ?? entryProblem(e);
    if (why) {
      dropEntry(e, why);
      continue;
    }
    if (isInclude(e)) {
      const not = opts.include(includeTarget(e.value, file, opts.home));
      if (not) dropEntry(e, `not followed: ${not}`);
    }
  }
  if (scan.error) drop(scan.error.line, lines.length, "git's grammar: not read with certainty");

  // A line that is removed keeps its headers when all of them stay (`[http] extraheader = …` keeps `[http]`).
  const headersOn = new Map<number, PlacedHeader[]>();
  for (const h of scan.headers) headersOn.set(h.line, [...(headersOn.get(h.line) ?? []), h]);
  const keptPrefix = (line: number): string | undefined => {
    const hs = headersOn.get(line);
    if (!hs || hs.some((h) => headerDropped.has(h))) return undefined;
    return lines[line - 1]!.slice(0, hs[hs.length - 1]!.end);
  };

  // Each kept variable must be read by git in the section it was judged in: else it goes too, until none moves.
  const sectionOf = (x: { section: string; sub: string | undefined }) => `${x.section}\0${x.sub ?? ""}\0${x.sub === undefined ? 0 : 1}`;
  const items = [...scan.headers.map((h) => ({ h })), ...scan.entries.map((e) => ({ e }))].sort(
    (a, b) => ("h" in a ? a.h.line : a.e.line) - ("h" in b ? b.h.line : b.e.line) || ("h" in a ? 0 : 1) - ("h" in b ? 0 : 1),
  );
  for (let moved = true; moved; ) {
    moved = false;
    let shown: string | undefined;
    for (const it of items) {
      if ("h" in it) {
        if (!dropped.has(it.h.line) || keptPrefix(it.h.line) !== undefined) shown = sectionOf(it.h);
      } else if (!entryDropped.has(it.e) && !dropped.has(it.e.line) && shown !== sectionOf(it.e)) {
        dropEntry(it.e, "its section's header was removed");
        moved = true;
        break;
      }
    }
  }

  // Comments go, whatever they say: git never reads them, and a commented-out token is still a token.
  const commentAt = new Map(scan.comments.map((c) => [c.line, c.start]));
  const out = original.map((line, i) => {
    if (dropped.has(i + 1)) {
      const prefix = keptPrefix(i + 1);
      return prefix === undefined ? REMOVED_LINE : `${prefix} ${REMOVED_LINE}`;
    }
    const at = commentAt.get(i + 1);
    return at === undefined ? line : lines[i]!.slice(0, at).trimEnd();
  });
  return { text: out.join("\n"), removed };
}
