/**
 * `vak container build-image`: builds the container backend's image from this
 * host's own files (no registry is involved or reachable), imports it into
 * Docker or Podman under a tag derived from its content, writes the engine's
 * seccomp profiles made from the launcher's table, and records all of it where
 * `--sandbox container` finds it. A second build of the same files reuses the
 * image: the file list with sizes, times and modes, and the launcher's digest,
 * are the cache key.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, renameSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import { RUNTIME_DIRS, RUNTIME_ETC } from "../policy/runtime-set.js";
import type { ContainerImage } from "./container-args.js";
import { DEFAULT_PACKAGES, dependencyClosure, packagePaths, parseInstalled, withAncestors } from "./container-files.js";
import { containerProfile, syscallNames, type SeccompTable } from "./container-seccomp.js";
import { imageRecordPath, sha256File } from "./container.js";

export interface BuildOptions {
  engine?: "docker" | "podman" | undefined;
  /** Debian packages to add to DEFAULT_PACKAGES (with what they depend on). */
  packages?: string[] | undefined;
  log?: ((line: string) => void) | undefined;
  env?: NodeJS.ProcessEnv;
}

export interface BuildResult {
  record: ContainerImage;
  reused: boolean;
  files: number;
  bytes: number;
  missing: string[];
  seconds: number;
}

/** Bumped when what goes into the image changes, so that old caches are not reused. */
const FORMAT = 1;
const UNISTD = ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"];

function which(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const d of (env.PATH ?? "").split(delimiter)) {
    const p = join(d, name);
    if (d.startsWith("/") && existsSync(p)) return p;
  }
  return undefined;
}

/** The engine to use, running; refuses with how to install or start one. */
export function findEngine(want: "docker" | "podman" | undefined, env: NodeJS.ProcessEnv = process.env): { engine: "docker" | "podman"; bin: string } {
  const names = want ? [want] : (["docker", "podman"] as const);
  for (const engine of names) {
    const bin = which(engine, env);
    if (!bin) continue;
    const r = spawnSync(bin, ["version", "--format", engine === "docker" ? "{{.Server.Version}}" : "{{.Version}}"], { env, encoding: "utf8", timeout: 30_000 });
    if (r.status === 0) return { engine, bin };
    throw new VakError("unsupported",
      `${engine} is installed (${bin}) but does not answer: ${(r.stderr || r.error?.message || "").trim().split("\n")[0] ?? ""}; ` +
      (engine === "docker" ? "start the daemon (`sudo systemctl start docker`, or `sudo dockerd &`), and make sure you may use its socket (DOCKER_HOST)" : "check `podman info`"));
  }
  throw new VakError("unsupported", `no container engine found on PATH (${names.join(" or ")}): install one (Debian: \`apt-get install docker.io\` and start \`dockerd\`, or \`apt-get install podman\`)`);
}

/** The image's files: absolute paths, canonical (no link among their parents), with every ancestor. */
function imageFiles(packages: readonly string[], log: (s: string) => void): { paths: string[]; missing: string[]; taken: string[] } {
  const inst = installation();
  const installed = parseInstalled(execFileSync("dpkg-query", ["-W", "-f=${binary:Package}\\t${db:Status-Abbrev}\\t${Depends}\\t${Pre-Depends}\\t${Provides}\\n"], { encoding: "utf8", maxBuffer: 64 << 20 }));
  const wanted = [...packages];
  // The Node.js Vak runs on: its package when dpkg installed it, else its whole prefix.
  const nodeOwner = spawnSync("dpkg-query", ["-S", inst.node], { encoding: "utf8" });
  const nodePkg = nodeOwner.status === 0 ? nodeOwner.stdout.split(":")[0]?.trim() : undefined;
  if (nodePkg) wanted.push(nodePkg);
  const { packages: taken, missing } = dependencyClosure(wanted, installed);
  log(`packages: ${taken.length} (${wanted.length - missing.length} asked for, the rest what they depend on)${missing.length ? `; not installed here, left out: ${missing.join(", ")}` : ""}`);
  const listed = packagePaths(execFileSync("dpkg-query", ["-L", ...taken], { encoding: "utf8", maxBuffer: 256 << 20 }));
  const extra: string[] = [...RUNTIME_DIRS, ...RUNTIME_ETC, inst.launcher];
  if (!nodePkg) extra.push(inst.nodePrefix);
  const out = new Set<string>();
  const add = (p: string, recurse: boolean) => {
    let st;
    try {
      st = lstatSync(p);
    } catch {
      return;
    }
    out.add(p);
    if (recurse && st.isDirectory()) for (const e of readdirNames(p)) add(join(p, e), true);
  };
  for (const p of listed) add(canonicalParent(p), false);
  // Byte code that packages compile after installing (Python's __pycache__): not in their file lists, and
  // without it Python tries (and is refused) to write it into the read-only /usr on every start.
  for (const p of [...out]) if (p.endsWith(".py")) add(join(dirname(p), "__pycache__"), true);
  // The top-level system directories as entries only (/usr's contents are the packages'); /etc entries, the launcher and a Node prefix whole.
  const topLevel = new Set<string>(RUNTIME_DIRS);
  for (const p of extra) add(topLevel.has(p) ? p : canonicalParent(p), !topLevel.has(p));
  return { paths: withAncestors(out), missing, taken };
}

function readdirNames(p: string): string[] {
  try {
    return readdirSync(p);
  } catch {
    return [];
  }
}

/** The path with its parent resolved (/bin/bash on merged /usr is /usr/bin/bash); the last component is kept as it is. */
function canonicalParent(p: string): string {
  try {
    return join(realpathSync.native(dirname(p)), p.slice(p.lastIndexOf("/") + 1));
  } catch {
    return p;
  }
}

function manifestKey(paths: readonly string[], launcherSha: string): string {
  const h = createHash("sha256").update(`vak-image ${FORMAT} ${launcherSha}\n`);
  for (const p of paths) {
    const st = lstatSync(p);
    h.update(`${p}\0${st.mode}\0${st.size}\0${st.mtimeMs}\0${st.isSymbolicLink() ? readlinkSync(p) : ""}\n`);
  }
  return h.digest("hex");
}

function readRecord(path: string): (ContainerImage & { manifestKey?: string }) | undefined {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as ContainerImage & { manifestKey?: string };
  } catch {
    return undefined;
  }
}

/** tar of the file list | (hash) | ENGINE import - TAG; resolves to the archive's SHA-256 and size. */
function importArchive(bin: string, env: NodeJS.ProcessEnv, list: string, tag: string, launcherSha: string): Promise<{ sha256: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const tar = spawn("tar", ["--create", "--file=-", "--directory=/", "--no-recursion", "--null", `--files-from=${list}`,
      "--numeric-owner", "--owner=0", "--group=0", "--mtime=@0", "--format=gnu"], { stdio: ["ignore", "pipe", "pipe"] });
    const imp = spawn(bin, ["import", "--change", `LABEL dev.vak.launcher-sha256=${launcherSha}`, "-", tag], { env, stdio: ["pipe", "ignore", "pipe"] });
    const h = createHash("sha256");
    let bytes = 0;
    let errors = "";
    tar.stderr.on("data", (d: Buffer) => (errors += d.toString().slice(0, 2000)));
    imp.stderr.on("data", (d: Buffer) => (errors += d.toString().slice(0, 2000)));
    tar.stdout.on("data", (d: Buffer) => {
      h.update(d);
      bytes += d.length;
    });
    tar.stdout.pipe(imp.stdin);
    let tarCode: number | null = null;
    tar.on("close", (c) => (tarCode = c));
    imp.on("close", (c) => {
      // GNU tar exits 1 when a file changed while it was read; that would make the digest a lie.
      if (tarCode !== 0 || c !== 0) reject(new VakError("sandbox-setup", `building the image failed (tar exit ${tarCode}, import exit ${c}): ${errors.trim().slice(0, 600)}`));
      else resolve({ sha256: h.digest("hex"), bytes });
    });
    tar.on("error", reject);
    imp.on("error", reject);
  });
}

export async function buildImage(opts: BuildOptions = {}): Promise<BuildResult> {
  const started = Date.now();
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  if (!existsSync("/var/lib/dpkg/status")) throw new VakError("unsupported", "vak container build-image builds the image from this host's Debian packages, and this host has no dpkg database");
  const { engine, bin } = findEngine(opts.engine, env);
  const inst = installation();
  if (!existsSync(inst.launcher)) throw new VakError("unsupported", `the sandbox launcher is missing (${inst.launcher}); run \`npm ci\` in the Vak package first`);
  const launcherSha = sha256File(inst.launcher);
  const dir = dirname(imageRecordPath(env));
  mkdirSync(dir, { recursive: true, mode: 0o700 });

  // The engine's profiles, from the launcher's own table.
  const table = JSON.parse(execFileSync(inst.launcher, ["--seccomp-table"], { encoding: "utf8" })) as SeccompTable;
  const header = UNISTD.find((p) => existsSync(p));
  if (!header) throw new VakError("unsupported", `the kernel headers' unistd_64.h is missing (${UNISTD.join(", ")}): install linux-libc-dev`);
  const names = syscallNames(readFileSync(header, "utf8"));
  const profiles = { none: join(dir, `seccomp-none-${launcherSha.slice(0, 16)}.json`), net: join(dir, `seccomp-net-${launcherSha.slice(0, 16)}.json`) };
  writeFileSync(profiles.none, JSON.stringify(containerProfile(table, names, false), null, 1) + "\n", { mode: 0o644 });
  writeFileSync(profiles.net, JSON.stringify(containerProfile(table, names, true), null, 1) + "\n", { mode: 0o644 });

  const { paths, missing } = imageFiles([...DEFAULT_PACKAGES, ...(opts.packages ?? [])], log);
  const key = manifestKey(paths, launcherSha);
  const recordPath = imageRecordPath(env);
  const old = readRecord(recordPath);
  const has = (tag: string) => spawnSync(bin, ["image", "inspect", tag], { env, stdio: "ignore" }).status === 0;
  let image: string;
  let bytes = 0;
  let reused = false;
  if (old && old.manifestKey === key && old.engineBin === bin && has(old.image)) {
    image = old.image;
    reused = true;
    log(`image ${image} is up to date (${paths.length} files)`);
  } else {
    const list = join(dir, "files.list");
    writeFileSync(list, paths.map((p) => p.slice(1)).join("\0") + "\0");
    const building = `vak-sandbox:building-${process.pid}`;
    log(`archiving ${paths.length} files into ${engine} …`);
    const a = await importArchive(bin, env, list, building, launcherSha);
    bytes = a.bytes;
    image = `vak-sandbox:${a.sha256.slice(0, 16)}`;
    for (const args of [["tag", building, image], ["rmi", building]]) {
      const r = spawnSync(bin, args, { env, encoding: "utf8" });
      if (r.status !== 0) throw new VakError("sandbox-setup", `${engine} ${args.join(" ")}: ${r.stderr.trim()}`);
    }
    log(`image ${image}: ${(bytes / 1e6).toFixed(0)} MB`);
  }
  const record: ContainerImage & { manifestKey: string; builtAt: string } = {
    engine, engineBin: bin, image, launcher: inst.launcher, launcherSha256: launcherSha, profiles, manifestKey: key, builtAt: new Date().toISOString(),
  };
  const tmp = `${recordPath}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(record, null, 2) + "\n", { mode: 0o644 });
  renameSync(tmp, recordPath);
  return { record, reused, files: paths.length, bytes, missing, seconds: (Date.now() - started) / 1000 };
}
