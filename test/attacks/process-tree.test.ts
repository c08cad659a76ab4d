import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { spawnVak } from "../support/vak.js";

const sleepUntil = async (cond: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (Date.now() < end && !cond()) await new Promise((r) => setTimeout(r, 50));
  return cond();
};

// The command leaves children behind in every way it can (background jobs,
// setsid, a double fork); none may outlive vak.
describe("the whole sandboxed tree dies with the run", () => {
  let s: Scratch;
  let marker: string;
  beforeEach(() => {
    s = scratch();
    marker = `${Math.floor(Math.random() * 1e6) + 1000}.${process.pid % 1000}`;
  });
  afterEach(() => {
    for (const pid of processesWith(marker)) process.kill(pid, "SIGKILL");
    s.cleanup();
  });

  const script = () => `sleep ${marker} & setsid sleep ${marker} & (sleep ${marker} &) ; trap '' INT TERM HUP; echo started; sleep ${marker}`;
  const start = (flags: string[] = []) => {
    const child = spawnVak(["exec", ...flags, "--", "/bin/sh", "-c", script()], { cwd: s.ws });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    return { child, exited, started: () => sleepUntil(() => out.includes("started") && processesWith(`sleep ${marker}`).length >= 4, 10_000) };
  };

  it("on --timeout", async () => {
    const run = start(["--timeout", "2"]);
    expect(await run.started()).toBe(true);
    expect(await run.exited).toBe(124);
    expect(await sleepUntil(() => processesWith(marker).length === 0, 5000)).toBe(true);
  });

  it("on Ctrl-C (SIGINT to vak), even when the command ignores it", async () => {
    const run = start();
    expect(await run.started()).toBe(true);
    run.child.kill("SIGINT");
    await run.exited;
    expect(await sleepUntil(() => processesWith(marker).length === 0, 5000)).toBe(true);
  });

  it("on SIGTERM to vak", async () => {
    const run = start();
    expect(await run.started()).toBe(true);
    run.child.kill("SIGTERM");
    await run.exited;
    expect(await sleepUntil(() => processesWith(marker).length === 0, 5000)).toBe(true);
  });

  it("on kill -9 of vak itself", async () => {
    const run = start();
    expect(await run.started()).toBe(true);
    run.child.kill("SIGKILL");
    await run.exited;
    expect(await sleepUntil(() => processesWith(marker).length === 0, 5000)).toBe(true);
  });
});
