import { describe, expect, it } from "vitest";
import { SessionFeed } from "../../src/server/web/session-feed.js";
import type { ApprovalCard, FeedMessage, SessionState, TranscriptItem } from "../../src/server/wire.js";

// The page's merge of loads and live messages (session-feed.ts), as a table
// of arrival orders; web-feed-race.test.ts tries the same orders in a browser.

const item = (seq: number, text: string): TranscriptItem => ({ seq, type: "notice", text });
const card = (nonce: string) => ({ nonce }) as ApprovalCard;
const st = (generation: number): SessionState => ({ mode: "workspace-write", generation, running: false, switching: false, pending: 0, canSwitchMode: true, terminal: false });
const tr = (feed: number, i: TranscriptItem, session = "s"): FeedMessage => ({ type: "transcript", session, item: i, feed });

describe("SessionFeed", () => {
  it("a message sent after the answer was taken but arriving before it is applied on top of it", () => {
    const f = new SessionFeed("s");
    const t = f.loading();
    f.live(tr(6, item(2, "new")));
    expect(f.answer("items", [item(1, "old")], 5, t)).toBe("shown");
    expect(f.items.map((i) => i.seq)).toEqual([1, 2]);
  });

  it("a message the answer already reflects, arriving after it, is not applied again (no older version of an item)", () => {
    const f = new SessionFeed("s");
    const t = f.loading();
    f.answer("items", [item(1, "v2")], 7, t);
    expect(f.live(tr(6, item(1, "v1")))).toBe(false);
    expect(f.items[0]!.type === "notice" && f.items[0]!.text).toBe("v2");
    expect(f.live(tr(8, item(1, "v3")))).toBe(true);
    expect(f.items[0]!.type === "notice" && f.items[0]!.text).toBe("v3");
  });

  it("a closed card never comes back from an older answer, and an older answer never replaces a newer one", () => {
    const f = new SessionFeed("s");
    const t = f.loading();
    f.live({ type: "approval-closed", session: "s", nonce: "a", answer: "deny", by: "x", feed: 4 });
    f.answer("cards", [card("a")], 3, t);
    expect(f.cards).toEqual([]);
    f.answer("state", st(2), 9, t);
    expect(f.answer("state", st(1), 8, t)).toBe("stale");
    expect(f.state!.generation).toBe(2);
  });

  it("after a reconnect, answers of loads started before it are dropped, and positions count again from the start", () => {
    const f = new SessionFeed("s");
    const old = f.loading();
    f.answer("items", [item(1, "a")], 500, old);
    f.connected();
    expect(f.answer("items", [item(1, "b")], 900, old)).toBe("stale");
    expect(f.answer("items", [item(1, "c")], 2, f.loading())).toBe("shown");
    expect(f.live(tr(3, item(2, "d")))).toBe(true);
  });

  it("another session's messages change nothing; an answer whose catch-up was forgotten asks for a reload", () => {
    const f = new SessionFeed("s");
    expect(f.live(tr(1, item(1, "x"), "other"))).toBe(false);
    const t = f.loading();
    for (let i = 2; i < 2100; i++) f.live(tr(i, item(i, "x")));
    expect(f.answer("items", [], 10, t)).toBe("reload");
    expect(f.answer("items", [], 2099, t)).toBe("shown");
  });
});
