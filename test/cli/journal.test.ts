import { type ChildProcess } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { listenLoopback } from "../support/net.js";
import { runVak, sandboxSh, spawnVak, TEST_STATE } from "../support/vak.js";

// vak journal for a person: list with limits and filters, show last, ids by
// their start (an ambiguous one refused with its candidates), an agent's
// session as a transcript, and tail to follow it live.
let s: Scratch;
let agentId: string;
let execIds: string[] = [];
beforeAll(async () => {
  s = scratch();
  for (const n of [1, 2, 3]) {
    await sandboxSh(s.ws, `echo run-${n}`);
    execIds.push(await newest());
  }
  const file = join(s.root, "script.json");
  writeFileSync(file, JSON.stringify({ turns: [
    { text: "Reading the notes.", tool_calls: [{ name: "read_file", args: { path: "notes.txt" } }, { name: "read_file", args: { path: join(s.outside, "secret") } }] },
    { text: "Done reading." },
  ] }));
  writeFileSync(join(s.ws, "notes.txt"), "some notes\n");
  const r = await runVak(["run", "--model", `scripted:${file}`, "--json", "read the notes"], { cwd: s.ws });
  agentId = JSON.parse(r.stderr.trim().split("\n").pop()!).session;
});
afterAll(() => s.cleanup());

async function newest(): Promise<string> {
  const r = await runVak(["journal", "list", "--json", "--limit", "1"], { cwd: s.ws });
  return (JSON.parse(r.stdout) as { id: string }[])[0]!.id;
}

const ids = (stdout: string) => stdout.trim().split("\n").filter((l) => /^[0-9a-z]+-[0-9a-f]+ /.test(l)).map((l) => l.split(" ")[0]);

describe("vak journal list", () => {
  it("--limit N shows the newest N, oldest first, and says how many there are", async () => {
    const r = await runVak(["journal", "list", "--limit", "2"], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(ids(r.stdout)).toEqual([execIds[2], agentId]);
    expect(r.stdout).toMatch(/\(the newest 2 of 4; --limit 4 shows them all\)/);
  });

  it("--kind picks one kind", async () => {
    expect(ids((await runVak(["journal", "list", "--kind", "exec"], { cwd: s.ws })).stdout)).toEqual(execIds);
    expect(ids((await runVak(["journal", "list", "--kind", "agent"], { cwd: s.ws })).stdout)).toEqual([agentId]);
    expect((await runVak(["journal", "list", "--kind", "mcp"], { cwd: s.ws })).stdout).toMatch(/no session in the journal matches/);
    const bad = await runVak(["journal", "list", "--kind", "everything"], { cwd: s.ws });
    expect(bad.code).toBe(125);
    expect(bad.stderr).toMatch(/Allowed choices are exec, agent, workload, mcp, journal/);
  });

  it("--since and --until take ages, dates and times", async () => {
    expect(ids((await runVak(["journal", "list", "--since", "1h"], { cwd: s.ws })).stdout)).toHaveLength(4);
    expect((await runVak(["journal", "list", "--until", "2000-01-01"], { cwd: s.ws })).stdout).toMatch(/no session in the journal matches/);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect((await runVak(["journal", "list", "--since", future], { cwd: s.ws })).stdout).toMatch(/no session in the journal matches/);
    const today = new Date().toISOString().slice(0, 10);
    expect(ids((await runVak(["journal", "list", "--until", today, "--kind", "agent"], { cwd: s.ws })).stdout)).toEqual([agentId]);
    const bad = await runVak(["journal", "list", "--since", "yesterday"], { cwd: s.ws });
    expect(bad.code).toBe(125);
    expect(bad.stderr).toMatch(/--since yesterday: not an age \(2h, 30m, 7d\), a date/);
    const backwards = await runVak(["journal", "list", "--since", "1m", "--until", "2h"], { cwd: s.ws });
    expect(backwards.stderr).toMatch(/is after --until/);
  });
});

describe("vak journal show", () => {
  it("last is the newest session; export last too", async () => {
    const r = await runVak(["journal", "show", "last"], { cwd: s.ws });
    expect(r.stdout).toContain(`session ${agentId} (agent)`);
    const exported = (await runVak(["journal", "export", "last"], { cwd: s.ws })).stdout.trim().split("\n");
    expect(JSON.parse(exported[0]!).session).toBe(agentId);
  });

  it("an id's start that several sessions share is refused, with the candidates", async () => {
    const prefix = execIds[0]!.slice(0, 3);
    const r = await runVak(["journal", "show", prefix], { cwd: s.ws });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(new RegExp(`4 sessions start with ${prefix}; give more of the id`));
    for (const id of [...execIds, agentId]) expect(r.stderr).toContain(id);
    const unique = await runVak(["journal", "show", agentId.slice(0, agentId.length - 3)], { cwd: s.ws });
    expect(unique.code).toBe(0);
    const none = await runVak(["journal", "show", "zzzz"], { cwd: s.ws });
    expect(none.stderr).toMatch(/no session zzzz in the journal/);
  });

  it("an agent's session is a transcript: you, the model, each tool call with what Vak decided and what came back", async () => {
    const r = await runVak(["journal", "show", agentId], { cwd: s.ws });
    expect(r.code).toBe(0);
    const t = r.stdout;
    expect(t).toMatch(/you › read the notes\n/);
    expect(t).toMatch(/model › Reading the notes\.\n/);
    expect(t).toMatch(/▸ read_file \{"path":"notes\.txt"\}\n\s+✓ returned 11 bytes from .*notes\.txt \(sha256 [0-9a-f]{12}…\)/);
    expect(t).toMatch(/▸ read_file \{"path":".*secret"\}\n\s+✗ REFUSED read .*secret: .*outside the workspace/);
    expect(t).toMatch(/model › Done reading\./);
    expect(t.indexOf("you ›")).toBeLessThan(t.indexOf("Reading the notes"));
    expect(t).toMatch(/── ended/);
    const timeline = await runVak(["journal", "show", agentId, "--events"], { cwd: s.ws });
    expect(timeline.stdout).toMatch(/op\.requested/);
    expect(timeline.stdout).toMatch(/DENIED read/);
  });

  it("an exec run is a timeline, with the limit that stopped it", async () => {
    await sandboxSh(s.ws, "sleep 10", ["--timeout", "1s"]);
    const r = await runVak(["journal", "show", "last"], { cwd: s.ws });
    expect(r.stdout).toMatch(/worker\.exited .*exit 124 \(timed out\); stopped by --timeout 1s: timed out after 1s/);
  });
});

function collect(child: ChildProcess): { text: () => string; until: (re: RegExp, ms?: number) => Promise<string> } {
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  return {
    text: () => out,
    until: (re, ms = 15_000) =>
      new Promise((resolve, reject) => {
        const t0 = Date.now();
        const tick = () => (re.test(out) ? resolve(out) : Date.now() - t0 > ms ? reject(new Error(`timed out waiting for ${re}; got:\n${out}`)) : setTimeout(tick, 20));
        tick();
      }),
  };
}

describe("vak journal tail", () => {
  it("--all follows every session from now, a spooled exec run while it runs, each event once", async () => {
    const tail = spawnVak(["journal", "tail", "--all"], { cwd: s.ws });
    const seen = collect(tail);
    try {
      await seen.until(/following every session/);
      const run = spawnVak(["exec", "--", "/bin/sh", "-c", "echo live; sleep 3"], { cwd: s.ws });
      const runDone = new Promise<number | null>((r) => run.on("close", r));
      let running = true;
      void runDone.then(() => (running = false));
      const shown = await seen.until(/worker\.spawned/);
      expect(running).toBe(true); // shown from the spool while the command still runs
      const id = /^([0-9a-z]+-[0-9a-f]+) .*session\.started/m.exec(shown)![1]!;
      await runDone;
      await seen.until(new RegExp(`${id} .*session\\.ended`));
      // Taken into the chain now: the same events are not shown a second time.
      await runVak(["journal", "ingest"], { cwd: s.ws });
      await new Promise((r) => setTimeout(r, 1500));
      expect(seen.text().match(new RegExp(`${id} .*session\\.started`, "g"))).toHaveLength(1);
      expect(seen.text().match(new RegExp(`${id} .*session\\.ended`, "g"))).toHaveLength(1);
      expect(seen.text()).not.toContain(execIds[0]); // from now: not the old sessions
    } finally {
      tail.kill("SIGINT");
    }
    expect(await new Promise((r) => tail.on("close", r))).toBe(0);
  });

  it("ID follows one session to its end and exits; a finished one is printed whole", async () => {
    const done = await runVak(["journal", "tail", agentId], { cwd: s.ws });
    expect(done.code).toBe(0);
    expect(done.stdout).toMatch(/session\.started[\s\S]*DENIED read[\s\S]*session\.ended/);

    const run = spawnVak(["exec", "--", "/bin/sh", "-c", "sleep 2"], { cwd: s.ws });
    const runDone = new Promise((r) => run.on("close", r));
    const spool = join(TEST_STATE, "vak", "spool");
    let live: string | undefined;
    for (let i = 0; i < 200 && !live; i++) {
      live = readdirSync(spool).find((n) => n.endsWith(".open.jsonl"))?.split(".")[0];
      if (!live) await new Promise((r) => setTimeout(r, 20));
    }
    expect(live).toBeDefined();
    const r = await runVak(["journal", "tail", live!.slice(0, 12)], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/session\.started[\s\S]*worker\.exited .*exit 0[\s\S]*session\.ended/);
    await runDone;
  });
});

describe("vak journal show, a command's network", () => {
  it("an allowed request's closing record says how it ended (status, bytes), so its two lines do not read the same", async () => {
    const server = createServer((_req, res) => res.writeHead(200, { "content-type": "text/plain" }).end("twelve bytes"));
    const port = await listenLoopback(server);
    try {
      await sandboxSh(s.ws, `curl -s -o /dev/null http://127.0.0.1:${port}/page`, ["--allow-net", `127.0.0.1:${port}`]);
      const r = await runVak(["journal", "show", await newest()], { cwd: s.ws });
      const lines = r.stdout.split("\n").filter((l) => l.includes(` GET http://127.0.0.1:${port}/page`));
      expect(lines).toHaveLength(2);
      expect(lines[0]).toMatch(new RegExp(`allowed GET http://127\\.0\\.0\\.1:${port}/page → 127\\.0\\.0\\.1: granted by 127\\.0\\.0\\.1:${port}$`));
      expect(lines[1]).toMatch(new RegExp(`ended GET http://127\\.0\\.0\\.1:${port}/page → 127\\.0\\.0\\.1: completed, status 200, 0 bytes up, 12 down$`));
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
