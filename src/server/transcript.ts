import type { AgentEvent } from "../agent/agent.js";
import { unhandled } from "../protocol/unhandled.js";
import { label, shown, type TextFilter } from "./browser-text.js";
import type { TranscriptItem } from "./wire.js";

/**
 * A live session's transcript, as the browser shows it: the user's
 * instructions, the model's streamed text, each tool call and its result.
 * Streamed text is held raw and re-filtered whole at most every flushMs, so
 * that a secret split across two streamed pieces is still redacted in the
 * browser (and one piece at a time would cost a message per token). Bounded:
 * each item's text (browser-text.ts) and the whole (older items go first,
 * and the transcript says so; the journal keeps the record).
 */
const MAX_TOTAL_BYTES = 8 * 1024 * 1024;
/** Raw streamed text held per item; past it only the count grows. */
const MAX_RAW_BYTES = 1024 * 1024;

type Publish = (item: TranscriptItem) => void;
type NewItem = TranscriptItem extends infer T ? (T extends TranscriptItem ? Omit<T, "seq"> : never) : never;

export class Transcript {
  private readonly items: TranscriptItem[] = [];
  private seq = 0;
  private bytes = 0;
  private dropped = 0;
  /** The text item being streamed into: its raw text, and bytes past the raw bound. */
  private streaming: { item: Extract<TranscriptItem, { type: "text" }>; raw: string; over: number; timer?: NodeJS.Timeout | undefined } | undefined;

  constructor(
    private readonly filter: TextFilter,
    private readonly publish: Publish,
    private readonly flushMs = 50,
  ) {}

  all(): TranscriptItem[] {
    this.flush();
    const head: TranscriptItem[] = this.dropped ? [{ seq: 0, type: "notice", text: `${this.dropped} earlier items are no longer held here; the journal has the record` }] : [];
    return [...head, ...this.items];
  }

  add(item: NewItem): TranscriptItem {
    this.flush();
    this.streaming = undefined;
    const full = { ...item, seq: ++this.seq } as TranscriptItem;
    this.items.push(full);
    this.bytes += sizeOf(full);
    while (this.bytes > MAX_TOTAL_BYTES && this.items.length > 1) {
      this.bytes -= sizeOf(this.items.shift()!);
      this.dropped += 1;
    }
    this.publish(full);
    return full;
  }

  /** One event of a run, as an item (text is streamed into the current text item). */
  event(e: AgentEvent): void {
    const f = this.filter;
    switch (e.type) {
      case "text": return this.stream(e.component, e.delta);
      case "tool-call": {
        this.add({ type: "tool-call", component: label(f, e.component, 200), name: label(f, e.name, 200), args: shown(f, JSON.stringify(e.args) ?? "") });
        return;
      }
      case "tool-result": {
        this.add({ type: "tool-result", component: label(f, e.component, 200), name: label(f, e.name, 200), ok: e.ok, code: e.code ? label(f, e.code, 100) : null, target: e.target ? label(f, e.target) : null, text: shown(f, e.text) });
        return;
      }
      default: return unhandled(e, "agent event");
    }
  }

  private stream(component: string, delta: string): void {
    const s = this.streaming;
    const last = this.items[this.items.length - 1];
    if (!s || last !== s.item || s.item.component !== label(this.filter, component, 200)) {
      const item = this.add({ type: "text", component: label(this.filter, component, 200), text: shown(this.filter, "") }) as Extract<TranscriptItem, { type: "text" }>;
      this.streaming = { item, raw: "", over: 0 };
    }
    const cur = this.streaming!;
    if (Buffer.byteLength(cur.raw) + Buffer.byteLength(delta) <= MAX_RAW_BYTES) cur.raw += delta;
    else cur.over += Buffer.byteLength(delta);
    cur.timer ??= setTimeout(() => this.flush(), this.flushMs);
  }

  /** Re-filters the streamed item whole and publishes it (same seq: the browser replaces it). */
  flush(): void {
    const s = this.streaming;
    if (!s?.timer) return;
    clearTimeout(s.timer);
    s.timer = undefined;
    this.bytes -= sizeOf(s.item);
    const text = shown(this.filter, s.raw);
    s.item.text = { ...text, bytes: text.bytes + s.over };
    this.bytes += sizeOf(s.item);
    this.publish(s.item);
  }
}

function sizeOf(i: TranscriptItem): number {
  switch (i.type) {
    case "user": case "text": case "tool-result": return i.text.shownBytes + 200;
    case "tool-call": return i.args.shownBytes + 200;
    case "run": case "notice": return 200;
    default: return unhandled(i, "transcript item");
  }
}
