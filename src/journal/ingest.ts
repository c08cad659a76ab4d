import { renameSync, unlinkSync } from "node:fs";
import { recordedJson } from "./bounds.js";
import type { Redactor } from "../secrets/redact.js";
import type { PreparedEvent } from "./commit-queue.js";
import { checkEvent, type EventKind } from "./events.js";
import type { SessionRow } from "./session-writer.js";
import { MAX_SPOOL_LINE, OPEN_SUFFIX, pendingSpools, type SpoolHeader, type SpoolLine, spoolDir, spoolLines, type SpoolText } from "./spool.js";

/** What ingest writes into: a backend that takes one run in one transaction. */
export interface IngestTarget {
  redactor: Redactor;
  /** Writes the run's session and events (batches, read lazily) in one commit; does nothing if the session is already in the journal. */
  takeRun(session: string, row: SessionRow, batches: Iterable<PreparedEvent[]>): unknown;
}

/**
 * Takes spooled runs (see spool.ts) into the chain, oldest first, one commit
 * each, and removes their files. A file is claimed by renaming it, so that two
 * ingesters never take the same run twice; a run whose session is already in
 * the journal (an ingester died between commit and unlink) is only removed.
 * Files are read a line at a time. A line that cannot be taken (damaged, not
 * an event, or over MAX_SPOOL_LINE) is recorded in its place as a refused
 * "journal.ingest" decision, the rest of the run is taken in, the file is kept
 * beside the spool as .partial, and a message says so: one bad file never
 * stops the journal.
 */
export async function ingestSpools(into: IngestTarget, dir: string = spoolDir()): Promise<number> {
  let taken = 0;
  for (const found of pendingSpools(dir)) {
    const file = found.replace(/\.ingesting-\d+$/, "");
    const claimed = `${file}.ingesting-${process.pid}`;
    try {
      renameSync(found, claimed);
    } catch {
      continue; // another ingester has it
    }
    const lines = spoolLines(claimed);
    let header: SpoolHeader | undefined;
    try {
      header = (JSON.parse(lines.next().value?.text ?? "") as { header: SpoolHeader }).header;
      if (!header?.session) throw new Error("no header");
    } catch {
      lines.return(undefined);
      renameSync(claimed, `${file}.unreadable`);
      process.stderr.write(`vak: journal: ${file} has no readable header; it is kept as ${file}.unreadable\n`);
      continue;
    }
    const problems: string[] = [];
    const kept = `${file}.partial`;
    try {
      const row = { kind: header.kind, started: header.started, title: into.redactor.text(header.title), workspace: header.workspace };
      await into.takeRun(header.session, row, runBatches(into.redactor, header, lines, file.endsWith(OPEN_SUFFIX), problems, kept));
    } finally {
      lines.return(undefined); // closes the file, whether or not every line was read
    }
    if (problems.length) {
      renameSync(claimed, kept);
      const shown = problems.slice(0, 3).join("; ") + (problems.length > 3 ? `; and ${problems.length - 3} more` : "");
      process.stderr.write(`vak: journal: took in ${file} in part: ${shown}; each is recorded in its place, and the file is kept as ${kept}\n`);
    } else unlinkSync(claimed);
    taken += 1;
  }
  return taken;
}

/** One spooled run's events, redacted, numbered and in batches of 1000, as they are read. */
function* runBatches(redactor: Redactor, header: SpoolHeader, lines: Iterable<SpoolText>, open: boolean, problems: string[], kept: string): Generator<PreparedEvent[]> {
  // The spool holds known secrets redacted already; credential shapes are redacted here, on the way in.
  let batch: PreparedEvent[] = [];
  let count = 0;
  let last: EventKind | undefined;
  const add = (e: SpoolLine) => {
    last = e.kind;
    batch.push({
      session: header.session, session_seq: ++count, time: e.time, kind: e.kind, actor: recordedJson(redactor, e.actor),
      generation: e.generation, payload: recordedJson(redactor, e.payload),
    });
  };
  for (const l of lines) {
    if (l.bytes === 0) continue;
    const e = l.text === undefined ? undefined : spoolEvent(l.text);
    if (e) add(e);
    // A torn last line: its write never returned, so it was never acknowledged.
    else if (l.terminated) add(placeholder(l, problems, kept));
    if (batch.length >= 1000) yield batch.splice(0);
  }
  if (open && last !== "session.ended")
    add({ kind: "session.ended", actor: { component: "host" }, generation: 0, time: new Date().toISOString(), payload: { outcome: "interrupted: vak stopped before the run ended" } });
  if (batch.length) yield batch;
}

/** A spool line as an event the chain can hold, or undefined. */
function spoolEvent(text: string): SpoolLine | undefined {
  try {
    const e = JSON.parse(text) as SpoolLine;
    checkEvent(e);
    return typeof e.time === "string" ? e : undefined;
  } catch {
    return undefined;
  }
}

/** What the chain holds where a spool line could not be taken in. */
function placeholder(l: SpoolText, problems: string[], kept: string): SpoolLine {
  const problem = `line ${l.line} ${l.text === undefined ? `is ${l.bytes} bytes, over the ${MAX_SPOOL_LINE}-byte limit` : "is not a readable event"}`;
  problems.push(problem);
  return {
    kind: "decision", actor: { component: "journal" }, generation: 0, time: new Date().toISOString(),
    payload: { op: "journal.ingest", allowed: false, reason: `${problem}; not taken in (the spool file is kept as ${kept})`, line: l.line, bytes: l.bytes },
  };
}
