import type { WebSocket } from "ws";
import type { LiveMessage } from "./wire.js";

/**
 * The live feed: every message goes to every connected browser of this
 * server (one user, one token). A client that cannot keep up is dropped
 * rather than buffered without bound; it reconnects and reloads.
 */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export class Hub {
  private readonly clients = new Set<WebSocket>();

  get size(): number {
    return this.clients.size;
  }

  add(ws: WebSocket): void {
    this.clients.add(ws);
    ws.on("close", () => this.clients.delete(ws));
    ws.on("error", () => this.clients.delete(ws));
  }

  publish(m: LiveMessage): void {
    if (this.clients.size === 0) return;
    const text = JSON.stringify(m);
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
