import { useState } from "preact/hooks";
import type { SessionSummary } from "../wire.js";
import { ApiError, post } from "./api.js";
import { time } from "./text.js";

const kindLabel = (k: string) => (k.startsWith("workload:") ? "workload" : k);

/** Every session: the ones this server hosts (live) first, then the journal's (ended sessions, vak exec runs, other processes'). */
export function SessionList({ sessions, current }: { sessions: SessionSummary[]; current: string | undefined }) {
  const [filter, setFilter] = useState("all");
  const shown = sessions.filter((s) => filter === "all" || (filter === "live" ? s.live : kindLabel(s.kind) === filter));
  return (
    <nav class="sessions" aria-label="Sessions">
      <div class="row">
        <h2>Sessions</h2>
        <label class="sr-only" for="session-filter">Show</label>
        <select id="session-filter" value={filter} onChange={(e) => setFilter((e.target as HTMLSelectElement).value)}>
          <option value="all">all</option>
          <option value="live">live</option>
          <option value="agent">agent</option>
          <option value="workload">workload</option>
          <option value="exec">vak exec</option>
        </select>
      </div>
      <a class="new" href="#/">+ New session</a>
      <ul>
        {shown.map((s) => (
          <li key={s.id} class={s.id === current ? "current" : ""}>
            <a href={`#/s/${s.id}`} aria-current={s.id === current ? "page" : undefined}>
              <span class={`badge ${s.live ? "live" : ""}`}>{s.live ? (s.state?.running ? "running" : "live") : kindLabel(s.kind)}</span>
              {s.state && s.state.pending > 0 ? <span class="badge ask">{s.state.pending} to approve</span> : null}
              <span class="title">{s.title}</span>
              <span class="meta">{time(s.started)} · {s.events} events{s.outcome ? ` · ${s.outcome}` : ""}</span>
            </a>
          </li>
        ))}
      </ul>
      {shown.length === 0 ? <p class="muted">No sessions yet.</p> : null}
    </nav>
  );
}

/** A new agent session in the workspace `vak serve` runs in, with the grants it was started with. */
export function NewSession({ info, onCreated }: { info: Record<string, unknown>; onCreated: (id: string) => void }) {
  const [kind, setKind] = useState<"agent" | "workload">("agent");
  const [mode, setMode] = useState("workspace-write");
  const [model, setModel] = useState(typeof info.model === "string" ? info.model : "");
  const [dir, setDir] = useState("");
  const [prompt, setPrompt] = useState("");
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const body = kind === "agent"
        ? { kind, mode, ...(model ? { model } : {}), ...(dir ? { workspace: dir } : {}), ...(prompt ? { prompt } : {}) }
        : { kind, mode, spec: dir, ...(model ? { model } : {}), ...(prompt ? { prompt } : {}) };
      const r = await post<{ id: string }>("sessions", body);
      onCreated(r.id);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="new-session" aria-labelledby="new-title">
      <h2 id="new-title">New session</h2>
      <p class="muted">In {String(info.workspace ?? "the workspace")}, with the grants <code>vak serve</code> was started with. The mode is the ceiling; writes and commands ask first.</p>
      <form onSubmit={submit}>
        <fieldset>
          <legend>Kind</legend>
          <label><input type="radio" name="kind" checked={kind === "agent"} onChange={() => setKind("agent")} /> agent</label>
          <label><input type="radio" name="kind" checked={kind === "workload"} onChange={() => setKind("workload")} /> workload spec</label>
        </fieldset>
        <label for="new-mode">Mode</label>
        <select id="new-mode" value={mode} onChange={(e) => setMode((e.target as HTMLSelectElement).value)}>
          <option value="workspace-write">workspace-write</option>
          <option value="read-only">read-only</option>
        </select>
        <label for="new-model">Model</label>
        <input id="new-model" value={model} placeholder="provider:model" onInput={(e) => setModel((e.target as HTMLInputElement).value)} />
        <label for="new-dir">{kind === "agent" ? "Directory (inside the workspace; empty: the workspace)" : "Spec file (inside the workspace)"}</label>
        <input id="new-dir" value={dir} required={kind === "workload"} onInput={(e) => setDir((e.target as HTMLInputElement).value)} />
        <label for="new-prompt">First instruction (optional)</label>
        <textarea id="new-prompt" rows={4} value={prompt} onInput={(e) => setPrompt((e.target as HTMLTextAreaElement).value)} />
        <button type="submit" disabled={busy}>{busy ? "Starting…" : "Start session"}</button>
      </form>
      {error ? <p role="alert" class="error">{error}</p> : null}
    </section>
  );
}
