import { execFileSync } from "node:child_process";
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { servedWhile } from "../support/stall.js";
import { VAK_BIN } from "../support/paths.js";
import { AgentSession } from "../../src/agent/agent-session.js";
import { Broker, type InteractiveSandbox } from "../../src/broker/broker.js";
import { ScriptedClient } from "../../src/model/scripted.js";
import { client, residentHosts } from "../support/resident.js";
import { apiRequest, createWhileListing, serve } from "../support/serve.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * A host tool's state (a profile's state_dirs, state_files) that ALREADY holds what the tool on the host would
 * follow or share when it next writes there: planted before the guard existed (native/guard_links.c), or by
 * anything outside Vak. The guard keeps a sandbox from making these; one already there is the same hole, so the
 * run is refused before anything starts: each is named on stderr with the commands to look at and remove them,
 * the refusal is on the journal, and nothing of the command runs. Both sandboxes, and through the resident host.
 * Each test: a profile `tool` whose state_dirs is HOME/state/S and whose state_files is HOME/files/F.
 */

const py = (code: string) => execFileSync("python3", ["-c", code]);
const marker = () => `m${process.pid}-${Math.floor(Math.random() * 1e9)}`;

interface Exported {
  kind: string;
  payload: Record<string, unknown>;
}

let s: Scratch;
let home: string;
let S: string;
let F: string;
let env: Record<string, string>;

beforeEach(() => {
  s = scratch();
  home = join(s.root, "home");
  S = join(home, "state", "S");
  F = join(home, "files", "F.jsonl");
  mkdirSync(S, { recursive: true });
  mkdirSync(join(home, "files"));
  writeFileSync(F, "history\n");
  mkdirSync(join(S, "2026", "07"), { recursive: true });
  writeFileSync(join(S, "2026", "07", "rollout.jsonl"), "{}\n");
  mkdirSync(join(home, ".config", "vak"), { recursive: true });
  writeFileSync(join(home, ".config", "vak", "config.toml"), `[profiles.tool]\nstate_dirs = [${JSON.stringify(S)}]\nstate_files = [${JSON.stringify(F)}]\n`);
  env = baseEnv({ HOME: home, XDG_CONFIG_HOME: join(home, ".config") });
});
afterEach(() => s.cleanup());

/** A path as Vak's lines show it (under HOME as ~). */
const shown = (p: string) => `~${p.slice(home.length)}`;

/** `vak exec --profile tool` in sandbox, its command leaving a file in the workspace if it ran. */
async function run(sandbox: "namespaces" | "reduced", tag = marker()) {
  const r = await runVak(["exec", "--sandbox", sandbox, "--profile", "tool", "--", "sh", "-c", `echo ran > ran; : ${tag}`], { cwd: s.ws, env });
  return { ...r, ran: existsSync(join(s.ws, "ran")), tag };
}

/** The events of the journal session whose title holds tag. */
function journaled(tag: string): Exported[] {
  const list = JSON.parse(execFileSync(process.execPath, [VAK_BIN, "journal", "list", "--json"], { env, encoding: "utf8" })) as { id: string; title: string }[];
  const id = list.find((x) => x.title.includes(tag))?.id;
  if (!id) return [];
  const text = execFileSync(process.execPath, [VAK_BIN, "journal", "export", id], { env, encoding: "utf8" }).trim();
  return text ? text.split("\n").map((l) => JSON.parse(l) as Exported) : [];
}

/** The refusal on the journal: a decision, not allowed, naming each path. */
function refusalOf(tag: string): { entries: { path: string; kind: string }[]; found: number } | undefined {
  const d = journaled(tag).find((e) => e.kind === "decision" && e.payload.op === "state-entries");
  expect(d?.payload.allowed).toBe(false);
  return d?.payload as { entries: { path: string; kind: string }[]; found: number } | undefined;
}

for (const sandbox of ["namespaces", "reduced"] as const)
  describe(`a host tool's state already holding what its tool would follow: the run is refused (${sandbox})`, () => {
    it("a clean state directory (files and directories only): the command runs", async () => {
      const r = await run(sandbox);
      expect(r.code, r.stderr).toBe(0);
      expect(r.ran).toBe(true);
    });

    it.each([
      ["a symbolic link out of every grant, planted before the guard (sessions/2026/08 -> ~/.bashrc.d)", () => symlinkSync(join(s.outside), join(S, "2026", "08")), "2026/08", /a symbolic link out of what this run can write/],
      ["a symbolic link that dangles, deep down (a name the tool would create through it)", () => {
        mkdirSync(join(S, "a", "b", "c"), { recursive: true });
        symlinkSync(join(s.outside, "nothing-yet"), join(S, "a", "b", "c", "d"));
      }, "a/b/c/d", /a symbolic link out of/],
      ["a regular file hard-linked to one outside (a write to it is a write there)", () => {
        writeFileSync(join(s.outside, "profile.sh"), "# the host's\n");
        linkSync(join(s.outside, "profile.sh"), join(S, "2026", "07", "h.jsonl"));
      }, "2026/07/h.jsonl", /a file with 2 names/],
      ["a FIFO", () => execFileSync("mkfifo", [join(S, "fifo")]), "fifo", /a FIFO/],
      ["a unix socket", () => py(`import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(join(S, "sock"))})`), "sock", /a unix socket/],
      ["a device node", () => py(`import os, stat; os.mknod(${JSON.stringify(join(S, "dev"))}, 0o600 | stat.S_IFCHR, os.makedev(1, 3))`), "dev", /a device node/],
    ])("%s", async (_, plant, rel, why) => {
      plant();
      const r = await run(sandbox);
      expect(r.code, r.stderr).toBe(125);
      expect(r.ran).toBe(false);
      const path = join(S, rel);
      const line = r.stderr.split("\n").find((l) => l.startsWith(`vak:   ${shown(path)}`));
      expect(line, r.stderr).toMatch(why);
      expect(r.stderr).toMatch(/vak: refused: a host tool's state holds 1 entry/);
      expect(r.stderr).toContain(`find '${S}' \\( -type l -o -type p -o -type s -o -type b -o -type c -o -type f -links +1 \\) -delete`);
      expect(r.stderr).toContain(`find '${S}' \\( -type l`);
      const rec = refusalOf(r.tag);
      expect(rec?.entries.map((e) => e.path)).toEqual([path]);
      // What the stderr line tells the user to run finds exactly that entry.
      expect(execFileSync("sh", ["-c", `find '${S}' \\( -type l -o -type p -o -type s -o -type b -o -type c -o -type f -links +1 \\) -print`], { encoding: "utf8" }).trim()).toBe(path);
    });

    it("the state file itself hard-linked to another file: refused", async () => {
      linkSync(F, join(s.outside, "second-name"));
      const r = await run(sandbox);
      expect(r.code, r.stderr).toBe(125);
      expect(r.ran).toBe(false);
      expect(r.stderr.split("\n").find((l) => l.startsWith(`vak:   ${shown(F)}`)), r.stderr).toMatch(/a file with 2 names/);
    });

    // Task 2: a link the host made whose target the sandbox can write; the sandbox would choose what it leads to.
    it.each([
      ["into the state directory itself (the tool's own latest -> 2026/07/rollout.jsonl)", () => symlinkSync("2026/07/rollout.jsonl", join(S, "latest")), "latest", () => S],
      ["into the workspace, by .. (../../../ws/out)", () => symlinkSync("../../../ws/out", join(S, "out")), "out", () => s.ws],
      ["to a name outside, through a link the workspace holds (the sandbox re-points it)", () => {
        symlinkSync(s.outside, join(s.ws, "relay"));
        symlinkSync(join(s.ws, "relay", "x"), join(S, "via"));
      }, "via", () => s.ws],
    ])("a symbolic link %s: refused, the writable root named", async (_, plant, rel, root) => {
      plant();
      const r = await run(sandbox);
      expect(r.code, r.stderr).toBe(125);
      expect(r.ran).toBe(false);
      const line = r.stderr.split("\n").find((l) => l.startsWith(`vak:   ${shown(join(S, rel))} -> `));
      expect(line, r.stderr).toContain(`a symbolic link into ${root()}, which this run can write`);
    });

    it("many planted entries: each counted, a bounded list on stderr, every kept one on the journal", async () => {
      for (let i = 0; i < 30; i++) symlinkSync(s.outside, join(S, `l${i}`));
      const r = await run(sandbox);
      expect(r.code, r.stderr).toBe(125);
      expect(r.stderr).toMatch(/holds 30 entries/);
      expect(r.stderr).toContain("… and 10 more");
      expect(r.stderr.split("\n").filter((l) => l.includes(` -> ${s.outside}:`))).toHaveLength(20);
      const rec = refusalOf(r.tag);
      expect(rec?.found).toBe(30);
      expect(rec?.entries).toHaveLength(30);
    });
  });

describe("through the resident host: the same refusal, the same lines, on the same journal", () => {
  const resident = residentHosts("vak-state-entries-");
  afterAll(() => resident.stopAll());

  it("a planted link: the host refuses as in-process does, and records it", async () => {
    symlinkSync(s.outside, join(S, "2026", "08"));
    writeFileSync(join(S, "2026", "07", "h2"), "x");
    linkSync(join(S, "2026", "07", "h2"), join(s.outside, "h2"));
    const h = await resident.start({ env: { HOME: home, XDG_CONFIG_HOME: join(home, ".config") } });
    const tag = marker();
    const args = ["exec", "--profile", "tool", "--", "sh", "-c", `echo ran > ran; : ${tag}`];
    const served = await client(h, args, { cwd: s.ws, env: { HOME: home, XDG_CONFIG_HOME: join(home, ".config") } }).done;
    expect(served.code, served.stderr).toBe(125);
    expect(existsSync(join(s.ws, "ran"))).toBe(false);
    const inProcess = await run("namespaces");
    // The same lines (the journal's tag aside).
    expect(served.stderr).toBe(inProcess.stderr);
    expect(refusalOf(tag)?.entries.map((e) => e.path).sort()).toEqual([join(S, "2026", "07", "h2"), join(S, "2026", "08")]);
    expect(readFileSync(join(s.outside, "h2"), "utf8")).toBe("x");
  });
});

describe("a broker's component (a workload's, an agent session's) whose state holds one does not start", () => {
  it("a planted link: the broker refuses to start, naming it; a clean state starts", async () => {
    const start = () => new Broker({ workspace: s.ws, mode: "workspace-write", grants: { write: [S], noLinks: [S] } });
    await start().close();
    symlinkSync(s.outside, join(S, "2026", "08"));
    await expect(start().ready).rejects.toThrow(`holds 1 entry the tool on the host would follow or share, which no sandbox may make there: ${join(S, "2026", "08")} -> ${s.outside} (symbolic link)`);
  });

  it("an agent session started read-only (nothing of its state writable, so nothing scanned) cannot be switched to workspace-write over one", async () => {
    // A file of the state hard-linked to one outside it: a write there would land in the other too.
    linkSync(join(S, "2026", "07", "rollout.jsonl"), join(s.outside, "shell-rc"));
    const session = new AgentSession({ workspace: s.ws, mode: "read-only", grants: { write: [S], noLinks: [S] }, model: new ScriptedClient({ turns: [{ text: "ok" }] }), poolSize: 0 });
    try {
      await expect(session.setMode("workspace-write")).rejects.toThrow(/the mode stays read-only: a host tool's state .* holds 1 entry .*rollout\.jsonl \(hard link\)/);
      expect(session.mode).toBe("read-only");
      expect(session.generation).toBe(1);
    } finally {
      await session.close();
    }
    // Clean again, the switch goes through.
    execFileSync("rm", [join(s.outside, "shell-rc")]);
    const clean = new AgentSession({ workspace: s.ws, mode: "read-only", grants: { write: [S], noLinks: [S] }, model: new ScriptedClient({ turns: [{ text: "ok" }] }), poolSize: 0 });
    try {
      await clean.setMode("workspace-write");
      expect(clean.mode).toBe("workspace-write");
    } finally {
      await clean.close();
    }
  });
});

/**
 * A state that takes the walk seconds: n symbolic links that loop (each resolved through its whole chain, 40 links
 * deep, for the reason it is given), in dir/loops. Links, not a million files: the held-path walk of the writable
 * grants (held.ts, in slices too) reads a link as cheaply as any entry, but would take as long as this
 * walk over as many files, and the test would measure it instead.
 */
function loops(dir: string, n: number): void {
  mkdirSync(join(dir, "loops"));
  py(`import os\nfor i in range(${n}):\n  p = os.path.join(${JSON.stringify(join(dir, "loops"))}, "l%d" % i)\n  os.symlink(p, p)`);
}

/** Links enough that the walk takes a second or more here (about a millisecond each on a 2-core machine, more when busy). */
const MANY = 2500;
/** The walk's refusal: of what it found or, on a machine so busy that it ran out of time, of its budget. */
const REFUSED = new RegExp(`a host tool's state \\(state_dirs, state_files\\) holds (${MANY} entries the tool on the host would follow or share|more than Vak checks before a run)`);
/**
 * What the walk may add to the longest wait of the process, over the same start on a clean state (which has its
 * own synchronous parts: a plan takes 100-500 ms on a busy machine, and two runs of it differ by as much): at most
 * this, where a walk in one piece adds all of itself, over WALK_MS.
 */
const ADDED_MS = 500;
const WALK_MS = 1500;

describe("a broker's walk of a host tool's state gives the process turns (vak serve hosts many sessions in one process)", () => {
  it("a component whose state holds 2,500 looping links: the process is served while it walks; an op asked meanwhile waits, and is refused with the walk", async () => {
    const start = () => new Broker({ workspace: s.ws, mode: "workspace-write", grants: { write: [S], noLinks: [S] } });
    let clean: Broker | undefined;
    const base = await servedWhile(() => (clean = start()).ready);
    await clean!.close();
    loops(S, MANY);
    let broker: Broker | undefined;
    let op: Promise<{ ok: boolean; code?: string }> | undefined;
    const r = await servedWhile(() => {
      broker = start();
      op = broker.run({ kind: "exec", command: `echo ran > ${join(s.ws, "ran")}; echo ran > ${join(S, "ran")}` });
      return broker.ready.then(() => "started", (e: Error) => e.message);
    });
    expect(r.value).toMatch(REFUSED);
    expect(r.ms, "the walk is long enough to matter").toBeGreaterThan(WALK_MS);
    expect(r.maxGap, `the longest the process waited during a ${r.ms} ms walk (${base.maxGap} ms over a clean state)`).toBeLessThan(base.maxGap + ADDED_MS);
    expect(await op).toMatchObject({ ok: false, code: "unsafe-state" });
    expect(existsSync(join(s.ws, "ran")) || existsSync(join(S, "ran"))).toBe(false);
    await broker!.close();
  });

  it("vak serve: other requests are answered while a new session's state is walked; the session is refused and not listed", async () => {
    const model = join(s.root, "model.json");
    writeFileSync(model, JSON.stringify({ turns: [{ text: "ok" }] }));
    const srv = await serve({ workspace: s.ws, config: readFileSync(join(home, ".config", "vak", "config.toml"), "utf8"), args: ["--profile", "tool"], env: { HOME: home } });
    try {
      const req = apiRequest(srv);
      const create = () => createWhileListing(req, model);
      const live = () => req("GET", "/api/sessions").then((x) => (JSON.parse(x.body) as { sessions: { live: boolean }[] }).sessions.filter((y) => y.live).length);
      const clean = await create();
      expect(clean.answer.status, clean.answer.body).toBe(201);
      expect(await live()).toBe(1);
      loops(S, MANY);
      const refused = await create();
      expect(refused.answer.status, refused.answer.body).toBeGreaterThanOrEqual(400);
      expect(refused.answer.body).toMatch(REFUSED);
      expect(refused.ms, "the walk is long enough to matter").toBeGreaterThan(WALK_MS);
      expect(refused.asked).toBeGreaterThan(2);
      expect(refused.slowest, `the slowest answer during a ${refused.ms} ms walk (${clean.slowest} ms over a clean state)`).toBeLessThan(clean.slowest + ADDED_MS);
      expect(await live()).toBe(1);
    } finally {
      await srv.close();
    }
  });

  /** An agent session over S, read-only, whose model runs one command that writes into S; a switch to workspace-write, a run and a terminal, asked at once. */
  async function switchWithRunAndTerminal(during: string) {
    const order: string[] = [];
    const session = new AgentSession({
      workspace: s.ws, mode: "read-only", grants: { write: [S], noLinks: [S] }, poolSize: 0, approvalRules: { write: "allow", exec: "allow" },
      model: new ScriptedClient({ turns: [{ tool_calls: [{ name: "exec", args: { command: `echo x > ${during}` } }] }, { text: "done" }] }),
      onEvent: (e) => void (e.type === "tool-result" && order.push("command ended")),
    });
    await session.ready;
    let stopped = 0;
    let run: Promise<unknown> | undefined;
    let terminal: Promise<InteractiveSandbox | Error> | undefined;
    const r = await servedWhile(() => {
      const switching = session.setMode("workspace-write").then(() => "switched", (e: Error) => e.message).finally(() => order.push("switch ended"));
      run = session.run("write into the state");
      terminal = session.interactive(["/bin/sh"], async () => void (stopped += 1)).catch((e: Error) => e).finally(() => order.push("terminal set up"));
      return switching;
    });
    await run!.catch(() => undefined);
    return { session, r, order, terminal: await terminal!, stopped };
  }

  it("a switch to workspace-write over 2,500 looping links: the process is served while it walks; a command and a terminal started meanwhile run under read-only, and the mode stays read-only", async () => {
    const base = await switchWithRunAndTerminal(join(S, "clean"));
    await base.session.close();
    loops(S, MANY);
    const { session, r, order, terminal, stopped } = await switchWithRunAndTerminal(join(S, "during"));
    try {
      expect(r.value).toMatch(/^the mode stays read-only: /);
      expect(r.value).toMatch(REFUSED);
      expect(r.ms, "the walk is long enough to matter").toBeGreaterThan(WALK_MS);
      expect(r.maxGap, `the longest the process waited during a ${r.ms} ms walk (${base.r.maxGap} ms for a clean state's)`).toBeLessThan(base.r.maxGap + ADDED_MS);
      // Both were set up, and the command ended, while the state was walked: under the mode in force.
      expect(order.slice(0, 2).sort()).toEqual(["command ended", "terminal set up"]);
      expect((terminal as InteractiveSandbox).plan.mode).toBe("read-only");
      expect((terminal as InteractiveSandbox).plan.grants.write).not.toContain(S);
      expect(existsSync(join(S, "during"))).toBe(false);
      expect(session.mode).toBe("read-only");
      expect(session.generation).toBe(1);
      expect(stopped).toBe(0);
    } finally {
      await session.close();
    }
  });

  it("a switch to workspace-write that passes: a terminal set up while it was under way, under read-only, is stopped by it", async () => {
    const { session, r, terminal, stopped } = await switchWithRunAndTerminal(join(S, "during"));
    try {
      expect(r.value).toBe("switched");
      expect(session.mode).toBe("workspace-write");
      expect(session.generation).toBe(2);
      // Set up under the old generation (read-only), or refused as its setup was overtaken; stopped either way.
      if (terminal instanceof Error) expect(terminal.message).toMatch(/the session's policy changed while the terminal was starting/);
      else expect(terminal.plan.mode).toBe("read-only");
      expect(stopped).toBe(1);
    } finally {
      await session.close();
    }
  });
});
