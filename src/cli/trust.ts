import { closeSync, constants, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { compose, describeSource, fromHostEnv, type Granted } from "../policy/compose.js";
import { VakError } from "../policy/errors.js";
import { canonicalDir } from "../policy/paths.js";
import { loadPreset, presetNames } from "../policy/presets.js";
import { LIMIT_KEYS } from "../policy/profile.js";
import { loadUserProfiles, shownPath } from "../policy/profiles-file.js";
import { findProjectConfig, loadProject, MAX_TRUST_RECORDS, readTrust, trustFilePath, type TrustFile } from "../policy/trust.js";
import { EXIT_REFUSED } from "./exit.js";
import { visible } from "../text/visible.js";
import { processOutput } from "./output.js";

/**
 * `vak trust [DIR]`: shows a repository's `.vak/config.toml` exactly as it is
 * and what it would grant, and records the user's decision bound to the
 * file's path and content hash (any change makes it untrusted again). Asks
 * on a terminal; a script passes --yes. Nothing is ever trusted without one
 * of the two: a headless `vak exec` only says what it ignored.
 */
export interface TrustOptions {
  yes?: boolean;
  /** The SHA-256 the user reviewed (as `vak trust` printed it): anything else there now is not trusted. */
  sha256?: string;
  revoke?: boolean;
  list?: boolean;
}

/** Writes the trust records: a new file beside the old (0600, fsync'd), renamed over it. */
export function writeTrust(t: TrustFile, path: string = trustFilePath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.${Date.now().toString(36)}.tmp`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, JSON.stringify(t, null, 1) + "\n");
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    unlinkSync(tmp);
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
}

/** What the file would grant once trusted: its [exec] and each of its profiles, resolved here. */
function wouldGrant(project: NonNullable<ReturnType<typeof loadProject>["config"]>, workspace: string): string[] {
  const out: string[] = [];
  const trusted = { ...project, trusted: true };
  const describe = (title: string, c: ReturnType<typeof compose>) => {
    const rows: string[] = [];
    const L = c.lists;
    const list = (label: string, xs: Granted[]) => xs.forEach((g) => rows.push(`    ${label} ${shownPath(g.value)}${g.written && g.written !== g.value ? `  (${g.written})` : ""}`));
    list("read", L.allow_read);
    list("write", L.allow_write);
    list("read, credentials removed", L.allow_read_redacted);
    list("deny read", L.deny_read);
    list("deny write", L.deny_write);
    list("network", L.allow_net);
    list("deny network", L.deny_net);
    // A pattern passes what the host has when each run starts, not only what this shell has now (maybe nothing).
    for (const p of c.applied) for (const v of p.body.lists.allow_env) if (v.endsWith("*")) rows.push(`    pass variables ${v}: every one the host has when a run starts (not those that look like a credential)`);
    list("pass variable", L.allow_env);
    list("secret", L.secrets);
    // What it reads from your environment is shown as written (`${OPENAI_API_KEY}`), never the value: this goes to terminals and CI logs.
    for (const [k, g] of c.setEnv) rows.push(fromHostEnv(g) ? `    set ${k}=${g.written}  (from your environment: this hands the sandbox that variable's value)` : `    set ${k}=${g.value}`);
    for (const [p] of c.files) rows.push(`    write into the view ${p}`);
    for (const x of c.create) rows.push(`    create on the host (${x.kind}) ${shownPath(x.path)}`);
    if (c.modeSource.kind !== "default") rows.push(`    mode ${c.mode}`);
    for (const k of LIMIT_KEYS) if (c.limits[k]) rows.push(`    ${k} ${c.limits[k]!.value}`);
    for (const s of c.skipped) rows.push(`    (skipped: ${shownPath(s.value)}: ${s.why})`);
    for (const p of c.applied) if (p.origin === "preset" || p.origin === "profile") rows.push(`    with ${describeSource({ kind: "profile", profile: p, key: "description" }).replace(/:\d+\)$/, ")")}`);
    out.push(`  ${title}:`, ...(rows.length ? rows : ["    nothing"]));
  };
  // Names resolve as they will when it runs: your own profiles first (one of yours may shadow a preset), then Vak's presets.
  // Your [exec] is left out: it applies to every run, not because of this file.
  const mine = loadUserProfiles();
  const user = mine ? { ...mine, exec: undefined } : undefined;
  // Each preset read once for all the compositions here: a file of many profiles asked for each name thousands of times.
  const presets = new Map<string, ReturnType<typeof loadPreset>>();
  const preset = (n: string) => (presets.has(n) ? presets.get(n) : presets.set(n, loadPreset(n)).get(n));
  const base = { user, workspace, env: process.env, home: homedir(), preset, presetNames: () => presetNames() };
  if (project.file.exec) describe(`every \`vak exec\` here ([exec], line ${project.file.exec.line() ?? "?"})`, compose({ ...base, flags: { lists: {}, limits: {}, profiles: [] }, project: trusted, execDefaults: true }));
  for (const [name, p] of project.file.profiles)
    describe(`--profile ${name} (line ${p.line() ?? "?"})`, compose({ ...base, flags: { lists: {}, limits: {}, profiles: [name] }, project: trusted, execDefaults: false }));
  for (const o of project.file.other) out.push(`  [${o.key}] (line ${o.line ?? "?"}): never applies, trusted or not: only your own config can say this`);
  return out;
}

async function ask(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: processOutput().err.stream as NodeJS.WritableStream });
  try {
    const answer = await new Promise<string>((resolve) => rl.question(question, resolve));
    return /^(y|yes)$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

export async function trustCommand(dir: string | undefined, opts: TrustOptions): Promise<number> {
  // Each argument is one line of Vak's words with every value from the repository's file already neutralised
  // (visible()). A newline that a value kept (a TOML "\n") continues that line under the margin (Output.relayed):
  // it is never split off here, where it would print as a line of Vak's own ("vak: already trusted").
  const io = processOutput();
  const put = (...lines: string[]) => void lines.forEach((l) => io.out.relayed(l));
  const putErr = (line: string) => io.err.relayed(line);
  if (opts.list) {
    const t = readTrust();
    if (!t.trusted.length) put("no repository config is trusted\n");
    for (const r of t.trusted) put(`${visible(shownPath(r.path))}  sha256 ${r.sha256.slice(0, 16)}…  trusted ${r.at}\n`);
    return 0;
  }
  const workspace = canonicalDir(dir ?? process.cwd(), "vak trust");
  const found = findProjectConfig(workspace, homedir());
  if (!found) {
    putErr(`vak: no .vak/config.toml in ${visible(shownPath(workspace))} or above it in its repository\n`);
    return EXIT_REFUSED;
  }
  const loaded = loadProject(found, undefined);
  const t = readTrust();
  if (opts.revoke) {
    const kept = t.trusted.filter((r) => r.path !== loaded.path);
    writeTrust({ version: 1, trusted: kept });
    put(`${visible(shownPath(loaded.path))}: ${kept.length === t.trusted.length ? "was not trusted" : "no longer trusted"}\n`);
    return 0;
  }
  const numbered = loaded.text.split("\n").map((l, i) => `${String(i + 1).padStart(4)} │ ${visible(l)}`);
  if (numbered.at(-1)?.endsWith("│ ")) numbered.pop();
  const exactly = [`${visible(shownPath(loaded.path))} (sha256 ${loaded.hash}), exactly:`, ...numbered];
  if (loaded.broken || !loaded.config) {
    // Shown, so that the user sees what to fix; never recorded: vak exec refuses to run with it until it reads.
    if (loaded.text) put(...exactly);
    throw new VakError("bad-input", `${loaded.broken ?? shownPath(loaded.path)}. It cannot be trusted as it is, and vak exec and vak run refuse to run with it; fix the file, then run vak trust again`);
  }
  // What was reviewed, by its hash: a file changed since (a pull, another process) between the showing and the --yes is not it.
  if (opts.sha256 !== undefined && opts.sha256.toLowerCase() !== loaded.hash) {
    putErr(`vak: ${visible(shownPath(loaded.path))} is not the content you reviewed: its sha256 is now ${loaded.hash}, not ${visible(opts.sha256)}; nothing was trusted. Run \`vak trust\` to review it as it is\n`);
    return EXIT_REFUSED;
  }
  if (t.trusted.some((r) => r.path === loaded.path && r.sha256 === loaded.hash)) {
    put(`${visible(shownPath(loaded.path))} is already trusted as it is now (sha256 ${loaded.hash.slice(0, 16)}…)\n`);
    return 0;
  }
  put(
    ...exactly,
    "",
    "Trusted, it would grant:",
    ...wouldGrant(loaded.config, workspace).map(visible),
    "",
    "Until then only its deny rules, a read-only mode and its limits apply. Any change to the file makes it untrusted again.",
  );
  let yes = Boolean(opts.yes);
  if (!yes) {
    if (!process.stdin.isTTY || !io.err.isTTY) {
      putErr(`vak: not a terminal, so nothing was trusted; after reviewing the above, run \`vak trust --yes --sha256 ${loaded.hash}\` to trust this exact content\n`);
      return EXIT_REFUSED;
    }
    yes = await ask("Trust this exact file? [y/N] ");
  }
  if (!yes) {
    put("not trusted\n");
    return 1;
  }
  // A path has one trusted content at a time: the new hash replaces the old.
  const trusted = [...t.trusted.filter((r) => r.path !== loaded.path), { path: loaded.path, sha256: loaded.hash, at: new Date().toISOString() }].slice(-MAX_TRUST_RECORDS);
  writeTrust({ version: 1, trusted });
  put(`trusted ${visible(shownPath(loaded.path))} (sha256 ${loaded.hash.slice(0, 16)}…)\n`);
  return 0;
}
