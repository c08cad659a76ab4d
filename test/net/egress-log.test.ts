import { describe, expect, it } from "vitest";
import { type EgressEvent, EgressLog } from "../../src/net/egress-log.js";

const refusal = (i: number, code = "no-grant"): EgressEvent => ({
  time: new Date().toISOString(), component: "exec", generation: 1, method: "GET",
  asked: `http://x${i}.test/${"a".repeat(15_000)}`, decision: "denied", code, reason: `no grant names x${i}.test:80`, status: 403,
});

describe("the egress record under a flood", () => {
  it("cuts what a client wrote to a few hundred characters and says how much was cut", () => {
    const out: EgressEvent[] = [];
    new EgressLog((e) => out.push(e)).record(refusal(1));
    expect(out[0]!.asked.length).toBeLessThan(400);
    expect(out[0]!.asked).toMatch(/…\[\d+ more characters\]$/);
  });

  it("records the first refusals of a kind one by one and counts the rest in summaries", () => {
    const out: EgressEvent[] = [];
    const log = new EgressLog((e) => out.push(e), { perKind: 10, summaryMs: 60_000 });
    for (let i = 0; i < 1000; i++) log.record(refusal(i));
    for (let i = 0; i < 3; i++) log.record(refusal(i, "host-header"));
    expect(out).toHaveLength(13);
    log.flush();
    expect(out).toHaveLength(14);
    expect(out.at(-1)).toMatchObject({ code: "no-grant", count: 990, decision: "denied" });
    expect(out.at(-1)!.reason).toContain("990 more refusal(s) of this kind");
    expect(out.reduce((n, e) => n + (e.count ?? 1), 0)).toBe(1003);
  });

  it("never folds allowed requests", () => {
    const out: EgressEvent[] = [];
    const log = new EgressLog((e) => out.push(e), { perKind: 1, summaryMs: 60_000 });
    for (let i = 0; i < 5; i++) log.record({ ...refusal(i), decision: "allowed", code: undefined });
    expect(out).toHaveLength(5);
  });
});
