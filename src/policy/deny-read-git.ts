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
 * format) and looked up among the loose objects and the pack indexes; if git holds it, the run is refused
 * with how to go on (deny the objects too, or keep the file out of git). What a file held in earlier
 * commits is not searched: that would mean reading every tree in the history.
 */
const MAX_FILES = 10_000;
const MAX_FILE_BYTES = 64 << 20;

function safeLstat(path: string) {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

/** The object store of the repository a path is in (its common dir's objects), and its hash. */
function repositoryOf(path: string): { top: string; objects: string; algo: "sha1" | "sha256" } | undefined {
  for (let d = dirname(path); ; d = dirname(d)) {
    const dotGit = join(d, ".git");
    const st = safeLstat(dotGit);
    if (st) {
      let gitDir = dotGit;
      if (st.isFile()) {
        const m = /^gitdir: (.*?)[\r\n]*$/s.exec(readPlainFile(dotGit, 4096)?.toString("utf8") ?? "");
        if (!m?.[1]) return undefined;
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

function blobId(content: Buffer, algo: "sha1" | "sha256"): Buffer {
  return process.getBuiltinModule("node:crypto").createHash(algo).update(`blob ${content.length}\0`).update(content).digest();
}

/**
 * Whether a pack index (version 2) lists the id: its fanout table, then a
 * binary search of its sorted names, read where the search looks (an index
 * of a big repository is hundreds of MB; a lookup reads a few hundred bytes).
 */
function inPackIndex(path: string, id: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch {
    return false;
  }
  try {
    const st = fstatSync(fd);
    const at = 8 + 1024;
    if (!st.isFile() || st.size < at) return false;
    const head = Buffer.alloc(at);
    if (readSync(fd, head, 0, at, 0) !== at || head.readUInt32BE(0) !== 0xff744f63 || head.readUInt32BE(4) !== 2) return false;
    const first = id[0]!;
    let lo = first === 0 ? 0 : head.readUInt32BE(8 + 4 * (first - 1));
    let hi = head.readUInt32BE(8 + 4 * first);
    const name = Buffer.alloc(id.length);
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const off = at + mid * id.length;
      if (off + id.length > st.size || readSync(fd, name, 0, id.length, off) !== id.length) return false;
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

class ObjectStore {
  private packs: string[] | undefined;
  constructor(readonly objects: string) {}
  has(id: Buffer): boolean {
    const hex = id.toString("hex");
    if (safeLstat(join(this.objects, hex.slice(0, 2), hex.slice(2)))) return true;
    this.packs ??= (() => {
      try {
        return readdirSync(join(this.objects, "pack")).filter((n) => n.endsWith(".idx")).map((n) => join(this.objects, "pack", n));
      } catch {
        return [];
      }
    })();
    return this.packs.some((p) => inPackIndex(p, id));
  }
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
    } catch {
      continue;
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
export function refuseCommittedDenied(denied: readonly string[], visible: (path: string) => boolean): void {
  const stores = new Map<string, ObjectStore>();
  for (const d of denied) {
    const repo = repositoryOf(d);
    if (!repo || !visible(repo.objects) || isWithin(repo.objects, d)) continue;
    const files: string[] = [];
    filesAt(d, files);
    if (files.length > MAX_FILES)
      throw new VakError("unsupported", `--deny-read ${d}: more than ${MAX_FILES} files below it in the git repository ${repo.top}, too many to check against its objects; deny the objects too (--deny-read ${repo.objects}) or deny a narrower path`);
    let store = stores.get(repo.objects);
    if (!store) stores.set(repo.objects, (store = new ObjectStore(repo.objects)));
    for (const f of files) {
      const content = readPlainFile(f, MAX_FILE_BYTES);
      if (content === undefined) continue;
      const id = blobId(content, repo.algo);
      if (store.has(id))
        throw new VakError(
          "bad-input",
          `--deny-read ${d}: the content of ${f} is in the git objects of ${repo.top} (blob ${id.toString("hex").slice(0, 12)}: it is committed or added), which the sandbox can read under another name (git show); deny them too (--deny-read ${repo.objects}) or take the file out of git`,
        );
    }
  }
}
