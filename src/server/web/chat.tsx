import { useEffect, useRef, useState } from "preact/hooks";
import type { SessionState, TranscriptItem } from "../wire.js";
import { ApiError, post, sessionPath } from "./api.js";
import { ShownText } from "./text.js";

function Item({ item }: { item: TranscriptItem }) {
  switch (item.type) {
    case "user":
      return <div class="item user"><p class="who">you{item.by !== "web" ? ` (${item.by})` : ""}</p><ShownText value={item.text} /></div>;
    case "text":
      return <div class="item model"><p class="who">{item.component === "agent" || item.component === "harness" ? "model" : `model [${item.component}]`}</p><ShownText value={item.text} /></div>;
    case "tool-call":
      return <div class="item call"><p class="who">{item.component} ▸ <strong>{item.name}</strong></p><ShownText value={item.args} /></div>;
    case "tool-result":
      return (
        <div class={`item result ${item.ok ? "ok" : "refused"}`}>
          <p class="who">{item.ok ? "✓" : "✗ refused"} {item.name}{item.code ? ` (${item.code})` : ""}{item.target ? <> · <code>{item.target}</code></> : null} <span class="muted">untrusted output</span></p>
          <ShownText value={item.text} />
        </div>
      );
    case "run":
      return item.state === "started" ? <p class="item run muted">— working —</p> : (
        <p class={`item run ${item.outcome === "done" ? "muted" : "warn"}`}>— {item.outcome}: {item.toolCalls ?? 0} tool calls, {item.refused ?? 0} refused{item.error ? ` · ${item.error}` : ""} —</p>
      );
    case "notice":
      return <p class="item notice">{item.text}</p>;
  }
}

/** The conversation, live: the model's text as it streams, every tool call and what it returned (as untrusted text). */
export function Chat({ session, items, state, live }: { session: string; items: TranscriptItem[]; state: SessionState | undefined; live: boolean }) {
  const [text, setText] = useState("");
  const [error, setError] = useState<string | undefined>();
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => end.current?.scrollIntoView({ block: "end" }), [items.length]);
  const send = async (e?: Event) => {
    e?.preventDefault();
    if (!text.trim()) return;
    setError(undefined);
    try {
      await post(sessionPath(session, "/messages"), { text });
      setText("");
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  const cancel = async () => {
    try {
      await post(sessionPath(session, "/cancel"));
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  return (
    <section class="chat" aria-label="Conversation">
      <div class="transcript" aria-live="polite">
        {items.length === 0 ? <p class="muted">Nothing yet.</p> : items.map((i) => <Item key={i.seq} item={i} />)}
        <div ref={end} />
      </div>
      {live ? (
        <form class="composer" onSubmit={send}>
          <label for="message" class="sr-only">Instruction</label>
          <textarea id="message" rows={3} value={text} placeholder="An instruction for the agent (Ctrl+Enter sends)"
            onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
            onKeyDown={(e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void send(); }} />
          <div class="buttons">
            <button type="submit" disabled={state?.running || state?.switching}>Send</button>
            <button type="button" class="deny" disabled={!state?.running} onClick={cancel}>Cancel the run</button>
          </div>
          {error ? <p role="alert" class="error">{error}</p> : null}
        </form>
      ) : <p class="muted">This session is not hosted by this server: its record is read-only.</p>}
    </section>
  );
}
