import type { Actor, EventKind, NewEvent, Payload, StoredEvent } from "./events.js";
import type { SessionRow } from "./schema.js";

/** Where a session's events go: the journal, which numbers and commits them. */
export interface EventSink {
  enqueue(session: SessionWriter, event: NewEvent): Promise<StoredEvent>;
  commitNow(session: SessionWriter, event: NewEvent): StoredEvent;
}

/**
 * One session's writer: what every part of the host (a broker, an approval
 * gate, an agent loop) holds to put events on the record of its session. It
 * numbers events within the session; the journal chains and commits them.
 */
export class SessionWriter {
  private seqInSession: number;

  constructor(
    private readonly journal: EventSink,
    readonly id: string,
    lastSeq: number,
    private row?: SessionRow,
  ) {
    this.seqInSession = lastSeq;
  }

  /** @internal the sessions row, until a commit has written it */
  unwrittenRow(): SessionRow | undefined {
    return this.row;
  }

  /** @internal */
  rowWritten(): void {
    this.row = undefined;
  }

  /** @internal numbering happens inside the commit */
  nextSeq(): number {
    return ++this.seqInSession;
  }

  /** @internal undoes numbering for a commit that failed */
  rollback(): void {
    this.seqInSession -= 1;
  }

  /** Batched: resolves after the commit that holds it. */
  append(kind: EventKind, actor: Actor, generation: number, payload: Payload): Promise<StoredEvent> {
    return this.journal.enqueue(this, { kind, actor, generation, payload });
  }

  /** Committed before it returns; throws a VakError if it cannot be. */
  appendNow(kind: EventKind, actor: Actor, generation: number, payload: Payload): StoredEvent {
    return this.journal.commitNow(this, { kind, actor, generation, payload });
  }

  end(outcome: string, payload: Payload = {}): StoredEvent {
    return this.appendNow("session.ended", { component: "host" }, 0, { outcome, ...payload });
  }
}
