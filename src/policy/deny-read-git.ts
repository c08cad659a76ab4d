import { closeSync, fstatSync, lstatSync, openSync, readdirSync, readSync, constants } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { VakError } from "./errors.js";
import { isWithin } from "./paths.js";
import { readPlainFile } from "./plain-file.js";

/**
 * A file hidden with --deny-read whose content git holds: committed, or added, its bytes are a blob in the
 * repository's object store, and `git show HEAD:secret.env` reads it there under another name. A mask binds
 * the path; the content must be bound too. So for every denied file inside a repository whose objects the
 * view shows, its blob id is computed (as `git hash-object` does, SHA-1 or SHA-256 by the repository's
 * format; with CRLF line ends also as LF, the form core.autocrlf stores) and looked up among the loose
 * objects and the pack indexes (versions 1 and 2) of the repository's store and of every store it borrows
 * through objects/info/alternates; if git holds it, the run is refused with how to go on (deny the objects
 * too, or keep the file out of git). What the check cannot look at is a refusal too, never a pass: a pack
 * without a readable index (git index-pack rebuilds one inside), an index of an unknown version or cut
 * short, a directory it cannot list, a file it cannot read or too much to hash, a .git pointer that names
 * nothing. What a file held in earlier commits is not searched (that would mean reading every tree in the
 * history), nor content that other clean filters (git-lfs, ident) rewrite before storing.
 */
const MAX_FILES = 10_000;
/** Bytes hashed per plan over all denied files: beyond it the plan is refused, not passed unchecked. */
const MAX_HASH_BYTES = 512 << 20;
const CHUNK = 1 << 20;
const MAX_ALTERNATES = 5;

type Algo = "sha1" | "sha256";
interface Repository {
  top: string;
  objects: string;
  algo: Algo;
}

/** Thrown where the check cannot look; refuseCommittedDenied turns it into a refusal naming the denied path. */
class Unchecked extends Error {}

function safeLstat(path: string) {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** The object store of the repository a path is in (its common dir's objects), and its hash. */
function repositoryOf(path: string): Repository | undefined {
  for (let d = dirname(path); ; d = dirname(d)) {
    const dotGit = join(d, ".git");
    const st = safeLstat(dotGit);
    if (st) {
      let gitDir = dotGit;
      if (st.isFile()) {
        const m = /^gitdir: (.*?)[\r\n]*$/s.exec(readPlainFile(dotGit, 4096)?.toString("utf8") ?? "");
        if (!m?.[1]) throw new Unchecked(`${dotGit} does not name a git directory`);
        gitDir = isAbsolute(m[1]) ? m[1] : resolve(d, m[1]);
      }
      const c = readPlainFile(join(gitDir, "commondir"), 4096)?.toString("utf8").replace(/[\r\n]+$/, "");
      const common = c ? (isAbsolute(c) ? c : resolve(gitDir, c)) : gitDir;
      const config = readPlainFile(join(common, "config"), 1 << 20)?.toString("utf8") ?? "";
      return { top: d, objects: join(common, "objects"), algo: /^\s*objectformat\s*=\s*sha256\s*$/im.test(config) ? "sha256" : "sha1" };
    }
    if (d === dirname(d)) return undefined;
  }
}

/**
 * The blob ids of a regular file: as it is, and, if it has CRLF line ends, as git stores it with
 * core.autocrlf (CRLF as LF). Read in chunks without following a link; the bytes count against budget.
 */
function blobIds(path: string, algo: Algo, budget: { left: number }): Buffer[] {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT" || (e as NodeJS.ErrnoException).code === "ELOOP") return [];
    throw new Unchecked(`${path} cannot be read (${(e as NodeJS.ErrnoException).code})`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return [];
    if (st.size > budget.left) throw new Unchecked(`${path} and the other denied files are more than ${MAX_HASH_BYTES >> 20} MB to hash`);
    budget.left -= st.size;
    const { createHash } = process.getBuiltinModule("node:crypto");
    const buf = Buffer.alloc(Math.min(CHUNK, Math.max(st.size, 1)));
    const pass = (each: (chunk: Buffer) => void) => {
      for (let at = 0; at < st.size; ) {
        const n = readSync(fd, buf, 0, Math.min(buf.length, st.size - at), at);
        if (n === 0) throw new Unchecked(`${path} changed while it was read`);
        each(buf.subarray(0, n));
        at += n;
      }
    };
    const raw = createHash(algo).update(`blob ${st.size}\0`);
    let crlf = 0;
    let lastCr = false;
    pass((chunk) => {
      raw.update(chunk);
      for (let i = chunk.indexOf(13); i !== -1; i = chunk.indexOf(13, i + 1)) if (i + 1 < chunk.length && chunk[i + 1] === 10) crlf++;
      if (lastCr && chunk[0] === 10) crlf++;
      lastCr = chunk[chunk.length - 1] === 13;
    });
    const ids = [raw.digest()];
    if (crlf === 0) return ids;
    // The same bytes with every CR that ends a line dropped: a CR at a chunk's end is held until the next starts.
    const lf = createHash(algo).update(`blob ${st.size - crlf}\0`);
    let held = false;
    pass((chunk) => {
      let from = 0;
      if (held) {
        if (chunk[0] !== 10) lf.update("\r");
        held = false;
      }
      for (let i = chunk.indexOf(13); i !== -1; i = chunk.indexOf(13, i + 1)) {
        if (i + 1 === chunk.length) {
          lf.update(chunk.subarray(from, i));
          from = chunk.length;
          held = true;
        } else if (chunk[i + 1] === 10) {
          lf.update(chunk.subarray(from, i));
          from = i + 1;
        }
      }
      lf.update(chunk.subarray(from));
    });
    if (held) lf.update("\r");
    ids.push(lf.digest());
    return ids;
  } finally {
    closeSync(fd);
  }
}

const IDX_MAGIC = 0xff744f63;

/**
 * Whether a pack index lists the id: its fanout table, then a binary search of its sorted names, read where
 * the search looks (an index of a big repository is hundreds of MB; a lookup reads a few hundred bytes).
 * Version 2: magic, version, fanout, names; version 1 (no magic): fanout, then (offset, name) entries.
 */
function inPackIndex(path: string, id: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (e) {
    throw new Unchecked(`the pack index ${path} cannot be read (${(e as NodeJS.ErrnoException).code})`);
  }
  try {
    const st = fstatSync(fd);
    const short = () => new Unchecked(`the pack index ${path} is cut short or not a pack index`);
    if (!st.isFile() || st.size < 1024) throw short();
    const head = Buffer.alloc(8 + 1024);
    const got = readSync(fd, head, 0, head.length, 0);
    let fanout: number;
    let names: number;
    let stride: number;
    if (got >= 8 && head.readUInt32BE(0) === IDX_MAGIC) {
      if (head.readUInt32BE(4) !== 2) throw new Unchecked(`the pack index ${path} is of version ${head.readUInt32BE(4)}, which vak cannot search`);
      [fanout, names, stride] = [8, 8 + 1024, id.length];
    } else [fanout, names, stride] = [0, 1024, 4 + id.length];
    if (got < fanout + 1024) throw short();
    const total = head.readUInt32BE(fanout + 4 * 255);
    if (names + total * stride > st.size) throw short();
    const first = id[0]!;
    let lo = first === 0 ? 0 : head.readUInt32BE(fanout + 4 * (first - 1));
    let hi = head.readUInt32BE(fanout + 4 * first);
    if (lo > hi || hi > total) throw short();
    const name = Buffer.alloc(id.length);
    const nameAt = stride === id.length ? 0 : 4;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (readSync(fd, name, 0, id.length, names + mid * stride + nameAt) !== id.length) throw short();
      const c = name.compare(id);
      if (c === 0) return true;
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    return false;
  } finally {
    closeSync(fd);
  }
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw new Unchecked(`${dir} cannot be listed (${(e as NodeJS.ErrnoException).code})`);
  }
}

/** One object store: its loose objects and its packs, each of which must have an index the check can read. */
class ObjectStore {
  private indexes: string[] | undefined;
  constructor(readonly objects: string) {}
  has(id: Buffer): boolean {
    const hex = id.toString("hex");
    if (safeLstat(join(this.objects, hex.slice(0, 2), hex.slice(2)))) return true;
    this.indexes ??= (() => {
      const pack = join(this.objects, "pack");
      const names = new Set(listDir(pack));
      for (const n of names)
        if (n.endsWith(".pack") && !names.has(`${n.slice(0, -5)}.idx`)) throw new Unchecked(`the pack ${join(pack, n)} has no index beside it (git index-pack can make one)`);
      return [...names].filter((n) => n.endsWith(".idx")).map((n) => join(pack, n));
    })();
    return this.indexes.some((p) => inPackIndex(p, id));
  }
}

/** The stores a repository reads objects from: its own and, transitively, those its alternates name. */
function storesOf(objects: string): string[] {
  const out = [objects];
  for (let i = 0; i < out.length; i++) {
    const file = join(out[i]!, "info", "alternates");
    if (!safeLstat(file)) continue;
    const text = readPlainFile(file, 1 << 20);
    if (text === undefined) throw new Unchecked(`${file} cannot be read`);
    for (const line of text.toString("utf8").split("\n")) {
      const alt = line.replace(/\r$/, "").trim();
      if (!alt || alt.startsWith("#")) continue;
      if (alt.startsWith('"')) throw new Unchecked(`${file} names a quoted path, which vak does not read`);
      const abs = isAbsolute(alt) ? alt : resolve(out[i]!, alt);
      if (!out.includes(abs)) out.push(abs);
      if (out.length > MAX_ALTERNATES + 1) throw new Unchecked(`${objects} borrows more than ${MAX_ALTERNATES} object stores through alternates`);
    }
  }
  return out;
}

/** The regular files at or below a denied path, bounded. */
function filesAt(path: string, out: string[]): void {
  const st = safeLstat(path);
  if (!st) return;
  if (st.isFile()) {
    out.push(path);
    return;
  }
  if (!st.isDirectory()) return;
  const stack = [path];
  while (stack.length && out.length <= MAX_FILES) {
    const dir = stack.pop()!;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      throw new Unchecked(`${dir} cannot be listed (${(e as NodeJS.ErrnoException).code})`);
    }
    for (const e of entries) {
      if (e.name === ".git") continue;
      if (e.isDirectory()) stack.push(join(dir, e.name));
      else if (e.isFile()) out.push(join(dir, e.name));
    }
  }
}

/**
 * Refuses a plan in which a denied file's content is in a git object store the view shows. `visible` says
 * whether the sandbox can read a path (inside a grant and not itself denied).
 */
export function refuseCommittedDenied(denied: readonly string[], visible: (path: string) => boolean, label: (path: string) => string = (d) => `--deny-read ${d}`): void {
  const stores = new Map<string, ObjectStore>();
  const budget = { left: MAX_HASH_BYTES };
  // Denied paths share directories (the home directory's stores): each is looked up once.
  const repos = new Map<string, Repository | undefined>();
  for (const d of denied) {
    let remedy = "deny a path outside the repository, or mend it";
    try {
      const dir = dirname(d);
      const repo = repos.has(dir) ? repos.get(dir) : repositoryOf(d);
      repos.set(dir, repo);
      if (!repo) continue;
      remedy = `deny the objects too (--deny-read ${repo.objects}) or deny a path outside the repository`;
      const seen = storesOf(repo.objects).filter((o) => visible(o) && !isWithin(o, d));
      if (seen.length === 0) continue;
      const files: string[] = [];
      filesAt(d, files);
      if (files.length > MAX_FILES) throw new Unchecked(`more than ${MAX_FILES} files are below it`);
      for (const f of files)
        for (const id of blobIds(f, repo.algo, budget))
          for (const o of seen) {
            let store = stores.get(o);
            if (!store) stores.set(o, (store = new ObjectStore(o)));
            if (store.has(id))
              throw new VakError(
                "bad-input",
                `${label(d)}: the content of ${f} is in the git objects at ${o} (blob ${id.toString("hex").slice(0, 12)}: it is committed or added), which the sandbox can read under another name (git show); deny them too (--deny-read ${o}) or take the file out of git`,
              );
          }
    } catch (e) {
      if (!(e instanceof Unchecked)) throw e;
      throw new VakError(
        "unsupported",
        `${label(d)}: vak cannot tell whether git holds its content, because ${e.message}; ${remedy}`,
      );
    }
  }
}
