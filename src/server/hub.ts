import type { WebSocket } from "ws";
import type { FeedMessage, LiveMessage } from "./wire.js";

/**
 * The live feed: every message goes to every connected browser of this
 * server (one user, one token). A client that cannot keep up is dropped
 * rather than buffered without bound; it reconnects and reloads.
 *
 * Every message carries its position in the feed (`feed`), and every answer
 * the API gives about what the feed changes (a transcript, the open
 * approvals, a session's state) says the position it was taken at: the page
 * reads both over two sockets with no order between them, and brings an
 * answer up to date with the messages after its position, whichever arrived
 * first (web/catch-up.ts). The position counts every message, watched or not.
 */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export class Hub {
  private readonly clients = new Set<WebSocket>();
  private sent = 0;

  /** The position of the last message published: an answer taken now reflects every message up to it. */
  get position(): number {
    return this.sent;
  }

  get size(): number {
    return this.clients.size;
  }

  add(ws: WebSocket): void {
    this.clients.add(ws);
    ws.on("close", () => this.clients.delete(ws));
    ws.on("error", () => this.clients.delete(ws));
  }

  publish(m: LiveMessage): void {
    const fed: FeedMessage = { ...m, feed: ++this.sent };
    if (this.clients.size === 0) return;
    const text = JSON.stringify(fed);
    for (const ws of this.clients) {
      if (ws.readyState !== ws.OPEN) continue;
      if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
        ws.terminate();
        this.clients.delete(ws);
        continue;
      }
      ws.send(text);
    }
  }

  close(): void {
    for (const ws of this.clients) ws.close(1001, "the server is stopping");
    this.clients.clear();
  }
}
