import type { ApprovalCard, FeedMessage, SessionState, TranscriptItem } from "../wire.js";

/**
 * What the page shows of one live session (its transcript, its open
 * approval cards, its state), loaded over HTTP and followed on the live feed.
 * The two are separate sockets with no order between them: a message the
 * server sent after it answered a load can reach the page before that
 * answer. Each answer says the feed position it was taken at (hub.ts), so
 * an answer replaces what is shown and the messages after its position that
 * have already arrived are applied again on top of it, and a message the
 * answer already reflects is not applied twice (an older version of an item
 * never overwrites a newer one, a closed card never comes back). Pure: no
 * DOM, no network; session.tsx renders it.
 */
export type Slice = "items" | "cards" | "state";

/** Messages of this session kept for catching an answer up: far more than arrive during one load. */
const KEPT = 2000;

export class SessionFeed {
  items: TranscriptItem[] = [];
  cards: ApprovalCard[] = [];
  state: SessionState | undefined;
  private readonly at: Record<Slice, number> = { items: -1, cards: -1, state: -1 };
  private kept: FeedMessage[] = [];
  /** The position of the newest message no longer kept: an answer older than it cannot be caught up. */
  private forgotten = 0;
  private connection = 0;

  constructor(readonly session: string) {}

  /**
   * The feed (re)connected: what came while it was down is not replayed,
   * and a new server counts positions from the start, so every answer
   * taken before now is ignored and the page loads again.
   */
  connected(): void {
    this.connection++;
    this.kept = [];
    this.forgotten = 0;
    this.at.items = this.at.cards = this.at.state = -1;
  }

  /** A token for a load about to start: its answers count only while the connection it was started on lasts. */
  loading(): number {
    return this.connection;
  }

  /** A live message: true when it changed what is shown. */
  live(m: FeedMessage): boolean {
    const slice = sliceOf(m, this.session);
    if (!slice) return false;
    this.kept.push(m);
    if (this.kept.length > KEPT) this.forgotten = this.kept.shift()!.feed;
    if (m.feed <= this.at[slice]) return false;
    this.applyTo(slice, m);
    return true;
  }

  /**
   * An answer for one slice, taken at feed position `position` by a load
   * started with token `load`. "stale": it came from an older connection
   * or an older position than what is shown, and was dropped. "reload": the
   * messages since it was taken are no longer all kept, so it cannot be
   * caught up; load again.
   */
  answer(slice: "items", value: TranscriptItem[], position: number, load: number): "shown" | "stale" | "reload";
  answer(slice: "cards", value: ApprovalCard[], position: number, load: number): "shown" | "stale" | "reload";
  answer(slice: "state", value: SessionState, position: number, load: number): "shown" | "stale" | "reload";
  answer(slice: Slice, value: TranscriptItem[] | ApprovalCard[] | SessionState, position: number, load: number): "shown" | "stale" | "reload" {
    if (load !== this.connection || position < this.at[slice]) return "stale";
    if (position < this.forgotten) return "reload";
    if (slice === "items") this.items = value as TranscriptItem[];
    else if (slice === "cards") this.cards = value as ApprovalCard[];
    else this.state = value as SessionState;
    this.at[slice] = position;
    for (const m of this.kept) if (m.feed > position && sliceOf(m, this.session) === slice) this.applyTo(slice, m);
    return "shown";
  }

  private applyTo(slice: Slice, m: FeedMessage): void {
    if (slice === "items" && m.type === "transcript") {
      const i = this.items.findIndex((x) => x.seq === m.item.seq);
      this.items = i < 0 ? [...this.items, m.item] : this.items.map((x, j) => (j === i ? m.item : x));
    } else if (slice === "cards" && m.type === "approval") {
      this.cards = [...this.cards.filter((c) => c.nonce !== m.card.nonce), m.card];
    } else if (slice === "cards" && m.type === "approval-closed") {
      this.cards = this.cards.filter((c) => c.nonce !== m.nonce);
    } else if (slice === "state" && m.type === "state") {
      this.state = m.state;
    }
  }
}

function sliceOf(m: FeedMessage, session: string): Slice | undefined {
  if (!("session" in m) || m.session !== session) return undefined;
  if (m.type === "transcript") return "items";
  if (m.type === "approval" || m.type === "approval-closed") return "cards";
  if (m.type === "state") return "state";
  return undefined;
}
