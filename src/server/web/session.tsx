import { useEffect, useMemo, useState } from "preact/hooks";
import type { ApprovalCard as Card, EventView, ReachView, SessionState, SessionSummary, TranscriptItem, VerifyView } from "../wire.js";
import { ApiError, get, post, sessionPath } from "./api.js";
import { ApprovalCard } from "./approval.js";
import { Calls } from "./calls.js";
import { Chat } from "./chat.js";
import { feed } from "./feed.js";
import { Reach } from "./reach.js";
import { SessionFeed } from "./session-feed.js";
import { time } from "./text.js";

type Tab = "chat" | "reach" | "calls";

/**
 * The mode switch: it revokes exactly as `/mode` does in the terminal. The
 * new mode is shown only when the server answers, which it does once every
 * approval is denied, every run cancelled and every worker of the old
 * generation stopped; until then it says it is switching.
 */
function ModeSwitch({ session, state, onState }: { session: string; state: SessionState; onState: (s: SessionState, feed: number) => void }) {
  const [want, setWant] = useState(state.mode ?? "workspace-write");
  const [error, setError] = useState<string | undefined>();
  useEffect(() => setWant(state.mode ?? "workspace-write"), [state.mode]);
  if (!state.canSwitchMode) return <span class="muted">mode set by the workload spec</span>;
  const apply = async () => {
    setError(undefined);
    try {
      const r = await post<{ state: SessionState; feed: number }>(sessionPath(session, "/mode"), { mode: want });
      onState(r.state, r.feed);
    } catch (e) {
      setError(e instanceof ApiError ? e.message : String(e));
    }
  };
  return (
    <span class="mode">
      <label for="mode-select">Mode</label>
      <select id="mode-select" value={want} disabled={state.switching} onChange={(e) => setWant((e.target as HTMLSelectElement).value as typeof want)}>
        <option value="workspace-write">workspace-write</option>
        <option value="read-only">read-only</option>
      </select>
      <button type="button" disabled={state.switching || want === state.mode} onClick={apply}>{state.switching ? "Switching… (revoking)" : "Switch"}</button>
      {error ? <span role="alert" class="error">{error}</span> : null}
    </span>
  );
}

export function SessionView({ id, tab, summary }: { id: string; tab: Tab; summary: SessionSummary | undefined }) {
  // The transcript, the cards and the state: loaded and followed in either order (session-feed.ts).
  const shown = useMemo(() => new SessionFeed(id), [id]);
  const [, setShownVersion] = useState(0);
  const redraw = () => setShownVersion((v) => v + 1);
  const items = shown.items;
  const cards = shown.cards;
  const state = shown.state ?? summary?.state;
  const [live, setLive] = useState(false);
  const [reach, setReach] = useState<ReachView | undefined>();
  const [events, setEvents] = useState<EventView[]>([]);
  const [more, setMore] = useState(false);
  const [verify, setVerify] = useState<VerifyView | undefined>();
  const [error, setError] = useState<string | undefined>();

  const loadEvents = async (after: number, replace: boolean) => {
    const r = await get<{ events: EventView[]; next: number | null }>(`${sessionPath(id, "/events")}?after=${after}&limit=200`);
    // Journal events never change: a complete answer keeps the newer ones the feed brought while it was on its way.
    const last = r.events[r.events.length - 1]?.seq ?? 0;
    setEvents((old) => (replace ? [...r.events, ...(r.next === null ? old.filter((e) => e.seq > last) : [])] : [...old, ...r.events]));
    setMore(r.next !== null);
  };
  const loadVerify = () => get<VerifyView>("journal/verify").then(setVerify, () => undefined);
  const loadReach = () => get<ReachView>(sessionPath(id, "/reach")).then(setReach, () => undefined);
  const show = (r: "shown" | "stale" | "reload") => (r === "reload" ? void load() : r === "shown" && redraw());
  const load = async (): Promise<void> => {
    setError(undefined);
    const token = shown.loading();
    try {
      const m = await get<{ live: boolean; items: TranscriptItem[]; feed?: number }>(sessionPath(id, "/messages"));
      // A session no longer live has no feed position: its transcript comes from the journal and no longer changes.
      show(shown.answer("items", m.items, m.feed ?? Number.MAX_SAFE_INTEGER, token));
      setLive(m.live);
      if (m.live) {
        const a = await get<{ approvals: Card[]; feed: number }>(sessionPath(id, "/approvals"));
        show(shown.answer("cards", a.approvals, a.feed, token));
        const s = await get<SessionSummary & { feed: number }>(sessionPath(id));
        if (s.state) show(shown.answer("state", s.state, s.feed, token));
        void loadReach();
      }
      await loadEvents(0, true);
      void loadVerify();
    } catch (e) {
      setError(e instanceof ApiError ? e.message : String(e));
    }
  };

  useEffect(() => {
    setEvents([]);
    setReach(undefined);
    void load();
    return feed.on((m) => {
      if (m.type === "connected") {
        shown.connected();
        return void load();
      }
      if (m.type === "events") {
        const mine = m.events.filter((e) => e.session === id);
        if (mine.length) {
          setEvents((old) => {
            const seen = new Set(old.map((e) => e.seq));
            return [...old, ...mine.filter((e) => !seen.has(e.seq))];
          });
          void loadVerify();
          if (mine.some((e) => e.kind === "policy.generation")) void loadReach();
        }
        return;
      }
      if (shown.live(m)) redraw();
    });
  }, [id]);

  const tabs: [Tab, string][] = [["chat", "Conversation"], ["reach", "What it can reach"], ["calls", "Every call"]];
  return (
    <section class="session" aria-labelledby="session-title">
      <header>
        <h2 id="session-title">{summary?.title ?? id}</h2>
        <p class="meta">
          {summary?.kind} · <code>{id}</code> · started {time(summary?.started)}
          {state ? <> · generation <strong data-testid="generation">{state.generation}</strong> · mode <strong data-testid="mode">{state.mode ?? "from the spec"}</strong>{state.running ? <> · <span class="badge live">running</span></> : null}</> : null}
        </p>
        {live && state ? (
          <div class="row">
            <ModeSwitch session={id} state={state} onState={(st, at) => show(shown.answer("state", st, at, shown.loading()))} />
            {state.terminal ? <a href={`/terminal.html#${id}`} target="_blank" rel="noopener noreferrer">Open a terminal in its sandbox</a> : null}
          </div>
        ) : null}
      </header>
      {error ? <p role="alert" class="error">{error}</p> : null}
      {cards.length ? (
        <div class="approvals" role="region" aria-live="assertive" aria-label="Waiting for your approval">
          {cards.map((c) => <ApprovalCard key={c.nonce} session={id} card={c} />)}
        </div>
      ) : null}
      <div role="tablist" aria-label="Views" class="tabs">
        {tabs.map(([t, label]) => (
          <a key={t} role="tab" aria-selected={tab === t} href={`#/s/${id}${t === "chat" ? "" : `/${t}`}`}>{label}</a>
        ))}
      </div>
      <div role="tabpanel">
        {tab === "chat" ? <Chat session={id} items={items} state={state} live={live} />
          : tab === "reach" ? (live ? <Reach view={reach} /> : <p class="muted">This session is not live; the grants it had are in its policy.generation events (Every call).</p>)
          : <Calls events={events} verify={verify} more={more} onMore={() => void loadEvents(events[events.length - 1]?.sessionSeq ?? 0, false)} />}
      </div>
    </section>
  );
}
