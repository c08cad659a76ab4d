import { useState } from "preact/hooks";
import type { ApprovalCard as Card } from "../wire.js";
import { ApiError, post, sessionPath } from "./api.js";

/**
 * One open approval, exactly as the terminal prompt shows it: the server
 * sends the prompt's own screen (src/approvals/approval-screen.ts), so the
 * headline, the whole op (a page at a time, with what is left counted), the
 * diff against the file as it is now and the scope of "for this session" are
 * the terminal's, line for line. Three answers, each carrying the request's
 * nonce, digest and generation back. The gate takes the first answer from any
 * approver (this page, another tab, the terminal) and voids the rest; a void
 * answer is shown with why.
 */
export function ApprovalCard({ session, card }: { session: string; card: Card }) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | undefined>();
  const v = card.view;
  const [shown, setShown] = useState(Math.min(v.firstPage, v.lines.length));
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
  const left = v.total - shown;
  const leftChars = v.lines.slice(shown).reduce((n, l) => n + l.length, 0) + (v.complete ? 0 : v.chars - v.lines.reduce((n, l) => n + l.length, 0));
  const sendable = v.lines.length - shown;
  // What cannot be verified or cannot be seen here is not offered for allowing.
  const canAllow = (card.verified || card.op === "spec") && v.complete;
  const cls = (l: string) => (v.kind !== "file" ? undefined : l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : undefined);
  return (
    <article class="approval" aria-labelledby={`ask-${card.nonce}`} data-nonce={card.nonce}>
      <h3 id={`ask-${card.nonce}`}>
        <span class="badge ask">approve?</span> {card.component} {v.headline}{card.target ? <> <code>{card.target}</code></> : null}
      </h3>
      <pre class="view untrusted" aria-label="what it would do">
        {v.lines.slice(0, shown).map((l, i) => (
          <span key={i} class={cls(l)}>{`${l}\n`}</span>
        ))}
      </pre>
      {left > 0 ? (
        <p class="cut more">
          {`… ${left} more line${left === 1 ? "" : "s"} of it not shown yet (${leftChars} characters)`}
          {sendable > 0 ? <>{": "}<button type="button" class="more" onClick={() => setShown(Math.min(v.lines.length, shown + v.page))}>show the next {Math.min(v.page, sendable)}</button></> : null}
        </p>
      ) : null}
      {!v.complete ? <p class="error">This request is longer than the browser is sent ({v.total.toLocaleString()} lines, {v.chars.toLocaleString()} characters): answer it in the terminal, or deny it.</p> : null}
      {!card.verified && card.op !== "spec" ? <p class="error">The server could not match what is shown to the request's digest: deny it.</p> : null}
      <p class="scope"><span class="label">[a] would allow, without asking:</span> {card.scope}</p>
      <p class="meta">generation {card.generation} · digest <code>{card.digest.slice(0, 16)}…</code></p>
      <div class="buttons" role="group" aria-label="Answer">
        <button type="button" class="allow" disabled={busy || !canAllow} onClick={() => answer("allow")}>Allow once</button>
        <button type="button" disabled={busy || !canAllow} onClick={() => answer("allow-session")}>Allow for the session</button>
        <button type="button" class="deny" disabled={busy} onClick={() => answer("deny")}>Deny</button>
      </div>
      {result ? <p role="alert" class="error">{result}</p> : null}
    </article>
  );
}
