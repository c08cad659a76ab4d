import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openJournal } from "../../src/journal/open.js";
import { scratch, type Scratch } from "../support/fs.js";
import { serve, type Served } from "../support/serve.js";
import { baseEnv, runVak } from "../support/vak.js";

// The API as programs use it (the bearer, JSON): sessions of every kind in one
// list, a workload's reach per component, paged events, and the record of a
// session the server ends.

let s: Scratch;
let srv: Served;
let n = 0;
const script = (turns: unknown[]) => {
  const p = join(s.root, `m-${++n}.json`);
  writeFileSync(p, JSON.stringify({ turns }));
  return `scripted:${p}`;
};
const api = async (method: "GET" | "POST", path: string, body?: unknown) => {
  const r = await fetch(`${srv.url}api/${path}`, { method, headers: { Authorization: `Bearer ${srv.token}`, ...(body ? { "Content-Type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};
const until = async (cond: () => Promise<boolean>, ms = 15_000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
};
type Summary = { id: string; kind: string; live: boolean; outcome: string | null; state?: { running: boolean } };
const list = async () => (await api("GET", "sessions")).body.sessions as Summary[];

beforeAll(async () => {
  s = scratch();
  mkdirSync(join(s.ws, "docs"));
  writeFileSync(join(s.ws, "docs", "a.md"), "notes\n");
  srv = await serve({ workspace: s.ws });
});
afterAll(async () => {
  await srv?.close();
  s?.cleanup();
});

describe("the API", () => {
  it("lists a vak exec run from the journal, beside the sessions it hosts", async () => {
    const r = await runVak(["exec", "--", "/bin/true"], { cwd: s.ws, env: baseEnv({ XDG_STATE_HOME: srv.state }) });
    expect(r.code).toBe(0);
    await until(async () => (await list()).some((x) => x.kind === "exec" && !x.live));
  });

  it("hosts a workload: what each component can reach, and no mode switch (its spec decides)", async () => {
    writeFileSync(join(s.ws, "w.toml"), 'version = 1\nname = "w"\nworkspace = "."\n[harness]\nmodel = "scripted:/nonexistent"\n[tools.docs]\nbuiltin = ["read_file"]\nread = ["docs"]\nstores = ["notes"]\n');
    const c = await api("POST", "sessions", { kind: "workload", spec: "w.toml", model: script([{ text: "hi" }]) });
    expect(c.status, JSON.stringify(c.body)).toBe(201);
    const id = c.body.id as string;
    const reach = (await api("GET", `sessions/${id}/reach`)).body as { components: { component: string; files: { path: string; access: string }[]; stores: string[]; tools: string[] }[] };
    expect(reach.components.map((x) => x.component)).toEqual(["harness", "docs"]);
    expect(reach.components[0]).toMatchObject({ files: [], tools: [] });
    expect(reach.components[1]).toMatchObject({ files: [{ path: join(s.ws, "docs"), access: "read" }], stores: ["notes"], tools: ["read_file"] });
    expect((await api("POST", `sessions/${id}/mode`, { mode: "read-only" })).status).toBe(422);
  });

  it("pages a session's events, and keeps the record of a session it ends", async () => {
    const c = await api("POST", "sessions", { kind: "agent", model: script([{ text: "one" }]), prompt: "go" });
    const id = c.body.id as string;
    await until(async () => !((await list()).find((x) => x.id === id)?.state?.running ?? true));
    const first = (await api("GET", `sessions/${id}/events?after=0&limit=2`)).body as { events: { sessionSeq: number }[]; next: number | null };
    expect(first.events.map((e) => e.sessionSeq)).toEqual([1, 2]);
    expect(first.next).toBe(2);
    const rest = (await api("GET", `sessions/${id}/events?after=${first.next}&limit=500`)).body as { events: { sessionSeq: number }[]; next: number | null };
    expect(rest.events[0]!.sessionSeq).toBe(3);
    expect(rest.next).toBeNull();
    expect((await api("GET", `sessions/${id}/events?limit=501`)).status).toBe(400);
    expect((await api("POST", `sessions/${id}/close`)).status).toBe(200);
    const after = (await list()).find((x) => x.id === id)!;
    expect(after.live).toBe(false);
    expect(after.outcome).toBe("ended");
    const m = (await api("GET", `sessions/${id}/messages`)).body as { live: boolean; items: { type: string }[] };
    expect(m.live).toBe(false);
    expect(m.items.map((i) => i.type)).toEqual(["user", "text"]);
    expect((await api("POST", `sessions/${id}/messages`, { text: "more" })).status).toBe(410);
  });

  it("stopping vak serve ends every session it hosts, on the record", async () => {
    const c = await api("POST", "sessions", { kind: "agent", model: script([{ text: "x" }]) });
    const id = c.body.id as string;
    await srv.close();
    const j = await openJournal({ path: join(srv.state, "vak", "journal.db"), ingest: false });
    try {
      expect((await j.events(id)).at(-1)!.kind).toBe("session.ended");
      expect((await j.verify()).ok).toBe(true);
    } finally {
      await j.close();
    }
  });
});

describe("what an agent session can reach", () => {
  it("lists its MCP servers as components with their own grants (never wider than the session's mode)", async () => {
    const r = scratch();
    const x = await serve({ workspace: r.ws, config: '[mcp_servers.notes]\ncommand = ["node", "server.js"]\nmode = "workspace-write"\nnet = ["api.example.com"]\nsecrets = [{ ref = "env:NOTES_KEY", env = "NOTES_TOKEN" }]\n' });
    try {
      const call = async (method: "GET" | "POST", path: string, body?: unknown) => {
        const res = await fetch(`${x.url}api/${path}`, { method, headers: { Authorization: `Bearer ${x.token}`, ...(body ? { "Content-Type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
        return (await res.json()) as Record<string, unknown>;
      };
      const p = join(r.root, "m.json");
      writeFileSync(p, JSON.stringify({ turns: [{ text: "x" }] }));
      const { id } = (await call("POST", "sessions", { kind: "agent", mode: "read-only", model: `scripted:${p}` })) as { id: string };
      const reach = (await call("GET", `sessions/${id}/reach`)) as { components: { component: string; files: { access: string }[]; network: string[]; secrets: { ref: string; to: string }[] }[] };
      expect(reach.components.map((c) => c.component)).toEqual(["agent", "mcp:notes"]);
      const m = reach.components[1]!;
      expect(m.network).toEqual(["api.example.com"]);
      expect(m.secrets).toEqual([{ ref: "env:NOTES_KEY", to: "env NOTES_TOKEN" }]);
      expect(m.files.every((f) => f.access === "read")).toBe(true);
    } finally {
      await x.close();
      r.cleanup();
    }
  });
});
