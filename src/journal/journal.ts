import type { Redactor } from "../secrets/redact.js";
import type { VerifyResult } from "./chain.js";
import type { Actor, Payload, StoredEvent } from "./events.js";
import type { EventSink, SessionStart, SessionWriter } from "./session-writer.js";

export type { SessionStart } from "./session-writer.js";

/**
 * The journal as every part of Vak sees it, whichever database holds it
 * (sqlite-journal.ts, the embedded default; pg-journal.ts, shared by many
 * hosts). Writes go through a session's SessionWriter and are batched into
 * durable commits: an append settles only after its commit, and a failed
 * commit rejects every append in it and fails the journal. Reads, verify,
 * prune and ingest are the same calls on both.
 *
 * What a "chain" is differs, and nothing above this interface depends on it:
 * SQLite keeps one chain through every event, PostgreSQL one per session
 * (rooted in a chain of sessions). StoredEvent.seq is an event's place on its
 * chain; sessionSeq its place in its session, the same on both.
 */
export interface Journal extends EventSink {
  readonly backend: "sqlite" | "postgres";
  /** Where it is, for messages: a path, or a URL without its password. */
  readonly location: string;
  readonly redactor: Redactor;

  /** Starts a session; its session.started event goes in with the session's first commit (await writer.started to wait for it). */
  startSession(info: SessionStart): SessionWriter;
  /** Commits everything queued so far; rejects if that commit fails. */
  flush(): Promise<void>;

  /** Sessions, oldest first: of a kind, started in a window, the newest n, ids starting with a prefix. */
  sessions(filter?: SessionFilter): Promise<SessionInfo[]>;
  /** The session with this id, or the only one whose id starts with it; undefined when none or several do (see matching()). */
  session(id: string): Promise<SessionInfo | undefined>;
  /** Sessions whose id starts with prefix (an exact id alone), at most limit, newest last: to refuse an ambiguous id with its candidates. */
  matching(prefix: string, limit?: number): Promise<SessionInfo[]>;
  /** One session's events in order; with after, only those past that sessionSeq; with limit, at most that many (a page). */
  events(sessionId: string, opts?: { after?: number; limit?: number }): Promise<StoredEvent[]>;
  /** Full-text search over payloads (arguments, results, reasons). */
  search(query: string, opts?: { session?: string; limit?: number }): Promise<StoredEvent[]>;
  /** Walks every chain and reports the first broken link. */
  verify(): Promise<VerifyResult>;
  /** Removes events older than before (the prune is itself recorded). */
  prune(before: Date, actor?: Actor): Promise<PruneResult>;
  /** Takes spooled `vak exec` runs into the journal. */
  ingestSpools(dir?: string): Promise<number>;
  /** Calls listener whenever events are committed, by this host or any other sharing the journal. */
  watch(listener: (c: Committed) => void, onError?: (e: Error) => void): Promise<Watch>;
  close(): Promise<void>;
}

export interface SessionInfo {
  id: string;
  kind: string;
  started: string;
  title: string;
  workspace: string | null;
  /** The host that started it (PostgreSQL, where many hosts share a journal); null in SQLite. */
  host: string | null;
  events: number;
  ended: string | null;
  outcome: string | null;
}

/** Which sessions to list: a kind (a workload's kind is "workload:ID"; "workload" matches them all), a start-time window, the newest n. */
export interface SessionFilter {
  kind?: string | undefined;
  /** ISO times, inclusive. */
  since?: string | undefined;
  until?: string | undefined;
  /** Only the newest n (still listed oldest first). */
  limit?: number | undefined;
  /** Only sessions whose id starts with this. */
  idPrefix?: string | undefined;
}

export interface PruneResult {
  events: number;
  sessions: number;
  throughSeq: number;
}

/** A session's events up to sessionSeq are committed. */
export interface Committed {
  session: string;
  sessionSeq: number;
}

export interface Watch {
  close(): Promise<void>;
}

