import type { FeedMessage } from "../wire.js";

/**
 * The live feed (/api/ws): one WebSocket, reconnected with a growing delay.
 * Listeners get every message; on each (re)connect they are told to reload,
 * since what happened while the feed was down is not replayed.
 */
type Listener = (m: FeedMessage | { type: "connected" }) => void;

export class Feed {
  private readonly listeners = new Set<Listener>();
  private ws: WebSocket | undefined;
  private delay = 500;
  private stopped = false;
  connected = false;

  start(): void {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/api/ws`);
    this.ws = ws;
    ws.onopen = () => {
      this.delay = 500;
      this.connected = true;
      this.emit({ type: "connected" });
    };
    ws.onmessage = (e) => {
      if (typeof e.data !== "string") return;
      let m: FeedMessage;
      try {
        m = JSON.parse(e.data) as FeedMessage;
      } catch {
        return;
      }
      this.emit(m);
    };
    ws.onclose = () => {
      this.connected = false;
      if (this.stopped) return;
      setTimeout(() => this.start(), this.delay);
      this.delay = Math.min(this.delay * 2, 10_000);
    };
  }

  stop(): void {
    this.stopped = true;
    this.ws?.close();
  }

  on(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  private emit(m: FeedMessage | { type: "connected" }): void {
    for (const l of this.listeners) l(m);
  }
}

export const feed = new Feed();
