import { describe, expect, it } from "vitest";
import type { StoredEvent } from "../../src/journal/events.js";
import { transcript } from "../../src/cli/journal-transcript.js";
import { Redactor } from "../../src/secrets/redact.js";

// The transcript cuts each hostile value to a bound; it redacts the value whole first. Cut first, a credential
// across the cut kept only its first characters, which no longer have its shape, and showed them.
const event = (kind: StoredEvent["kind"], payload: Record<string, unknown>): StoredEvent =>
  ({ kind, actor: { component: "agent" }, generation: 0, payload, seq: 1, session: "s", sessionSeq: 1, time: "2026-12-07T06:00:00.000Z", prevHash: "", hash: "" }) as StoredEvent;

describe("journal transcript: values are redacted before they are cut", () => {
  const token = `ghp_${"A1b2C3d4E5".repeat(4)}`;
  const redact = (s: string) => new Redactor().text(s);

  it("a credential across the cut of the model's text is not shown in part", () => {
    const text = `${"x".repeat(1990)} ${token} and more`;
    const out = transcript([event("message", { role: "assistant", text })], redact).join("\n");
    expect(out).not.toContain("ghp_");
    expect(out).toContain("characters; `vak journal export` has them all");
  });

  it("a credential across the cut of a tool call's arguments or a refusal's reason is not shown in part", () => {
    const args = { path: `${"p".repeat(280)} ${token}` };
    const out = transcript([
      event("message", { role: "assistant", text: "", toolCalls: [{ name: "read_file", args }] }),
      event("decision", { allowed: false, op: "read", path: "/x", reason: `${"r".repeat(390)} ${token}` }),
      event("message", { role: "tool", ok: false }),
    ], redact).join("\n");
    expect(out).toContain("▸ read_file");
    expect(out).toContain("REFUSED read");
    expect(out).not.toContain("ghp_");
  });
});
