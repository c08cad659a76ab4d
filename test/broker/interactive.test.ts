import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { testBroker, type TestBroker } from "../support/broker.js";

// Broker.interactive(): the plan for a shell the host runs itself (the web
// terminal), with the component's grants, recorded, and stopped by the broker
// with its other workers on a policy change or close, whoever called it.

describe("interactive sandboxes", () => {
  let s: Scratch;
  let t: TestBroker;
  beforeEach(async () => {
    s = scratch();
    writeFileSync(join(s.ws, "a.txt"), "x\n");
    t = await testBroker(s.ws, { mode: "read-only", grants: { read: [s.outside] } });
  });
  afterEach(async () => {
    await t.close();
    s.cleanup();
  });

  it("gets the component's own plan: its mode, its grants, no more", async () => {
    const sb = await t.broker.interactive(["/bin/sh", "-i"], async () => {});
    expect(sb.plan.mode).toBe("read-only");
    expect(sb.plan.command).toEqual(["/bin/sh", "-i"]);
    const paths = sb.plan.mounts.map((m) => `${m.kind} ${m.path}`);
    expect(paths).toContain(`ro ${s.ws}`);
    expect(paths).toContain(`ro ${s.outside}`);
    expect(paths.some((p) => p.startsWith("rw "))).toBe(false);
    expect(sb.gate).toBeUndefined();
    sb.started(4242);
    sb.exited(0, ["write /x: refused"]);
    await new Promise((r) => setTimeout(r, 20));
    const ev = await t.events();
    expect(ev.find((e) => e.kind === "worker.spawned" && e.payload.op === "terminal")?.payload).toMatchObject({ pid: 4242, command: ["/bin/sh", "-i"] });
    expect(ev.find((e) => e.kind === "worker.exited" && e.payload.op === "terminal")?.payload).toMatchObject({ code: 0, denied: ["write /x: refused"] });
  });

  it("is stopped by a new generation before setGeneration resolves, and by close", async () => {
    const order: string[] = [];
    await t.broker.interactive(["/bin/sh"], async () => {
      await new Promise((r) => setTimeout(r, 50));
      order.push("stopped");
    });
    await t.broker.setGeneration(2, "test");
    order.push("resolved");
    expect(order).toEqual(["stopped", "resolved"]);
    let closed = 0;
    const sb = await t.broker.interactive(["/bin/sh"], async () => void closed++);
    expect(sb.generation).toBe(2);
    await t.broker.close();
    expect(closed).toBe(1);
  });
});
