import { closeSync, constants, openSync, readdirSync, readSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { StoredEvent } from "../journal/events.js";
import type { Journal, Watch } from "../journal/journal.js";
import { DONE_SUFFIX, OPEN_SUFFIX, spoolDir, type SpoolHeader, type SpoolLine } from "../journal/spool.js";
import { VakError } from "../policy/errors.js";
import { Redactor } from "../secrets/redact.js";
import { describe, open, sessionOf } from "./journal.js";
import { fmt, own, processOutput } from "./output.js";

/**
 * `vak journal tail [ID | --all]`: the journal as it is written. Two sources,
 * because `vak exec` keeps the database off its start-up path: the database,
 * followed with journal.watch() (every host's commits on PostgreSQL, through
 * LISTEN/NOTIFY; SQLite's data_version), each session read past what was shown
 * of it, and the spool files of runs not yet taken in (read from where the
 * last read stopped, whenever the spool directory changes and at least every
 * POLL_MS). A spooled run's events are shown as they
 * are written; when the journal later takes the run in, the same events (by
 * their place in the session) are not shown again.
 *
 * Everything shown was written by models, commands and servers: each line is
 * redacted and neutralised, and a spool line is held at most MAX_PENDING bytes.
 */
const POLL_MS = 1000;
const WAKE_MS = 25;
const MAX_PENDING = 4 * 1024 * 1024;
const READ_CHUNK = 1 << 20;

interface SpoolCursor {
  session?: string | undefined;
  offset: number;
  pending: Buffer;
  /** Events of this run shown so far (the next one's place in the session is count + 1). */
  count: number;
  skipping: boolean;
}

export async function journalTail(id: string | undefined, opts: { all?: boolean }): Promise<number> {
  if (id && opts.all) throw new VakError("bad-input", "give a session id or --all, not both");
  // Events are printed through the output (redacted, neutralised, hostile text after its margin); notes are Vak's own.
  const { out } = processOutput(new Redactor());
  const show = (s: string) => out.line(own(s));
  const j = await open();
  const dir = spoolDir();
  // One session: everything it has, then what comes. All: what comes from now on (and runs spooling now, from their start).
  let only: string | undefined;
  try {
    if (id) only = await findSession(j, dir, id);
  } catch (e) {
    await j.close();
    throw e;
  }
  const since = new Date().toISOString();
  /** Per session, the last sessionSeq read from the database. */
  const dbCursors = new Map<string, number>();
  const cursors = new Map<string, SpoolCursor>();
  /** Per session, the events already shown from its spool file. */
  const shownFromSpool = new Map<string, number>();
  let ended = false;

  const print = (e: StoredEvent) => {
    // A session id Vak made starts its line as Vak's own; a spool file's name that is not one is hostile text.
    const sid = /^[0-9a-z-]+$/.test(e.session) ? own(e.session) : e.session;
    out.line(only ? describe(e) : fmt`${sid}  ${describe(e)}`);
    if (only && e.kind === "session.ended") ended = true;
  };

  /** Reads a session's events past what was read of it; a session first seen while following every session, only those since the tail began. */
  const readDb = async (session: string, upTo: number) => {
    const at = dbCursors.get(session);
    if (at !== undefined && upTo <= at) return;
    for (;;) {
      const cursor = dbCursors.get(session);
      const batch = await j.events(session, { after: cursor ?? 0, limit: 1000 });
      for (const e of batch) {
        dbCursors.set(session, e.sessionSeq);
        if ((shownFromSpool.get(e.session) ?? 0) >= e.sessionSeq) continue;
        if (cursor === undefined && !only && e.time < since) continue;
        print(e);
      }
      if (batch.length < 1000) return;
    }
  };

  const pollSpool = () => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names.sort()) {
      if (!name.endsWith(OPEN_SUFFIX) && !name.endsWith(DONE_SUFFIX)) continue;
      const session = name.split(".")[0]!;
      if (only && session !== only) continue;
      // A run's file is renamed from .open to .done when it ends: one cursor for both names.
      const c = cursors.get(session) ?? { offset: 0, pending: Buffer.alloc(0), count: 0, skipping: false };
      cursors.set(session, c);
      readSpool(join(dir, name), c, (line) => {
        if (c.session === undefined) {
          c.session = ((JSON.parse(line) as { header?: SpoolHeader }).header ?? { session }).session;
          return;
        }
        const l = JSON.parse(line) as SpoolLine;
        c.count += 1;
        if ((shownFromSpool.get(session) ?? 0) >= c.count) return;
        shownFromSpool.set(session, c.count);
        // Already in the database (taken in since): shown from there, not twice.
        print({ seq: 0, session, sessionSeq: c.count, time: l.time, kind: l.kind, actor: l.actor, generation: l.generation, payload: l.payload, prevHash: "", hash: "" });
      }, show);
    }
  };

  let watchers: FSWatcher[] = [];
  let timer: NodeJS.Timeout | undefined;
  let woken: NodeJS.Timeout | undefined;
  let dbWatch: Watch | undefined;
  try {
    return await new Promise<number>((resolve, reject) => {
      let done = false;
      const finish = (code: number) => {
        done = true;
        for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.off(s, onSignal);
        resolve(code);
      };
      const fail = (e: unknown) => {
        done = true;
        for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.off(s, onSignal);
        reject(e);
      };
      const onSignal = () => finish(0);
      for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(s, onSignal);
      // Database reads one after another, so that a session's events print in order and once.
      let reads: Promise<void> = Promise.resolve();
      const queueRead = (session: string, upTo: number) => {
        reads = reads.then(async () => {
          if (done) return;
          await readDb(session, upTo);
          if (ended) finish(0);
        }).catch(fail);
      };
      const poll = () => {
        woken = undefined;
        if (done) return;
        try {
          pollSpool();
        } catch (e) {
          return fail(e);
        }
        if (ended) finish(0);
      };
      const wake = () => void (woken ??= setTimeout(poll, WAKE_MS));
      try {
        watchers.push(watch(dir, { persistent: false }, wake));
      } catch {
        // not there yet (no run has spooled): the timer covers it
      }
      timer = setInterval(poll, POLL_MS);
      // Watch first, then read what the session already has: nothing committed in between is missed.
      j.watch((c) => void ((!only || c.session === only) && queueRead(c.session, c.sessionSeq)), fail).then(
        (w) => {
          dbWatch = w;
          if (done) return;
          if (!only) show("(following every session; Ctrl-C to stop)");
          poll();
          if (only) queueRead(only, Number.MAX_SAFE_INTEGER);
        },
        fail,
      );
    });
  } finally {
    for (const w of watchers) w.close();
    watchers = [];
    if (timer) clearInterval(timer);
    if (woken) clearTimeout(woken);
    await dbWatch?.close().catch(() => undefined);
    await j.close();
  }
}

/** A session in the journal, or a run still in the spool, by id, start of id, or "last". */
async function findSession(j: Journal, dir: string, id: string): Promise<string> {
  let spooled: string[] = [];
  try {
    spooled = readdirSync(dir).filter((n) => n.endsWith(OPEN_SUFFIX) || n.endsWith(DONE_SUFFIX)).map((n) => n.split(".")[0]!);
  } catch {
    // no spool yet
  }
  const live = id === "last" ? spooled.sort().at(-1) : spooled.filter((s) => s.startsWith(id));
  if (id === "last") {
    const [newest] = await j.sessions({ limit: 1 });
    // Session ids begin with their start time in base 36, so the larger is the newer.
    const candidates = [newest?.id, live as string | undefined].filter((x): x is string => Boolean(x)).sort();
    if (!candidates.length) throw new VakError("bad-input", "the journal holds no sessions yet");
    return candidates.at(-1)!;
  }
  const inSpool = live as string[];
  if (inSpool.length === 1 && !(await j.matching(id, 1)).length) return inSpool[0]!;
  return (await sessionOf(j, id)).id;
}

/** Reads what was appended to a spool file since the cursor, a line at a time; a torn last line waits for the rest. */
function readSpool(path: string, c: SpoolCursor, onLine: (line: string) => void, note: (s: string) => void): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return; // taken in or renamed since the listing: the database has it
  }
  try {
    const buf = Buffer.alloc(READ_CHUNK);
    for (let got; (got = readSync(fd, buf, 0, buf.length, c.offset)) > 0; ) {
      c.offset += got;
      let chunk = buf.subarray(0, got);
      for (let nl; (nl = chunk.indexOf(10)) >= 0; chunk = chunk.subarray(nl + 1)) {
        const line = Buffer.concat([c.pending, chunk.subarray(0, nl)]);
        c.pending = Buffer.alloc(0);
        if (c.skipping) {
          c.skipping = false;
          continue;
        }
        try {
          onLine(line.toString("utf8"));
        } catch {
          note(`(a spool line of ${line.length} bytes that is not an event was skipped)`);
        }
      }
      if (c.skipping) continue;
      c.pending = Buffer.concat([c.pending, chunk]);
      if (c.pending.length > MAX_PENDING) {
        note(`(a spool line over ${MAX_PENDING} bytes was skipped; \`vak journal export\` has it once the run is taken in)`);
        c.pending = Buffer.alloc(0);
        c.skipping = true;
        c.count += 1;
      }
    }
  } finally {
    closeSync(fd);
  }
}
