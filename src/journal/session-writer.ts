import { randomBytes } from "node:crypto";
import type { Actor, EventKind, NewEvent, Payload, StoredEvent } from "./events.js";

/** A session's row, as it goes into the sessions table with its first commit. */
export interface SessionRow {
  kind: string;
  started: string;
  title: string;
  workspace: string | null;
}

/** Where a session's events go: the journal, which numbers and commits them. */
export interface EventSink {
  enqueue(session: SessionWriter, event: NewEvent): Promise<StoredEvent>;
}

/**
 * One session's writer: what every part of the host (a broker, an approval
 * gate, an agent loop) holds to put events on the record of its session. It
 * numbers events within the session; the journal chains and commits them.
 */
export class SessionWriter {
  private seqInSession: number;
  /** Settles once the session's start is committed (rejects if it could not be). */
  started: Promise<StoredEvent> = Promise.reject(new Error("not started"));

  constructor(
    private readonly journal: EventSink,
    readonly id: string,
    lastSeq: number,
    private row?: SessionRow,
  ) {
    this.seqInSession = lastSeq;
    this.started.catch(() => undefined);
  }

  /** @internal the sessions row, until a commit has written it */
  unwrittenRow(): SessionRow | undefined {
    return this.row;
  }

  /** @internal */
  rowWritten(): void {
    this.row = undefined;
  }

  /** @internal numbering happens as a commit takes the event */
  nextSeq(): number {
    return ++this.seqInSession;
  }

  /** @internal undoes numbering for a commit that failed */
  rollback(): void {
    this.seqInSession -= 1;
  }

  /** Resolves after the commit that holds it; rejects (and so does every later append) if that commit fails. */
  append(kind: EventKind, actor: Actor, generation: number, payload: Payload): Promise<StoredEvent> {
    return this.journal.enqueue(this, { kind, actor, generation, payload });
  }

  end(outcome: string, payload: Payload = {}): Promise<StoredEvent> {
    return this.append("session.ended", { component: "host" }, 0, { outcome, ...payload });
  }
}

export interface SessionStart {
  kind: string;
  title: string;
  workspace?: string;
  actor?: Actor;
  payload?: Payload;
}

/**
 * A new session on either backend: its row (title redacted) goes in with its
 * first commit, one fsync rather than two, and its start is that commit's
 * first event.
 */
export function startSession(sink: EventSink, redactTitle: (title: string) => string, info: SessionStart): SessionWriter {
  const s = new SessionWriter(sink, newSessionId(), 0, { kind: info.kind, started: new Date().toISOString(), title: redactTitle(info.title), workspace: info.workspace ?? null });
  s.started = s.append("session.started", info.actor ?? { component: "host" }, 0, { kind: info.kind, title: info.title, ...info.payload });
  s.started.catch(() => undefined);
  return s;
}

/** A session id: sortable by time, unguessable. */
export function newSessionId(): string {
  return `${Date.now().toString(36)}-${randomBytes(5).toString("hex")}`;
}
