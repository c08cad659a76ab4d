import { VakError } from "../policy/errors.js";
import type { Redactor } from "../secrets/redact.js";
import { recordedJson } from "./bounds.js";
import type { ChainRow } from "./chain.js";
import { checkEvent, type NewEvent, type StoredEvent } from "./events.js";
import type { SessionRow, SessionWriter } from "./session-writer.js";

/**
 * Batched durable commits (group commit), the same for both backends. At most
 * one commit is in flight, so a session's events commit in the order they
 * were appended; every append made while it is in flight goes into the next
 * one, together, as soon as it returns. An append settles only after the
 * commit that holds it, and a failed commit rejects every append in it and
 * every one after: the journal has failed, and callers stop rather than go on
 * unrecorded. The backend reads each chain's end from the database inside its
 * transaction, so nothing about a chain is carried over from a commit that
 * failed.
 *
 * Redaction, the string bound and serialisation (the costly part on this
 * side) happen while the commit before is in flight: on two cores the next
 * batch is ready when the database answers. An event redacted before the
 * redactor learned another secret is redacted again before it is written.
 * Numbering (session_seq) happens only as a commit takes the event.
 */
export interface PreparedEvent extends Omit<ChainRow, "seq"> {
  /** The session's row, with the first commit of a session. */
  newSession?: SessionRow;
  /** The payload's search terms, for a backend that indexes them itself (PostgreSQL), made ahead with the text. */
  search?: string;
}

/** Writes one batch in one durable transaction; returns the stored events in order, or throws. */
export type Commit = (batch: PreparedEvent[]) => StoredEvent[] | Promise<StoredEvent[]>;

interface Pending {
  session: SessionWriter;
  event: NewEvent;
  resolve: (e: StoredEvent) => void;
  reject: (e: Error) => void;
  /** actor and payload as they will be stored, and how many secrets the redactor knew then. */
  text?: { actor: string; payload: string; search: string | undefined; knows: number };
}

/** The most events one commit holds; more wait for the next. */
const MAX_BATCH = 5000;

export class CommitQueue {
  private queue: Pending[] = [];
  /** How many of queue (from its start) have their text prepared. */
  private prepared = 0;
  private scheduled = false;
  private inFlight = false;
  private idle: { resolve: () => void; reject: (e: Error) => void }[] = [];
  failed: VakError | undefined;

  constructor(
    private readonly commit: Commit,
    private readonly redactor: Redactor,
    private readonly failure: (e: unknown) => VakError,
    /** Derives what a backend indexes from a payload's stored text, while the commit before is in flight. */
    private readonly searchTerms?: (payload: string) => string,
  ) {}

  enqueue(session: SessionWriter, event: NewEvent): Promise<StoredEvent> {
    if (this.failed) return Promise.reject(this.failed);
    checkEvent(event);
    return new Promise((resolve, reject) => {
      this.queue.push({ session, event, resolve, reject });
      this.schedule();
    });
  }

  /** Settles once everything queued so far is committed (or the journal has failed). */
  flush(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (!this.queue.length && !this.inFlight) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.idle.push({ resolve, reject });
      this.schedule();
    });
  }

  get pending(): number {
    return this.queue.length;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      // While a commit is in flight, get the next batch ready; drain's loop takes it when the commit returns.
      if (this.inFlight) this.prepare(MAX_BATCH);
      else void this.drain();
    });
  }

  /** Redacts, bounds and serialises the first n queued events that are not ready yet. */
  private prepare(n: number): void {
    const end = Math.min(n, this.queue.length);
    for (; this.prepared < end; this.prepared++) this.text(this.queue[this.prepared]!);
  }

  private text(p: Pending): { actor: string; payload: string; search: string | undefined } {
    const knows = this.redactor.knows;
    if (p.text?.knows !== knows) {
      const e = p.event;
      const payload = recordedJson(this.redactor, e.payload);
      p.text = { actor: recordedJson(this.redactor, e.actor), payload, search: this.searchTerms?.(payload), knows };
    }
    return p.text;
  }

  private async drain(): Promise<void> {
    if (this.inFlight || this.failed) return;
    while (this.queue.length) {
      const batch = this.queue.splice(0, MAX_BATCH);
      this.prepared = Math.max(0, this.prepared - batch.length);
      this.inFlight = true;
      const withRow = new Set<SessionWriter>();
      let stored: StoredEvent[];
      try {
        const time = new Date().toISOString();
        const rows = batch.map((p): PreparedEvent => {
          const row = withRow.has(p.session) ? undefined : p.session.unwrittenRow();
          if (row) withRow.add(p.session);
          const { actor, payload, search } = this.text(p);
          return { session: p.session.id, newSession: row, session_seq: p.session.nextSeq(), time, kind: p.event.kind, actor, generation: p.event.generation, payload, search };
        });
        stored = await this.commit(rows);
      } catch (e) {
        this.inFlight = false;
        this.fail(e, batch);
        return;
      }
      this.inFlight = false;
      for (const s of withRow) s.rowWritten();
      batch.forEach((p, i) => p.resolve(stored[i]!));
    }
    for (const w of this.idle.splice(0)) w.resolve();
  }

  private fail(e: unknown, batch: Pending[]): void {
    for (const p of batch.reverse()) p.session.rollback();
    this.failed = e instanceof VakError ? e : this.failure(e);
    this.prepared = 0;
    for (const p of [...batch, ...this.queue.splice(0)]) p.reject(this.failed);
    for (const w of this.idle.splice(0)) w.reject(this.failed);
  }
}
