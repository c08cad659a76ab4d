import type { Journal } from "../journal/journal.js";
import type { TextFilter } from "./browser-text.js";
import { eventView } from "./journal-view.js";
import type { LiveMessage } from "./wire.js";

/**
 * New journal events, as they are committed by this process or any other
 * (`vak exec` and `vak run` elsewhere write the same journal): polled by
 * position in the chain, so nothing committed is missed whatever order
 * processes commit in, and published to the live feed. `vak exec` runs wait
 * in the spool until a journal takes them in; the server does so every
 * couple of seconds, so that they show up while it runs.
 */
const PAGE = 500;
const INGEST_MS = 2000;

export class JournalTail {
  private cursor: number;
  private timer: NodeJS.Timeout | undefined;
  private ingested = 0;

  constructor(
    private readonly journal: Journal,
    private readonly filter: TextFilter,
    private readonly publish: (m: LiveMessage) => void,
    private readonly listening: () => boolean,
    private readonly intervalMs = 250,
  ) {
    this.cursor = journal.lastSeq();
  }

  start(): void {
    this.timer ??= setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  tick(): void {
    if (Date.now() - this.ingested > INGEST_MS) {
      this.ingested = Date.now();
      try {
        this.journal.ingestSpools();
      } catch {
        // a run that cannot be taken in now is taken in later (or by `vak journal ingest`)
      }
    }
    if (!this.listening()) {
      this.cursor = this.journal.lastSeq();
      return;
    }
    for (;;) {
      const events = this.journal.eventsAfter(this.cursor, { limit: PAGE });
      if (events.length === 0) return;
      this.cursor = events[events.length - 1]!.seq;
      this.publish({ type: "events", events: events.map((e) => eventView(e, this.filter)) });
      if (events.some((e) => e.kind === "session.started" || e.kind === "session.ended")) this.publish({ type: "sessions" });
      if (events.length < PAGE) return;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
