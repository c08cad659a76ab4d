import type { ComponentReach, ReachView } from "../wire.js";

const list = (xs: string[], none = "none") => (xs.length ? <ul>{xs.map((x) => <li key={x}><code>{x}</code></li>)}</ul> : <p class="muted">{none}</p>);

function Component({ c }: { c: ComponentReach }) {
  return (
    <article class="component" aria-labelledby={`reach-${c.component}`}>
      <h3 id={`reach-${c.component}`}>{c.component}</h3>
      <dl>
        <dt>Tools</dt>
        <dd>{list(c.tools, c.component === "harness" ? "none of its own: it can only ask a component" : "none")}</dd>
        <dt>Files</dt>
        <dd>
          {c.files.length ? <ul>{c.files.map((f) => <li key={f.path + f.access}><span class={`badge ${f.access}`}>{f.access === "write" ? "read-write" : "read-only"}</span> <code>{f.path}</code></li>)}</ul> : <p class="muted">none</p>}
          {c.denied.length ? <><p class="label">Never, even inside a grant:</p><ul>{c.denied.map((f) => <li key={f.path + f.access}><span class="badge deny">no {f.access}</span> <code>{f.path}</code></li>)}</ul></> : null}
          {c.protected.length ? <details><summary>Read-only at any depth inside writable grants ({c.protected.length} names)</summary>{list(c.protected)}</details> : null}
        </dd>
        <dt>Network</dt>
        <dd>{list(c.network, "none: no network at all")}{c.networkDenied.length ? <><p class="label">Denied:</p>{list(c.networkDenied)}</> : null}</dd>
        <dt>Environment</dt>
        <dd>{c.env.length ? list(c.env) : <p class="muted">only the sandbox's own (PATH, HOME, TERM, locale): no host variables</p>}</dd>
        <dt>Secrets (by name; values never leave the host)</dt>
        <dd>{c.secrets.length ? <ul>{c.secrets.map((s) => <li key={s.ref}><code>{s.ref}</code> → {s.to}</li>)}</ul> : <p class="muted">none</p>}</dd>
        <dt>Stores</dt>
        <dd>{list(c.stores)}</dd>
      </dl>
    </article>
  );
}

/** What this session can reach, per component: the grants, which are the ceiling; approvals only ask inside them. */
export function Reach({ view }: { view: ReachView | undefined }) {
  if (!view) return <p class="muted">Loading…</p>;
  return (
    <section class="reach" aria-label="What this session can reach">
      <p>Mode <strong>{view.mode ?? "set by the spec"}</strong> · policy generation <strong>{view.generation}</strong> · workspace <code>{view.workspace}</code></p>
      {view.components.map((c) => <Component key={c.component} c={c} />)}
    </section>
  );
}
