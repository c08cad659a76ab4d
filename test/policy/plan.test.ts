import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VakError } from "../../src/policy/errors.js";
import type { Grants } from "../../src/policy/grants.js";
import { decide, type HostFacts, type LaunchPlan, type PlanInput } from "../../src/policy/plan.js";
import { scratch, type Scratch } from "../support/fs.js";

let s: Scratch;
let home: string;
let state: string;

beforeAll(() => {
  s = scratch();
  home = join(s.root, "home");
  state = join(home, ".config", "vak");
  mkdirSync(state, { recursive: true });
  for (const d of ["src", "docs", "private", "out"]) mkdirSync(join(s.ws, d));
  writeFileSync(join(s.ws, "src", "a.ts"), "");
  symlinkSync(join(s.ws, "src"), join(s.root, "ws-link"));
});
afterAll(() => s.cleanup());

const host = (): HostFacts => ({
  home, uid: 1000, gid: 1000, user: "dev", shell: "/bin/bash",
  env: { PATH: "/usr/bin:/opt/secret/bin", HOME: home, OPENAI_API_KEY: "sk-nope", LANG: "C.UTF-8", SHARED: "yes" },
  stateDirs: [state], nodePrefix: "/usr",
});

const grants = (g: Partial<Grants> = {}): Grants => ({ read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [], ...g });
const plan = (over: Partial<PlanInput> = {}): LaunchPlan =>
  decide({ mode: "workspace-write", sandbox: "namespaces", workspace: s.ws, grants: grants(), limits: {}, command: ["true"], ...over }, host());
const mountOf = (p: LaunchPlan, path: string) => p.mounts.filter((m) => m.path === path).map((m) => m.kind);

describe("modes", () => {
  it.each([
    ["read-only", "ro"],
    ["workspace-write", "rw"],
  ] as const)("%s binds the workspace %s", (mode, kind) => {
    expect(mountOf(plan({ mode }), s.ws)).toEqual([kind]);
  });

  it("full-access builds no sandbox and keeps the host environment", () => {
    const p = plan({ mode: "full-access", sandbox: "none" });
    expect(p.sandbox).toBe("none");
    expect(p.mounts).toEqual([]);
    expect(p.env.OPENAI_API_KEY).toBe("sk-nope");
  });

  it("a restricted mode never runs without a sandbox", () => {
    expect(() => plan({ sandbox: "none" })).toThrow(VakError);
  });
});

describe("grants and deny rules (deny beats allow)", () => {
  it.each([
    ["--allow-write beats --allow-read for the same path", { read: ["docs"], write: ["docs"] }, "docs", ["rw"]],
    ["--deny-read of a granted path drops the grant", { read: ["docs"], denyRead: ["docs"] }, "docs", ["mask"]],
    ["--deny-write of a writable grant makes it read-only", { write: ["out"], denyWrite: ["out"] }, "out", ["ro"]],
    ["--deny-read inside the workspace masks it", { denyRead: ["private"] }, "private", ["mask"]],
    ["--deny-write inside the workspace freezes it", { denyWrite: ["src"] }, "src", ["ro"]],
  ] as const)("%s", (_title, g, rel, kinds) => {
    expect(mountOf(plan({ grants: grants(g as unknown as Partial<Grants>) }), join(s.ws, rel))).toEqual(kinds);
  });

  it("a deny rule for a path that does not exist yet still reaches the guard", () => {
    const p = plan({ grants: grants({ denyWrite: ["later/file"] }) });
    expect(p.protect).toContainEqual({ kind: "abs", pattern: join(s.ws, "later/file") });
    expect(mountOf(p, join(s.ws, "later/file"))).toEqual([]);
  });

  it("a host tool's state (a profile's state_dirs) reaches the guard as a nolinks rule, only where something is writable", () => {
    const state = join(s.outside, "state");
    mkdirSync(state, { recursive: true });
    const p = plan({ grants: grants({ write: [state], noLinks: [state] }) });
    expect(p.protect).toContainEqual({ kind: "nolinks", pattern: state });
    expect(p.grants.noLinks).toEqual([state]);
    expect(mountOf(p, state)).toEqual(["rw"]);
    // Read-only, or not granted at all: nothing to hold.
    expect(plan({ grants: grants({ read: [state], noLinks: [state] }) }).protect.some((r) => r.kind === "nolinks")).toBe(false);
    // The workspace keeps its links.
    expect(plan().protect.some((r) => r.kind === "nolinks")).toBe(false);
  });

  it("a deny rule above a grant drops the grant entirely", () => {
    const inner = join(s.outside, "inner");
    mkdirSync(inner, { recursive: true });
    const p = plan({ grants: grants({ read: [inner], denyRead: [s.outside] }) });
    expect(p.grants.read).not.toContain(inner);
    expect(p.mounts.some((m) => m.path === inner)).toBe(false);
  });

  it("a deny rule that covers the workspace itself is refused with a clear reason", () => {
    expect(() => plan({ grants: grants({ denyRead: [s.root] }) })).toThrow(/workspace .* is covered by --deny-read/);
  });

  it("paths are canonical: a grant through a symlink binds the target", () => {
    const p = plan({ grants: grants({ read: [join(s.root, "ws-link")] }) });
    expect(p.grants.read).toContain(join(s.ws, "src"));
  });

  it.each([
    ["a relative path that climbs out", { read: ["../outside"] }, "path-escapes"],
    ["a path that does not exist", { write: ["nope"] }, "path-not-found"],
    ["the root directory", { read: ["/"] }, "path-too-broad"],
  ] as const)("refuses %s", (_t, g, code) => {
    try {
      plan({ grants: grants(g as unknown as Partial<Grants>) });
      expect.unreachable();
    } catch (e) {
      expect((e as VakError).code).toBe(code);
    }
  });
});

describe("the runtime set", () => {
  it("binds system directories read-only and never the home directory", () => {
    const p = plan();
    expect(p.mounts.find((m) => m.path === "/usr")?.kind).toBe("ro");
    expect(p.mounts.filter((m) => m.kind === "ro" || m.kind === "rw").some((m) => m.path === home || m.path.startsWith(home + "/"))).toBe(false);
  });

  it("gives an empty private HOME and /tmp", () => {
    const p = plan();
    expect(mountOf(p, home)).toEqual(["tmpfs"]);
    expect(mountOf(p, "/tmp")).toEqual(["tmpfs"]);
    expect(p.env.HOME).toBe(home);
    expect(p.env.TMPDIR).toBe("/tmp");
  });

  it("synthesizes /etc/passwd instead of exposing the host's accounts", () => {
    const p = plan();
    const passwd = p.mounts.find((m) => m.path === "/etc/passwd");
    expect(passwd?.kind).toBe("file");
    expect(passwd && "content" in passwd ? passwd.content : "").toContain("dev:x:1000:1000");
  });

  it("mounts parents before children", () => {
    const p = plan({ grants: grants({ denyRead: ["private"] }) });
    const paths = p.mounts.map((m) => m.path);
    expect(paths.indexOf("/tmp")).toBeLessThan(paths.indexOf(s.ws));
    expect(paths.indexOf(s.ws)).toBeLessThan(paths.indexOf(join(s.ws, "private")));
  });
});

describe("Vak's own state", () => {
  it("is always protected from writes, and masked when a grant covers it", () => {
    const p = plan({ grants: grants({ read: [home] }) });
    expect(p.protect).toContainEqual({ kind: "abs", pattern: state });
    expect(mountOf(p, state)).toEqual(["mask"]);
  });

  it("reduced mode refuses a grant that covers it, since it cannot hide it", () => {
    expect(() => plan({ sandbox: "reduced", grants: grants({ read: [home] }), scratch: { tmp: s.outside, home: s.outside } })).toThrow(/Vak's own state/);
  });
});

describe("the environment is an allowlist", () => {
  it("drops everything not named, keeps safe names, and passes --allow-env names", () => {
    const p = plan({ grants: grants({ env: ["SHARED"] }) });
    expect(p.env.OPENAI_API_KEY).toBeUndefined();
    expect(p.env.LANG).toBe("C.UTF-8");
    expect(p.env.SHARED).toBe("yes");
  });

  it("keeps only PATH entries visible inside", () => {
    expect(plan().env.PATH?.split(":")).not.toContain("/opt/secret/bin");
    expect(plan().env.PATH?.split(":")).toContain("/usr/bin");
  });

  it("--allow-env cannot point HOME or PATH at the host", () => {
    const p = plan({ grants: grants({ env: ["HOME", "PATH"] }) });
    expect(p.env.HOME).toBe(home);
    expect(p.env.PATH).not.toContain("/opt/secret/bin");
  });
});
