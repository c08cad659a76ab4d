import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Broker, type BrokerOptions } from "../../src/broker/broker.js";
import type { StoredEvent } from "../../src/journal/events.js";
import type { Journal } from "../../src/journal/journal.js";
import { SqliteJournal } from "../../src/journal/sqlite-journal.js";
import type { SessionWriter } from "../../src/journal/session-writer.js";

/** A broker over ws with a real journal of its own, for reading back what was recorded. */
export interface TestBroker {
  broker: Broker;
  journal: Journal;
  session: SessionWriter;
  events(): Promise<StoredEvent[]>;
  close(): Promise<void>;
}

export async function testBroker(ws: string, opts: Partial<BrokerOptions> = {}): Promise<TestBroker> {
  const dir = mkdtempSync(join(tmpdir(), "vak-test-journal-"));
  const journal = await SqliteJournal.open({ path: join(dir, "journal.db"), ingest: false });
  const session = journal.startSession({ kind: "test", title: "broker test", workspace: ws });
  const broker = new Broker({ workspace: ws, mode: "workspace-write", journal: session, ...opts });
  return {
    broker, journal, session,
    events: async () => {
      await journal.flush();
      return journal.events(session.id);
    },
    close: async () => {
      await broker.close();
      await journal.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
