import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Grants } from "../../src/policy/grants.js";
import { scanHeld, scanHeldSliced } from "../../src/policy/held.js";
import { decide, decideSliced, heldAhead, type HostFacts, type PlanInput } from "../../src/policy/plan.js";
import { hostFacts } from "../../src/sandbox/host.js";
import { scratch, type Scratch } from "../support/fs.js";

/**
 * The held-path walk in slices (scanHeldSliced, decideSliced: the processes that serve others) finds what the walk
 * in one piece finds (scanHeld, decide: `vak exec` in-process), and the plan made with it is the same plan.
 */

let s: Scratch;
let home: string;
let state: string;

beforeAll(() => {
  s = scratch({ git: true });
  home = join(s.root, "home");
  state = join(home, ".config", "vak");
  mkdirSync(state, { recursive: true });
  const ws = s.ws;
  const git = (cwd: string, ...a: string[]) => execFileSync("git", a, { cwd, stdio: "ignore" });
  // A hook that is a link to a script of no protected name; hooksPath and an include in the repository's config.
  mkdirSync(join(ws, "scripts"));
  writeFileSync(join(ws, "scripts", "hook.sh"), "#!/bin/sh\n");
  symlinkSync("../../scripts/hook.sh", join(ws, ".git", "hooks", "pre-commit"));
  git(ws, "config", "core.hooksPath", "tools/hooks");
  git(ws, "config", "include.path", "../shared.gitconfig");
  writeFileSync(join(ws, "shared.gitconfig"), "[core]\n\tfsmonitor = tools/monitor.sh\n");
  // Protected names that are links (.vscode, .envrc), deep in the tree.
  mkdirSync(join(ws, "a", "b", "editor", "vscode"), { recursive: true });
  symlinkSync("editor/vscode", join(ws, "a", "b", ".vscode"));
  writeFileSync(join(ws, "a", "envrc.sh"), "echo hi\n");
  symlinkSync("envrc.sh", join(ws, "a", ".envrc"));
  // A protected file with another name elsewhere in the workspace.
  writeFileSync(join(ws, "a", "b", ".bashrc"), "# rc\n");
  mkdirSync(join(ws, "c"));
  linkSync(join(ws, "a", "b", ".bashrc"), join(ws, "c", "innocent.txt"));
  // A nested repository reached through a .git file, and a bare one.
  mkdirSync(join(ws, "sub"));
  git(join(ws, "sub"), "init", "-q", "--separate-git-dir", join(ws, "c", "sub.git"));
  git(ws, "init", "-q", "--bare", join(ws, "bare.git"));
  // Directories enough for many slices.
  for (let i = 0; i < 300; i++) mkdirSync(join(ws, "many", `d${i % 30}`, `e${i}`), { recursive: true });
});
afterAll(() => s.cleanup());

const host = (): HostFacts => ({
  home, uid: 1000, gid: 1000, user: "dev", shell: "/bin/bash",
  env: { PATH: `/usr/bin:${join(s.ws, "bin")}`, HOME: home, LANG: "C.UTF-8" },
  stateDirs: [state], nodePrefix: "/usr", install: hostFacts().install,
});
const grants = (g: Partial<Grants> = {}): Grants => ({ read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [], ...g });
const input = (over: Partial<PlanInput> = {}): PlanInput => ({ mode: "workspace-write", sandbox: "namespaces", workspace: s.ws, grants: grants(), limits: {}, command: ["true"], ...over });

describe("the held-path walk in slices and in one piece", () => {
  it("finds the same held paths, a turn of the event loop after every directory or not", async () => {
    const one = scanHeld(s.ws, [s.ws], host());
    expect(one.held.map((h) => h.path)).toEqual(
      expect.arrayContaining([join(s.ws, "scripts", "hook.sh"), join(s.ws, "a", "b", "editor", "vscode"), join(s.ws, "a", "envrc.sh"), join(s.ws, "c", "innocent.txt"), join(s.ws, "shared.gitconfig"), join(s.ws, "c", "sub.git", "config"), join(s.ws, "bare.git", "config")]),
    );
    for (const slice of [0, 1, 10]) expect(await scanHeldSliced(s.ws, [s.ws], host(), slice)).toEqual(one);
  });

  it.each([
    ["the workspace writable", {}],
    ["a writable grant inside it, the workspace read-only", { mode: "read-only" as const, grants: grants({ write: ["a"] }) }],
    ["a writable grant with a --deny-write inside it", { grants: grants({ denyWrite: ["c"] }) }],
    ["reduced mode", { sandbox: "reduced" as const, scratch: { tmp: "/nonexistent/tmp", home: "/nonexistent/home" } }],
  ])("decide() and decideSliced() make the same plan: %s", async (_, over) => {
    const plan = decide(input(over), host());
    expect(plan.held.length).toBeGreaterThan(1);
    expect(await decideSliced(input(over), host())).toEqual(plan);
  });

  it("decide() takes the walk done ahead only for the roots it walked: for others it walks again", async () => {
    const ahead = await heldAhead(input(), host());
    expect(ahead?.writable).toEqual([s.ws]);
    const marker = { path: join(s.ws, "marker"), why: "found ahead" };
    // Taken: what it found is in the plan, and nothing else of the walk's.
    const taken = decide({ ...input(), heldAhead: { ...ahead!, found: [marker] } }, host());
    expect(taken.held.map((h) => h.path)).toContain(marker.path);
    expect(taken.held.map((h) => h.path)).not.toContain(join(s.ws, "scripts", "hook.sh"));
    // The roots changed in between (another grant, another mode): walked again, the same plan as without it.
    const other = input({ mode: "read-only", grants: grants({ write: ["a"] }) });
    expect(decide({ ...other, heldAhead: { ...ahead!, found: [marker] } }, host())).toEqual(decide(other, host()));
  });

  it("an input decide() refuses before its walk is refused the same, without a walk", async () => {
    for (const over of [{ workspace: "/" }, { grants: grants({ denyRead: ["."] }) }, { cwd: s.outside }, { command: [] }]) {
      expect(await heldAhead(input(over), host())).toBeUndefined();
      let sync: unknown;
      try {
        decide(input(over), host());
      } catch (e) {
        sync = e;
      }
      expect(sync).toBeInstanceOf(Error);
      await expect(decideSliced(input(over), host())).rejects.toThrow((sync as Error).message);
    }
  });

  it("nothing writable: no walk, the same plan", async () => {
    expect(await heldAhead(input({ mode: "read-only" }), host())).toMatchObject({ writable: [], found: [] });
    expect(await decideSliced(input({ mode: "read-only" }), host())).toEqual(decide(input({ mode: "read-only" }), host()));
  });
});
