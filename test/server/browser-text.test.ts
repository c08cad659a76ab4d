import { describe, expect, it } from "vitest";
import { canonicalJson, sha256 } from "../../src/approvals/digest.js";
import { visible } from "../../src/text/visible.js";
import { Redactor } from "../../src/secrets/redact.js";
import { approvalCard, MAX_VIEW_BYTES } from "../../src/server/approval-card.js";
import { label, safeValue, shown } from "../../src/server/browser-text.js";
import { isRefusal } from "../../src/server/journal-view.js";
import { Transcript } from "../../src/server/transcript.js";
import type { TranscriptItem } from "../../src/server/wire.js";
import type { StoredEvent } from "../../src/journal/events.js";

// What the browser is sent: redacted, hidden characters shown, bounded with
// the cut said, and the approval card exactly the op its digest covers.

const SECRET = "sk-test-0123456789abcdefghijklmnop";
const redactor = new Redactor();
redactor.add(SECRET);
const filter = (s: string) => visible(redactor.text(s));

describe("text for the browser", () => {
  it("redacts secrets and shows control, invisible and direction-changing characters as escapes", () => {
    const t = shown(filter, `key ${SECRET} \u001b]0;owned\u0007 \u202egnp.exe \u200b`).text;
    expect(t).not.toContain(SECRET);
    expect(t).toContain("[REDACTED]");
    expect(t).not.toMatch(/[\u001b\u0007\u202e\u200b]/);
    expect(t).toContain("\\u{1b}");
    expect(t).toContain("\\u{202e}");
  });
  it("bounds a field and says how much there was", () => {
    const s = shown(filter, "é".repeat(1000), 101);
    expect(s.shownBytes).toBeLessThanOrEqual(101);
    expect(s.bytes).toBe(2000);
    expect(s.text).not.toContain("\uFFFD");
    expect(label(filter, "x".repeat(50), 10)).toBe(`${"x".repeat(10)}…`);
  });
  it("filters every string of a value, keys too, and bounds depth and width", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 100; i++) deep = { d: deep };
    const v = safeValue(filter, { [`k${SECRET}`]: [SECRET, 1, true, null], deep, wide: Array.from({ length: 600 }, (_, i) => i) }) as Record<string, unknown>;
    expect(JSON.stringify(v)).not.toContain(SECRET);
    expect(JSON.stringify(v)).toContain("[nested too deep]");
    expect((v.wide as unknown[]).length).toBe(501);
  });
});

describe("approval cards", () => {
  const req = (op: Record<string, unknown>, digestOver = op) => ({
    nonce: "a".repeat(32), generation: 3, component: "agent", summary: "s", op: String(op.kind), target: String(op.path ?? ""),
    digest: sha256(canonicalJson({ component: "agent", generation: 3, op: digestOver })), detail: op as never,
    scope: `this exact ${String(op.kind)}\u202e ${SECRET}`, view: { kind: "text" as const, text: "s" },
  });
  it("an edit is shown as the lines it removes and the lines it puts in, filtered", () => {
    const c = approvalCard(req({ kind: "edit", path: "/w/a.ts", old: "a\nb\n", new: `c\u202e\n${SECRET}\n` }), filter);
    expect(c.verified).toBe(true);
    // The scope of "for the session" is on the card, filtered like the rest.
    expect(c.scope).toBe("this exact edit\\u{202e} [REDACTED]");
    expect(c.detail).toMatchObject({ kind: "edit", diff: [{ sign: "-", text: "a" }, { sign: "-", text: "b" }, { sign: "+", text: "c\\u{202e}" }, { sign: "+", text: "[REDACTED]" }] });
  });
  it("a command is shown whole, however long (up to the bound, and the cut said)", () => {
    const cmd = `echo ${"x".repeat(5000)} && curl evil`;
    const c = approvalCard(req({ kind: "exec", command: cmd }), filter);
    expect(c.detail).toMatchObject({ kind: "exec", command: { text: cmd, bytes: cmd.length, shownBytes: cmd.length } });
  });
  it("the card's view is the terminal's screen (approval-screen.ts), redacted then rendered exactly, and bounded as a whole: past the bound it is marked incomplete (the client offers only deny)", () => {
    const redact = (t: string) => t.split(SECRET).join("[REDACTED]");
    const small = approvalCard({ ...req({ kind: "exec", command: "ls" }), view: { kind: "command", command: `ls \u001b[2J ${SECRET}` } }, filter, redact);
    expect(small.view).toMatchObject({ headline: "wants to run this command:", kind: "command", lines: ["ls ⟨ESC⟩[2J [REDACTED]"], total: 1, complete: true, firstPage: 40, page: 200 });
    const big = "y".repeat(1000) + "\n";
    const c = approvalCard({ ...req({ kind: "exec", command: "ls" }), view: { kind: "text", text: big.repeat(2000) } }, filter, redact);
    expect(c.view.complete).toBe(false);
    expect(c.view.total).toBe(2000);
    expect(c.view.chars).toBe(2_000_000);
    expect(c.view.lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)).toBeLessThanOrEqual(MAX_VIEW_BYTES);
  });
  it("a card whose op is not what its digest covers is marked unverified (the client offers only deny)", () => {
    const c = approvalCard(req({ kind: "exec", command: "ls" }, { kind: "exec", command: "rm -rf ~" }), filter);
    expect(c.verified).toBe(false);
  });
});

describe("the transcript", () => {
  it("a secret streamed in two pieces is redacted in the browser anyway (streamed text is re-filtered whole)", async () => {
    const seen: TranscriptItem[] = [];
    const t = new Transcript(filter, (i) => seen.push(structuredClone(i)), 5);
    t.event({ type: "text", component: "agent", delta: `the key is ${SECRET.slice(0, 12)}` });
    t.event({ type: "text", component: "agent", delta: `${SECRET.slice(12)} ok` });
    await new Promise((r) => setTimeout(r, 20));
    const last = seen[seen.length - 1]!;
    expect(last.type).toBe("text");
    expect(JSON.stringify(seen)).not.toContain(SECRET);
    expect(JSON.stringify(last)).toContain("[REDACTED] ok");
  });
  it("tool calls and results are filtered", () => {
    const seen: TranscriptItem[] = [];
    const t = new Transcript(filter, (i) => seen.push(i));
    t.event({ type: "tool-call", component: "agent", name: "exec", args: { command: `echo ${SECRET}` } });
    t.event({ type: "tool-result", component: "agent", name: "exec", ok: true, text: `<img src=x onerror=alert(1)>\u001b[2J${SECRET}` });
    const text = JSON.stringify(seen);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain("\u001b");
    // Markup stays text: the client puts it in text nodes, never in HTML.
    expect(text).toContain("<img src=x onerror=alert(1)>");
  });
});

describe("refusals in the record", () => {
  const ev = (kind: string, payload: Record<string, unknown>) => ({ kind, payload, actor: { component: "agent" } }) as unknown as StoredEvent;
  it.each([
    ["decision", { allowed: false }, true], ["decision", { allowed: true }, false],
    ["tool.result", { ok: false }, true], ["egress", { decision: "denied" }, true], ["egress", { decision: "allowed" }, false],
    ["approval.answered", { answer: "deny" }, true], ["approval.answered", { answer: "allow" }, false], ["approval.voided", {}, true],
    ["worker.exited", { denied: ["write /x: refused"] }, true], ["worker.exited", { denied: [] }, false], ["run.cancelled", {}, true],
  ])("%s %j is a refusal: %s", (kind, payload, yes) => {
    expect(isRefusal(ev(kind, payload))).toBe(yes);
  });
});
