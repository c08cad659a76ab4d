import { execFileSync } from "node:child_process";
import { existsSync, linkSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { AgentSession } from "../../src/agent/agent-session.js";
import { Broker } from "../../src/broker/broker.js";
import { ScriptedClient } from "../../src/model/scripted.js";
import { client, residentHosts } from "../support/resident.js";
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
    expect(start).toThrow(`holds 1 entry the tool on the host would follow or share, which no sandbox may make there: ${join(S, "2026", "08")} -> ${s.outside} (symbolic link)`);
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
