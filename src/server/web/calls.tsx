import { useState } from "preact/hooks";
import type { EventView, VerifyView } from "../wire.js";
import { time } from "./text.js";

/** Every call each component made, from the journal, refusals marked; the chain's verification beside it. */
export function Calls({ events, verify, more, onMore }: { events: EventView[]; verify: VerifyView | undefined; more: boolean; onMore: () => void }) {
  const [component, setComponent] = useState("all");
  const [onlyRefusals, setOnlyRefusals] = useState(false);
  const components = [...new Set(events.map((e) => e.component))];
  const shown = events.filter((e) => (component === "all" || e.component === component) && (!onlyRefusals || e.refusal));
  return (
    <section class="calls" aria-label="Every call">
      <div class="row">
        <Verify v={verify} />
        <label for="calls-component">Component</label>
        <select id="calls-component" value={component} onChange={(e) => setComponent((e.target as HTMLSelectElement).value)}>
          <option value="all">all</option>
          {components.map((c) => <option key={c} value={c}>{c}</option>)}
        </select>
        <label><input type="checkbox" checked={onlyRefusals} onChange={(e) => setOnlyRefusals((e.target as HTMLInputElement).checked)} /> refusals only</label>
      </div>
      <table>
        <caption class="sr-only">Journal events of this session</caption>
        <thead><tr><th scope="col">#</th><th scope="col">time</th><th scope="col">component</th><th scope="col">event</th><th scope="col">what</th></tr></thead>
        <tbody>
          {shown.map((e) => (
            <tr key={e.seq} class={e.refusal ? "refusal" : ""}>
              <td>{e.sessionSeq}</td>
              <td title={time(e.time)}>{new Date(e.time).toLocaleTimeString()}</td>
              <td>{e.component}{e.generation ? <span class="muted"> @g{e.generation}</span> : null}</td>
              <td>{e.refusal ? <span class="badge deny">refused</span> : null} {e.kind}</td>
              <td><details><summary class="untrusted">{e.line}</summary><pre class="untrusted">{JSON.stringify(e.payload, null, 2)}</pre></details></td>
            </tr>
          ))}
        </tbody>
      </table>
      {shown.length === 0 ? <p class="muted">No events{onlyRefusals ? " refused" : ""}.</p> : null}
      {more ? <button type="button" onClick={onMore}>Load more</button> : null}
    </section>
  );
}

export function Verify({ v }: { v: VerifyView | undefined }) {
  if (!v) return <span class="badge">verifying…</span>;
  return v.ok
    ? <span class="badge ok" title={`checked ${time(v.checkedAt)}`}>journal verifies: {v.events} events</span>
    : <span class="badge deny" role="alert">journal BROKEN: {v.problem}</span>;
}
