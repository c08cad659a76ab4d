import { realpathSync } from "node:fs";
import { dirname } from "node:path";
import type { ProjectConfig } from "./compose.js";
import { VakError } from "./errors.js";
import { parseProfilesFile, readConfigText, shownPath } from "./profiles-file.js";
import { trustFilePath } from "./config-paths.js";

/**
 * A repository's `.vak/config.toml` comes with the repository: untrusted.
 * It is trusted only once the user has seen its exact content and what it
 * would grant (`vak trust`), and only while that content is unchanged: the
 * record binds the file's canonical path and the SHA-256 of its bytes, so an
 * edit, a checkout of another branch or the same file at another path is
 * untrusted again. The records live in Vak's state (trust.json, 0600), which
 * no sandbox can reach; nothing is ever trusted implicitly.
 */
export interface TrustRecord {
  path: string;
  sha256: string;
  /** When it was trusted (ISO), for `vak trust --list`. */
  at: string;
}

export interface TrustFile {
  version: 1;
  trusted: TrustRecord[];
}

export const MAX_TRUST_RECORDS = 10_000;

/** node:crypto is loaded only when a repository config is there to hash: loading it costs `vak exec` ~5 ms. */
export const sha256 = (text: string): string => process.getBuiltinModule("node:crypto").createHash("sha256").update(text, "utf8").digest("hex");

/** The trust records; a damaged file trusts nothing (and says so when a caller asks to change it). */
export function readTrust(path: string = trustFilePath()): TrustFile {
  const text = readConfigText(path, false);
  if (text === undefined) return { version: 1, trusted: [] };
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new VakError("bad-input", `${shownPath(path)}: damaged (not JSON); remove it to start again (every repository config is then untrusted)`);
  }
  const d = data as Partial<TrustFile>;
  if (d.version !== 1 || !Array.isArray(d.trusted) || d.trusted.length > MAX_TRUST_RECORDS)
    throw new VakError("bad-input", `${shownPath(path)}: not a trust file of this version of Vak; remove it to start again`);
  const trusted = d.trusted.filter((r): r is TrustRecord => typeof r?.path === "string" && typeof r.sha256 === "string" && /^[0-9a-f]{64}$/.test(r.sha256) && typeof r.at === "string");
  return { version: 1, trusted };
}

export function isTrusted(t: TrustFile, path: string, hash: string): boolean {
  return t.trusted.some((r) => r.path === path && r.sha256 === hash);
}

export interface LoadedProject {
  config?: ProjectConfig | undefined;
  /** The canonical path and hash, for `vak trust`. */
  path: string;
  hash: string;
  text: string;
  /** A file that could not be used at all (not TOML, a key no profile has, a link): why, naming file:line: key where there is one. */
  broken?: string | undefined;
}

/**
 * Reads and checks a repository config. One that cannot be used whole is reported (broken), not thrown: the callers
 * decide, and a run refuses to start with it (resolveGrantsWith: its deny rules must never be dropped in silence),
 * `vak trust` shows it and refuses it, `vak audit` looks past it.
 */
export function loadProject(file: string, trust: TrustFile | undefined): LoadedProject {
  let path: string;
  try {
    path = realpathSync.native(file);
  } catch (e) {
    return { path: file, hash: "", text: "", broken: `${shownPath(file)}: cannot be read (${(e as Error).message})` };
  }
  // Bound to where it was found: a link to a config trusted elsewhere must not bring that trust (and its grants) here.
  if (path !== file) return { path: file, hash: "", text: "", broken: `${shownPath(file)} leads to ${shownPath(path)}; a repository config must be a file of the repository, not a link` };
  let text = "";
  try {
    text = readConfigText(path, false) ?? "";
  } catch (e) {
    if (e instanceof VakError) return { path, hash: "", text: "", broken: e.message };
    throw e;
  }
  const hash = sha256(text);
  const trusted = trust ? isTrusted(trust, path, hash) : false;
  const changed = !trusted && (trust?.trusted.some((r) => r.path === path) ?? false);
  try {
    const parsed = parseProfilesFile(path, text, "project");
    return { path, hash, text, config: { file: parsed, root: dirname(dirname(path)), trusted, changed } };
  } catch (e) {
    if (e instanceof VakError) return { path, hash, text, broken: e.message };
    throw e;
  }
}

export { findProjectConfig, trustFilePath } from "./config-paths.js";
