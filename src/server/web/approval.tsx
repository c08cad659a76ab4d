import { useState } from "preact/hooks";
import type { ApprovalCard as Card } from "../wire.js";
import { ApiError, post, sessionPath } from "./api.js";
import { ShownText } from "./text.js";

/**
 * One open approval: the whole op the digest covers, and three answers, each
 * carrying the request's nonce, digest and generation back. The gate takes
 * the first answer from any approver (this page, another tab, the terminal)
 * and voids the rest; a void answer is shown with why.
 */
export function ApprovalCard({ session, card }: { session: string; card: Card }) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | undefined>();
  const answer = async (a: "allow" | "allow-session" | "deny") => {
    setBusy(true);
    setResult(undefined);
    try {
      await post(sessionPath(session, "/approvals"), { nonce: card.nonce, digest: card.digest, generation: card.generation, answer: a });
    } catch (e) {
      setResult(e instanceof ApiError ? e.message : String(e));
      setBusy(false);
    }
  };
  const d = card.detail;
  const what = card.op === "exec" ? "command" : "file";
  return (
    <article class="approval" aria-labelledby={`ask-${card.nonce}`} data-nonce={card.nonce}>
      <h3 id={`ask-${card.nonce}`}>
        <span class="badge ask">approve?</span> {card.component} wants to <strong>{card.op}</strong>{card.target ? <> <code>{card.target}</code></> : null}
      </h3>
      {d.kind === "exec" ? (
        <>
          <p class="label">The full command, as it will run in the sandbox:</p>
          <ShownText value={d.command} />
        </>
      ) : d.kind === "edit" ? (
        <>
          <p class="label">Edit <code>{d.path}</code>{d.replaceAll ? " (every occurrence)" : " (exactly one occurrence)"}:</p>
          <pre class="diff untrusted" aria-label="the change">
            {d.diff.map((l, i) => (
              <span key={i} class={l.sign === "-" ? "del" : "add"}>{`${l.sign} ${l.text}\n`}</span>
            ))}
          </pre>
          {d.old.bytes > d.old.shownBytes || d.new.bytes > d.new.shownBytes ? <p class="cut">The change is longer than shown ({d.old.bytes.toLocaleString()} bytes out, {d.new.bytes.toLocaleString()} in).</p> : null}
        </>
      ) : d.kind === "write" ? (
        <>
          <p class="label">Write {d.content.bytes.toLocaleString()} bytes to <code>{d.path}</code>:</p>
          <ShownText value={d.content} />
        </>
      ) : (
        <ShownText value={d.text} />
      )}
      {!card.verified && card.op !== "spec" ? <p class="error">The server could not match what is shown to the request's digest: deny it.</p> : null}
      <p class="scope"><span class="label">"For the session" would allow, without asking:</span> {card.scope}</p>
      <p class="meta">generation {card.generation} · digest <code>{card.digest.slice(0, 16)}…</code></p>
      <div class="buttons" role="group" aria-label="Answer">
        <button type="button" class="allow" disabled={busy || (!card.verified && card.op !== "spec")} onClick={() => answer("allow")}>Allow once</button>
        <button type="button" disabled={busy || (!card.verified && card.op !== "spec")} onClick={() => answer("allow-session")}>Allow this exact {what} for the session</button>
        <button type="button" class="deny" disabled={busy} onClick={() => answer("deny")}>Deny</button>
      </div>
      {result ? <p role="alert" class="error">{result}</p> : null}
    </article>
  );
}
