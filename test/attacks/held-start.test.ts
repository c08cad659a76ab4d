import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decide } from "../../src/policy/plan.js";
import { hostFacts } from "../../src/sandbox/host.js";
import { launchHeld, type HeldSandbox, type Spawner } from "../../src/sandbox/launcher.js";
import { loadResident } from "../../src/resident/native.js";
import { scratch, type Scratch } from "../support/fs.js";

// vak exec builds the sandbox while the journal commits the run's start, and the launcher holds the command before
// its exec until told the record is durable (--go-fd). These try the wait: the command must not have run before
// the word, must never run without it, and must already be inside the whole sandbox while it waits.

let s: Scratch;
beforeEach(() => {
  s = scratch();
});
afterEach(() => s.cleanup());

/** A directory outside the workspace (reduced mode's TMPDIR and HOME). */
const dir = (name: string) => {
  const d = join(s.outside, name);
  mkdirSync(d, { recursive: true });
  return d;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Node's spawn (in-process vak exec), and the resident host's posix_spawn (its addon): the same wait either way.
const SPAWNERS: [string, Spawner | undefined][] = [["node's spawn", undefined], ["the host's posix_spawn", loadResident()]];
let spawner: Spawner | undefined;

function held(script: string, sandbox: "namespaces" | "reduced" = "namespaces"): HeldSandbox {
  const plan = decide(
    { mode: "workspace-write", sandbox, workspace: s.ws, grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: { timeoutMs: 30_000 }, command: ["/bin/sh", "-c", script],
      scratch: sandbox === "reduced" ? { tmp: dir("tmp"), home: dir("home") } : undefined },
    hostFacts(),
  );
  if (!spawner) return launchHeld(plan, ["ignore", "ignore", "ignore"]);
  const nul = openSync("/dev/null", "r+");
  try {
    return launchHeld(plan, [nul, nul, nul], undefined, { spawner });
  } finally {
    closeSync(nul);
  }
}

/** The held payload: the launcher's process named vak-launcher whose parent is the sandbox's init (or, reduced, the monitor). */
function heldPayload(monitor: number): number | undefined {
  const children = (pid: number) =>
    readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .map(Number)
      .filter((p) => {
        try {
          const st = readFileSync(`/proc/${p}/stat`, "utf8");
          return Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]) === pid;
        } catch {
          return false;
        }
      });
  // monitor → init → {resolver, guard, payload} (reduced: monitor → payload); the payload is the launcher's own
  // process (not yet exec'd, not the named guard or resolver) that holds a seccomp filter.
  const payload = (p: number) => {
    try {
      return readFileSync(`/proc/${p}/comm`, "utf8").trim() === "vak-launcher" && /^Seccomp:\s+2$/m.test(readFileSync(`/proc/${p}/status`, "utf8"));
    } catch {
      return false;
    }
  };
  for (const c of children(monitor)) {
    if (payload(c)) return c;
    for (const g of children(c)) if (payload(g)) return g;
  }
  return undefined;
}

async function until<T>(what: string, f: () => T | undefined, ms = 10_000): Promise<T> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) {
    const v = f();
    if (v !== undefined) return v;
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe.each(SPAWNERS)("a held command (the launcher's --go-fd), started by %s", (_, sp) => {
  beforeEach(() => {
    spawner = sp;
  });
  for (const sandbox of ["namespaces", "reduced"] as const) {
    it(`does not run before the word, and runs once it comes (${sandbox})`, async () => {
      const sb = held("touch ran", sandbox);
      const payload = await until("the held payload", () => heldPayload(sb.pid));
      await sleep(300);
      expect(existsSync(join(s.ws, "ran"))).toBe(false);
      expect(readFileSync(`/proc/${payload}/status`, "utf8")).toMatch(/^NoNewPrivs:\s+1$/m);
      sb.start();
      const r = await sb.result;
      expect(r.code).toBe(0);
      expect(existsSync(join(s.ws, "ran"))).toBe(true);
    });
  }

  it("waits already confined: its seccomp filter, no_new_privs, no capabilities, in the sandbox's namespaces", async () => {
    const sb = held("true");
    const payload = await until("the held payload", () => heldPayload(sb.pid));
    const status = readFileSync(`/proc/${payload}/status`, "utf8");
    expect(status).toMatch(/^Seccomp:\s+2$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(status).toMatch(/^CapEff:\s+0+$/m);
    for (const ns of ["mnt", "net", "user", "pid"]) expect(readlinkSync(`/proc/${payload}/ns/${ns}`)).not.toBe(readlinkSync(`/proc/self/ns/${ns}`));
    sb.kill("SIGKILL");
    await sb.result;
  });

  it("never runs when the word does not come: its end closed (the record could not be made durable), or killed", async () => {
    const sb = held("touch ran");
    await until("the held payload", () => heldPayload(sb.pid));
    sb.never();
    expect((await sb.result).code).toBe(125);
    expect(existsSync(join(s.ws, "ran"))).toBe(false);
    sb.start(); // too late: the end is closed
    await sleep(200);
    expect(existsSync(join(s.ws, "ran"))).toBe(false);

    const killed = held("touch ran");
    await until("the held payload", () => heldPayload(killed.pid));
    killed.kill("SIGKILL");
    await killed.result;
    await sleep(200);
    expect(existsSync(join(s.ws, "ran"))).toBe(false);

    // Cancelled (its end closed first, the monitor told to stop everything): nothing ran either.
    const again = held("touch ran");
    await until("the held payload", () => heldPayload(again.pid));
    again.cancel();
    expect((await again.result).code).not.toBe(0);
    await sleep(200);
    expect(existsSync(join(s.ws, "ran"))).toBe(false);
  });
});
