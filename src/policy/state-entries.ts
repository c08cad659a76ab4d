import { type Dir, type Dirent, lstatSync, opendirSync, readlinkSync } from "node:fs";
import { linkChain } from "./chain.js";
import { isWithin } from "./paths.js";

/**
 * What a host tool's state (a profile's state_dirs and state_files) already holds that the tool on the host would
 * follow or share when it next writes there: symbolic links, regular files with another name (nlink > 1), FIFOs,
 * sockets, devices, and directories Vak cannot read (what is inside is unknown). The guard keeps a sandbox from
 * making any of them (native/guard_links.c); these were there before, made by the host, by an older Vak or by
 * anything else, and Vak cannot tell which. A run that can write a state directory holding one is refused (see
 * ARCHITECTURE, "A host tool's state: no links"): the walk reads directories, never follows a link, and stops,
 * refusing the run, past MAX_STATE_ENTRIES entries or MAX_STATE_MS.
 */
export const MAX_STATE_ENTRIES = 1_000_000;
export const MAX_STATE_MS = 5_000;
/** Entries kept for the report and the journal; the rest are counted. */
export const MAX_KEPT = 200;

export type StateEntryKind = "symbolic link" | "hard link" | "FIFO" | "socket" | "device" | "unreadable";

export interface StateEntry {
  /** The state directory or file it was found in (canonical, as in the plan). */
  root: string;
  path: string;
  kind: StateEntryKind;
  /** For a link: what it holds (readlink) and where it ends; for a hard link: its number of names. */
  target?: string | undefined;
  why: string;
}

export interface StateScan {
  /** The first MAX_KEPT entries found. */
  entries: StateEntry[];
  /** All entries found (more than entries.length when some were not kept). */
  found: number;
  /** Set when the budget ran out: where the walk stopped, and after how many entries. */
  stopped?: { at: string; entries: number; ms: number } | undefined;
}

export interface StateBudget {
  entries: number;
  ms: number;
}

/**
 * Why a symbolic link in a state directory is refused, from where it resolves (linkChain: every link on the way,
 * where it ends, whether it loops) and the run's writable roots. Pure, so that it can be tabled. A link whose
 * end, or a link on whose way, is inside a writable root lets the sandbox choose what the host's tool reaches
 * through it (`latest -> sessions/2026/…` in the state directory itself, `x -> ../../workspace/out`); any other
 * leads the host's tool out of what the run can write, where it writes what the sandbox gave it.
 */
export function linkWhy(chain: { links: readonly string[]; end: string; loop: boolean }, writable: readonly string[]): string {
  if (chain.loop) return "a symbolic link that loops (the host's tool fails or follows it as far as its kernel does)";
  const inside = (p: string) => writable.filter((w) => isWithin(p, w)).sort((a, b) => b.length - a.length)[0];
  const root = inside(chain.end) ?? chain.links.slice(1).map(inside).find((w) => w !== undefined);
  if (root !== undefined)
    return `a symbolic link into ${root}, which this run can write: the sandbox would choose what the host's tool finds through it`;
  return "a symbolic link out of what this run can write: the host's tool would write there what the sandbox gave it";
}

class Walk {
  readonly scan: StateScan = { entries: [], found: 0 };
  private count = 0;
  private readonly deadline: number;
  private readonly t0 = Date.now();

  constructor(
    private readonly writable: readonly string[],
    private readonly budget: StateBudget,
  ) {
    this.deadline = this.t0 + budget.ms;
  }

  private add(e: StateEntry): void {
    this.scan.found += 1;
    if (this.scan.entries.length < MAX_KEPT) this.scan.entries.push(e);
  }

  /** False once the budget is spent (the scan says where it stopped). */
  private spend(where: string): boolean {
    this.count += 1;
    if (this.count <= this.budget.entries && Date.now() <= this.deadline) return true;
    this.scan.stopped = { at: where, entries: this.count, ms: Date.now() - this.t0 };
    return false;
  }

  /** One entry, by what lstat (or the listing) says it is; returns whether it is a directory to walk. */
  private look(root: string, path: string, d: Dirent | undefined): boolean {
    let st;
    const known = d && (d.isDirectory() || d.isSymbolicLink() || d.isFIFO() || d.isSocket() || d.isBlockDevice() || d.isCharacterDevice());
    if (!known || d.isFile()) {
      // The link count (and a file system whose listing gives no types) needs lstat: a hard link made elsewhere
      // changes no directory here.
      st = lstatSync(path, { throwIfNoEntry: false });
      if (!st) return false;
    }
    const is = st ?? d!;
    if (is.isDirectory()) return true;
    if (is.isSymbolicLink()) {
      let target = "?";
      try {
        target = readlinkSync(path);
      } catch {
        // gone since the listing: still reported, it was there
      }
      this.add({ root, path, kind: "symbolic link", target, why: linkWhy(linkChain(path), this.writable) });
    } else if (is.isFIFO()) this.add({ root, path, kind: "FIFO", why: "a FIFO (the host's tool would block on it, or read what the sandbox writes into it)" });
    else if (is.isSocket()) this.add({ root, path, kind: "socket", why: "a unix socket (the host's tool would talk to whatever listens on it)" });
    else if (is.isBlockDevice() || is.isCharacterDevice()) this.add({ root, path, kind: "device", why: "a device node (a write to it reaches the device)" });
    else if (st && st.isFile() && st.nlink > 1)
      this.add({ root, path, kind: "hard link", target: String(st.nlink), why: `a file with ${st.nlink} names: what is written to it here is written under its other names too, and the host's tool writes through it` });
    return false;
  }

  /** Walks root; yields after each entry, so that a caller can give the event loop a turn (scanStateSliced). */
  *walk(root: string): Generator<void, void, void> {
    const top = lstatSync(root, { throwIfNoEntry: false });
    if (!top) return;
    if (!top.isDirectory()) {
      this.look(root, root, undefined);
      return;
    }
    const stack = [root];
    while (stack.length > 0 && !this.scan.stopped) {
      const dir = stack.pop()!;
      // Read an entry at a time, each counted as it comes: a directory of a million entries is never listed whole.
      let handle: Dir | undefined;
      try {
        handle = opendirSync(dir, { bufferSize: 256 });
        for (let d = handle.readSync(); d; d = handle.readSync()) {
          const path = `${dir}/${d.name}`;
          if (!this.spend(path)) return;
          if (this.look(root, path, d)) stack.push(path);
          yield;
        }
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== "ENOENT" && code !== "ENOTDIR") this.add({ root, path: dir, kind: "unreadable", why: `a directory Vak cannot read (${code}): what it holds is unknown` });
      } finally {
        handle?.closeSync();
      }
    }
  }
}

/** The walks of roots, one after another; a root inside another is walked with it. */
function* walks(w: Walk, roots: readonly string[]): Generator<void, void, void> {
  for (const r of roots) if (!roots.some((o) => o !== r && isWithin(r, o))) yield* w.walk(r);
}

/**
 * The links, hard-linked files, FIFOs, sockets, devices and unreadable directories in the given state roots
 * (canonical directories or files: the plan's grants.noLinks). writable: the run's writable roots, for the
 * reason a link is given.
 */
export function scanState(roots: readonly string[], writable: readonly string[], budget: StateBudget = { entries: MAX_STATE_ENTRIES, ms: MAX_STATE_MS }): StateScan {
  const w = new Walk(writable, budget);
  for (const _ of walks(w, roots));
  return w.scan;
}

/** The event loop gets a turn at least this often during scanStateSliced. */
export const STATE_SLICE_MS = 10;

/**
 * scanState for a process that serves others while it walks (the resident host runs `vak exec` for every
 * terminal of the user, and its egress gates): the same walk and budget, in slices of STATE_SLICE_MS with a turn
 * of the event loop between them. A state a sandbox filled with a million entries then costs the other
 * sessions nothing but a share of the CPU, never a 5 s stall.
 */
export async function scanStateSliced(roots: readonly string[], writable: readonly string[], budget: StateBudget = { entries: MAX_STATE_ENTRIES, ms: MAX_STATE_MS }, sliceMs = STATE_SLICE_MS): Promise<StateScan> {
  const w = new Walk(writable, budget);
  let slice = Date.now();
  for (const _ of walks(w, roots)) {
    // The clock at every entry (tens of nanoseconds, against an lstat's microseconds): one entry may cost a
    // millisecond or more (a link resolved through its whole chain), and 64 of them held the loop for a second.
    if (Date.now() - slice < sliceMs) continue;
    await new Promise<void>((resolve) => setImmediate(resolve));
    slice = Date.now();
  }
  return w.scan;
}

/** What find(1) selects: what the walk reports (an unreadable directory aside), for the commands a refusal gives. */
export const FIND_WHAT = String.raw`\( -type l -o -type p -o -type s -o -type b -o -type c -o -type f -links +1 \)`;

export const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * The refusal, as one message, for a plan whose state roots hold what scanState finds (undefined when they hold
 * nothing): for a broker's component (a workload, an agent session), which has no lines of its own to print;
 * `vak exec` names each on a line (src/cli/exec-state.ts). Walked in slices (scanStateSliced): `vak serve` hosts
 * many sessions in one process, and one component's state must not stall the others.
 */
export async function stateRefusal(roots: readonly string[], writable: readonly string[]): Promise<string | undefined> {
  if (roots.length === 0) return undefined;
  const scan = await scanStateSliced(roots, writable);
  if (scan.found === 0 && !scan.stopped) return undefined;
  const first = scan.entries.slice(0, 3).map((e) => `${e.path}${e.kind === "symbolic link" ? ` -> ${e.target}` : ""} (${e.kind})`).join(", ");
  const what = scan.stopped
    ? `holds more than Vak checks before a run (${scan.stopped.entries} entries, stopped at ${scan.stopped.at})`
    : `holds ${scan.found} ${scan.found === 1 ? "entry" : "entries"} the tool on the host would follow or share, which no sandbox may make there: ${first}${scan.found > 3 ? `, and ${scan.found - 3} more` : ""}`;
  return `a host tool's state (state_dirs, state_files) ${what}; look at them with: find ${roots.map(shellQuote).join(" ")} ${FIND_WHAT} -exec ls -ld {} +`;
}
