import type { Redactor } from "../secrets/redact.js";
import type { CommitQueue } from "./commit-queue.js";
import type { NewEvent, StoredEvent } from "./events.js";
import { type SessionStart, type SessionWriter, startSession } from "./session-writer.js";

/**
 * What both backends do the same way: sessions start, appends queue and
 * flush through one commit queue (commit-queue.ts), and close commits what is
 * queued before the backend lets go of its connections.
 */
export abstract class BatchedJournal {
  abstract readonly redactor: Redactor;
  protected abstract readonly queue: CommitQueue;

  /** Lets go of the backend's connections and threads; called once everything queued has been committed (or the journal failed). */
  protected abstract release(): Promise<void>;

  startSession(info: SessionStart): SessionWriter {
    return startSession(this, (t) => this.redactor.text(t), info);
  }

  enqueue(session: SessionWriter, event: NewEvent): Promise<StoredEvent> {
    return this.queue.enqueue(session, event);
  }

  flush(): Promise<void> {
    return this.queue.flush();
  }

  async close(): Promise<void> {
    try {
      await this.queue.flush();
    } finally {
      await this.release();
    }
  }
}
