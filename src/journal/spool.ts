import { closeSync, constants, fdatasync, fdatasyncSync, mkdirSync, openSync, readdirSync, readSync, renameSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { Redactor } from "../secrets/redact.js";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";
import { type Actor, checkEvent, type EventKind, type Payload } from "./events.js";

/**
 * The journal's spool: how a short-lived command (`vak exec`) records itself
 * without loading SQLite on its start-up path. Each run writes one file of JSON
 * lines, each line made durable (fdatasync) before the write returns; the
 * journal takes the file into its hash chain the next time it opens (or when a
 * background `vak journal ingest` runs) and removes it. A run's record is thus
 * durable before the command starts, and chained a little later.
 */
export interface SpoolLine {
  kind: EventKind;
  actor: Actor;
  generation: number;
  payload: Payload;
  time: string;
}

export interface SpoolHeader {
  session: string;
  kind: string;
  title: string;
  workspace: string | null;
  started: string;
  pid: number;
}

function why(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT") return "the disk is full";
  if (code === "EROFS") return "the file system is read-only";
  if (code === "EACCES" || code === "EPERM") return "permission denied";
  return (e as Error).message;
}

export function spoolDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).state, "spool");
}

/** A file being written ends in .open.jsonl and carries its writer's pid; a finished one ends in .done.jsonl. */
export const OPEN_SUFFIX = ".open.jsonl";
export const DONE_SUFFIX = ".done.jsonl";

export class Spool {
  private fd: number;
  private closed = false;

  private constructor(
    readonly path: string,
    fd: number,
    readonly header: SpoolHeader,
    private readonly redactor: Redactor,
  ) {
    this.fd = fd;
  }

  static start(info: { kind: string; title: string; workspace?: string }, opts: { dir?: string; redactor?: Redactor } = {}): Spool {
    const dir = opts.dir ?? spoolDir();
    const redactor = opts.redactor ?? new Redactor();
    const session = `${Date.now().toString(36)}-${Math.random().toString(16).slice(2, 12).padEnd(10, "0")}`;
    const header: SpoolHeader = { session, kind: info.kind, title: redactor.knownOnly(info.title), workspace: info.workspace ?? null, started: new Date().toISOString(), pid: process.pid };
    const path = join(dir, `${session}.${process.pid}${OPEN_SUFFIX}`);
    let fd: number;
    try {
      mkdirSync(dirname(dir), { recursive: true, mode: 0o700 });
      try {
        mkdirSync(dir, { mode: 0o700 }); // not recursive: on a read-only file system that one says ENOENT
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
      fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND | constants.O_NOFOLLOW, 0o600);
    } catch (e) {
      throw new VakError("journal", `the journal spool ${dir} could not be written (${why(e)}); nothing runs unrecorded`);
    }
    const s = new Spool(path, fd, header, redactor);
    s.line(JSON.stringify({ header }), false);
    return s;
  }

  private line(text: string, durable = true): void {
    try {
      writeSync(this.fd, `${text}\n`);
      this.unsynced = !durable;
      if (durable) fdatasyncSync(this.fd);
    } catch (e) {
      throw this.writeError(e);
    }
  }

  /** Durable when it returns (unless durable is false: then with the next durable one); throws a VakError when it cannot be. */
  append(kind: EventKind, actor: Actor, generation: number, payload: Payload, durable = true): void {
    if (this.closed) throw new VakError("internal", "append to a closed spool");
    checkEvent({ kind, actor, generation, payload });
    // Known secret values never reach the disk; credential shapes are redacted when the journal takes the
    // spool in (matching them costs a millisecond of regular-expression compilation on vak exec's start-up).
    const known = (t: string) => this.redactor.knownOnly(t);
    const line: SpoolLine = { kind, actor: this.redactor.value(actor, 0, known), generation, payload: this.redactor.value(payload, 0, known), time: new Date().toISOString() };
    this.line(JSON.stringify(line), durable);
  }

  private writeError(e: unknown): VakError {
    return new VakError("journal", `the journal spool ${this.path} could not be written (${why(e)}); nothing runs unrecorded`);
  }

  /** The fdatasync in flight (on libuv's thread pool), and the one after it, for lines written since it began. */
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  /** Lines written since the last fdatasync began. */
  private unsynced = false;

  /**
   * Makes every line written so far durable. Callers in one turn of the event
   * loop share one fdatasync: concurrent requests wait for one sync, not one each.
   * It runs off the main thread, so the event loop (the egress gate) goes on meanwhile.
   * `now`: the caller has written all it will this turn (a run's start), so the
   * fdatasync goes to the thread pool at once when none is in flight.
   */
  sync(now = false): Promise<void> {
    if (this.queued) return this.queued;
    if (now && !this.running && !this.closed && this.unsynced) return this.datasync();
    const after = this.running ?? Promise.resolve();
    const p: Promise<void> = after.catch(() => undefined).then(
      () =>
        new Promise<void>((resolve, reject) =>
          setImmediate(() => {
            this.queued = undefined; // lines written from here need the next sync
            // A closed spool was synced as it closed.
            if (this.closed || !this.unsynced) return resolve();
            this.datasync().then(resolve, reject);
          }),
        ),
    );
    this.queued = p;
    return p;
  }

  /** One fdatasync on libuv's thread pool of what is written so far; `running` until it settles. */
  private datasync(): Promise<void> {
    this.unsynced = false;
    const p: Promise<void> = new Promise<void>((resolve, reject) =>
      fdatasync(this.fd, (e) => {
        if (this.running === p) this.running = undefined;
        if (e) reject(this.writeError(e));
        else resolve();
      }),
    );
    this.running = p;
    return p;
  }

  /** Marks the run's record complete, ready for the journal to take in. */
  close(): void {
    if (this.closed) return;
    // The descriptor must outlive a sync in flight on the thread pool: await sync() first.
    if (this.running || this.queued) throw new VakError("internal", "the spool was closed while a sync was in flight");
    try {
      if (this.unsynced) fdatasyncSync(this.fd);
    } catch (e) {
      throw this.writeError(e);
    }
    this.closed = true;
    closeSync(this.fd);
    renameSync(this.path, this.path.replace(new RegExp(`\\.\\d+${OPEN_SUFFIX.replace(/\./g, "\\.")}$`), DONE_SUFFIX));
  }
}

/** Spool files ready to be taken in: finished ones, and those whose writer died. */
export function pendingSpools(dir: string = spoolDir()): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === "EPERM";
    }
  };
  const claimedBy = (n: string) => Number(/\.ingesting-(\d+)$/.exec(n)?.[1] ?? 0);
  return names
    .filter(
      (n) =>
        n.endsWith(DONE_SUFFIX) ||
        (n.endsWith(OPEN_SUFFIX) && !alive(Number(n.split(".")[1]))) ||
        (claimedBy(n) > 0 && !alive(claimedBy(n))), // an ingester that died mid-way
    )
    .sort()
    .map((n) => join(dir, n));
}

/** The longest spool line taken in whole: far above any real event, far below what a string can hold. */
export const MAX_SPOOL_LINE = 16 * 1024 * 1024;

export interface SpoolText {
  /** 1-based. */
  line: number;
  /** The line, or undefined when it is longer than the limit (its bytes are skipped, not held). */
  text: string | undefined;
  bytes: number;
  /** False for a last line with no newline: a write that never finished. */
  terminated: boolean;
}

/** A spool file's lines, read a piece at a time: the file is never held whole, however large. */
export function* spoolLines(path: string, max = MAX_SPOOL_LINE): Generator<SpoolText> {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  const buf = Buffer.alloc(1 << 20);
  let parts: Buffer[] = [];
  let bytes = 0;
  let line = 0;
  const add = (piece: Buffer) => {
    bytes += piece.length;
    if (bytes <= max) parts.push(Buffer.from(piece)); // a copy: buf is reused
    else parts = [];
  };
  const end = (terminated: boolean): SpoolText => {
    const text = bytes <= max ? Buffer.concat(parts).toString("utf8") : undefined;
    const t = { line: ++line, text, bytes, terminated };
    parts = [];
    bytes = 0;
    return t;
  };
  try {
    for (let got; (got = readSync(fd, buf, 0, buf.length, null)) > 0; ) {
      const chunk = buf.subarray(0, got);
      let start = 0;
      for (let nl; (nl = chunk.indexOf(10, start)) >= 0; start = nl + 1) {
        add(chunk.subarray(start, nl));
        yield end(true);
      }
      add(chunk.subarray(start));
    }
    if (bytes > 0) yield end(false);
  } finally {
    closeSync(fd);
  }
}
