import type { Committed, Journal, Watch } from "../journal/journal.js";
import type { StoredEvent } from "../journal/events.js";
import type { TextFilter } from "./browser-text.js";
import { eventView } from "./journal-view.js";
import type { LiveMessage } from "./wire.js";

/**
 * New journal events, as they are committed by this process or any other
 * (`vak exec` and `vak run` elsewhere write the same journal, and on
 * PostgreSQL so do other hosts): the journal's watch() names each session
 * and how far it is committed (SQLite: polling; PostgreSQL: LISTEN/NOTIFY,
 * only a hint), and the events are then read from the journal itself, past
 * what was already published for that session. A session first heard of
 * while the tail runs is published from the tail's start. `vak exec` runs
 * wait in the spool until a journal takes them in; the server does so every
 * couple of seconds, so that they show up while it runs.
 */
const PAGE = 500;
const INGEST_MS = 2000;

export class JournalTail {
  /** Per session: the last sessionSeq published (or passed over while nobody listened). */
  private readonly cursors = new Map<string, number>();
  private readonly since = new Date().toISOString();
  private timer: NodeJS.Timeout | undefined;
  private watch: Watch | undefined;
  private stopped = false;
  private ingesting = false;
  /** Notifications are handled one after another, so that a session's events are published in order. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly journal: Journal,
    private readonly filter: TextFilter,
    private readonly publish: (m: LiveMessage) => void,
    private readonly listening: () => boolean,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.ingest(), INGEST_MS);
    this.timer.unref();
    this.ingest();
    void this.journal.watch((c) => this.committed(c), () => undefined).then(
      (w) => (this.stopped ? void w.close() : (this.watch = w)),
      () => undefined, // a journal that cannot be watched has failed; its next write says so
    );
  }

  private ingest(): void {
    if (this.ingesting) return;
    this.ingesting = true;
    // A run that cannot be taken in now is taken in later (or by `vak journal ingest`).
    void this.journal.ingestSpools().catch(() => undefined).finally(() => (this.ingesting = false));
  }

  private committed(c: Committed): void {
    this.chain = this.chain.then(() => this.publishUpTo(c)).catch(() => undefined);
  }

  /** Settles once every notification so far is published (for tests). */
  settled(): Promise<void> {
    return this.chain;
  }

  private async publishUpTo(c: Committed): Promise<void> {
    const at = this.cursors.get(c.session);
    if (at !== undefined && c.sessionSeq <= at) return;
    if (!this.listening()) {
      this.cursors.set(c.session, c.sessionSeq);
      return;
    }
    let events: StoredEvent[] = await this.journal.events(c.session, at === undefined ? {} : { after: at });
    if (at === undefined) events = events.filter((e) => e.time >= this.since);
    const last = events.length ? events[events.length - 1]!.sessionSeq : c.sessionSeq;
    this.cursors.set(c.session, Math.max(last, this.cursors.get(c.session) ?? last));
    for (let i = 0; i < events.length; i += PAGE)
      this.publish({ type: "events", events: events.slice(i, i + PAGE).map((e) => eventView(e, this.filter)) });
    if (events.some((e) => e.kind === "session.started" || e.kind === "session.ended")) this.publish({ type: "sessions" });
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    void this.watch?.close().catch(() => undefined);
    this.watch = undefined;
  }
}
