import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { BACKENDS } from "../support/journal-backends.js";
import { baseEnv, runVak, sandboxSh as sandboxShIn, spawnVak } from "../support/vak.js";

// vak exec records every run: the policy and plan before it starts, what the
// guard refused, and how it ended; `vak journal` reads it back. On both
// backends: with [journal] url set, the spool goes into PostgreSQL.
describe.each(BACKENDS.map((b) => [b().name, b] as const))("vak exec on the record (%s)", (_name, make) => {
  const backend = make();
  let s: Scratch;
  beforeAll(async () => {
    s = scratch({ git: true });
    await backend.setup();
  });
  afterAll(async () => {
    s.cleanup();
    await backend.teardown();
  });
  const env = () => baseEnv(backend.env());
  const journal = (...args: string[]) => runVak(["journal", ...args], { cwd: "/", env: env() });
  const sandboxSh = (ws: string, script: string, flags: string[] = []) => sandboxShIn(ws, script, flags, { env: env() });

  it("records the policy, the plan, each refusal and the exit", async () => {
    const marker = `record-${Date.now()}`;
    await sandboxSh(s.ws, `echo ${marker} > note.txt; echo evil > .envrc; exit 3`, ["--max-procs", "64"]);
    const list = JSON.parse((await journal("list", "--json")).stdout) as { id: string; title: string; outcome: string }[];
    const run = list.find((x) => x.title.includes(marker));
    expect(run?.outcome).toBe("exit 3");
    const shown = JSON.parse((await journal("show", run!.id, "--json")).stdout) as { events: { kind: string; payload: Record<string, unknown> }[] };
    const kinds = shown.events.map((e) => e.kind);
    expect(kinds).toEqual(["session.started", "policy.generation", "worker.spawned", "decision", "worker.exited", "session.ended"]);
    expect(shown.events[1]!.payload).toMatchObject({ mode: "workspace-write", limits: { maxProcs: 64 } });
    expect(shown.events[3]!.payload).toMatchObject({ op: "openat", allowed: false, reason: "protected path .envrc" });
    expect(shown.events[4]!.payload).toMatchObject({ code: 3 });
    const text = (await journal("show", run!.id)).stdout;
    expect(text).toContain("DENIED openat");
    expect(text).toContain("exit 3");
  });

  it("a credential in a command's arguments is redacted in the journal (and the title)", async () => {
    const token = `ghp_${"a1B2c3D4e5".repeat(4)}`;
    await sandboxSh(s.ws, `true redactme ${token}`);
    const list = JSON.parse((await journal("list", "--json")).stdout) as { id: string; title: string }[];
    const run = list.find((x) => x.title.includes("redactme"))!;
    expect(run.title).not.toContain(token);
    const exported = (await journal("export", run.id)).stdout;
    expect(exported).toContain("[REDACTED]");
    expect(exported).not.toContain(token);
  });

  it("search finds a run by its arguments, and export gives one JSON object a line", async () => {
    const marker = `searchable${Date.now()}`;
    await sandboxSh(s.ws, `true ${marker}`);
    const hits = JSON.parse((await journal("search", marker, "--json")).stdout) as { session: string }[];
    expect(hits.length).toBeGreaterThan(0);
    const lines = (await journal("export", hits[0]!.session)).stdout.trim().split("\n");
    expect(lines.length).toBe(5);
    for (const l of lines) expect(JSON.parse(l)).toHaveProperty("hash");
  });

  it("verify passes, then fails with exit 1 naming the event once a byte is changed", async () => {
    const ok = await journal("verify");
    expect(ok.code).toBe(0);
    const list = JSON.parse((await journal("list", "--json")).stdout) as { id: string }[];
    const last = list.at(-1)!;
    const events = (JSON.parse((await journal("show", last.id, "--json")).stdout) as { events: { kind: string; sessionSeq: number; seq: number }[] }).events;
    const exited = events.find((e) => e.kind === "worker.exited")!;
    await backend.change(last.id, exited.sessionSeq, "payload", (v) => v.replace('"code":', '"code" :'));
    const broken = await journal("verify");
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`BROKEN at event ${exited.seq}`);
    expect(broken.stdout).toContain(last.id);
  });
});

describe("a run interrupted by kill -9 of vak is still on the record", () => {
  it("the spooled start is taken in, marked interrupted", async () => {
    const s = scratch();
    const env = baseEnv({ XDG_STATE_HOME: join(s.root, "state") });
    try {
      const marker = `${Math.floor(Math.random() * 1e6) + 1000}.3`;
      const child = spawnVak(["exec", "--", "/bin/sh", "-c", `sleep ${marker}`], { cwd: s.ws, env });
      for (let i = 0; i < 100 && processesWith(`sleep ${marker}`).length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      child.kill("SIGKILL");
      await new Promise((r) => child.on("close", r));
      const list = JSON.parse(execFileSync(process.execPath, [join(__dirname, "../../bin/vak.cjs"), "journal", "list", "--json"], { env, encoding: "utf8" })) as { title: string; outcome: string }[];
      expect(list.find((x) => x.title.includes(marker))?.outcome).toMatch(/^interrupted/);
    } finally {
      s.cleanup();
    }
  });
});
