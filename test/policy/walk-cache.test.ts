import { chmodSync, linkSync, mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HeldFacts, scanHeld } from "../../src/policy/held.js";
import { WalkCache } from "../../src/policy/walk-cache.js";
import { scratch, type Scratch } from "../support/fs.js";

/**
 * The held-path walk's cache (src/policy/walk-cache.ts): a walk that takes a
 * directory from it must find exactly what a walk that reads every directory
 * finds, whatever changed in between. A directory's record is trusted only
 * once its ctime is 3 s old, so the fixtures are made once and aged first.
 */
let s: Scratch;
let home: string;
const AGED_MS = 3200;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function facts(cache?: WalkCache): HeldFacts {
  return { home, env: { PATH: "/usr/bin:/bin", HOME: home }, stateDirs: [join(home, ".local/state/vak")], walkCache: cache };
}
const held = (ws: string, cache?: WalkCache) => scanHeld(ws, [ws], facts(cache)).held.map((h) => `${h.path} (${h.why})`).sort();

/** A tree with something of each kind the walk finds: protected links at depth, a protected file with a hard link, a link in a protected tree, repositories, a bare one. */
function plant(ws: string): void {
  const w = (p: string, c = "x\n") => (mkdirSync(join(ws, p, ".."), { recursive: true }), writeFileSync(join(ws, p), c));
  w("a/b/c/d/e/real-envrc", "export A=1\n");
  symlinkSync("real-envrc", join(ws, "a/b/c/d/e/.envrc"));
  w("editor/vscode/settings.json", "{}\n");
  symlinkSync("editor/vscode", join(ws, ".vscode"));
  w(".husky/_real");
  w("tools/husky-pre-commit", "#!/bin/sh\n");
  symlinkSync("../tools/husky-pre-commit", join(ws, ".husky/pre-commit"));
  w("envrc-source", "export B=1\n");
  linkSync(join(ws, "envrc-source"), join(ws, ".envrc")); // a protected file with another name
  w("nested/repo/README");
  mkdirSync(join(ws, "nested/repo/.git/hooks"), { recursive: true });
  w("nested/repo/.git/config", "[core]\n\thooksPath = ../../hooks-dir\n");
  w("nested/repo/.git/HEAD", "ref: refs/heads/main\n");
  for (const d of ["objects", "refs"]) mkdirSync(join(ws, "bare.git", d), { recursive: true });
  w("bare.git/HEAD", "ref: refs/heads/main\n");
  w("bare.git/config", "[core]\n\tbare = true\n");
  for (let i = 0; i < 30; i++) w(`node_modules/pkg${i}/lib/index.js`);
}

beforeAll(async () => {
  s = scratch();
  home = join(s.root, "home");
  mkdirSync(home);
  for (const n of ["t1", "t2", "t3", "t4"]) {
    mkdirSync(join(s.ws, n));
    plant(join(s.ws, n));
  }
  await sleep(AGED_MS);
}, 20_000);
afterAll(() => s.cleanup());

describe("the held walk's cache", () => {
  it("a second walk of an unchanged tree takes every directory from the cache and finds the same held paths", () => {
    const ws = join(s.ws, "t1");
    const plain = held(ws);
    expect(plain.join("\n")).toMatch(/real-envrc/);
    expect(plain.join("\n")).toMatch(/husky-pre-commit/);
    expect(plain.join("\n")).toMatch(/hard link to the protected file/);
    expect(plain.join("\n")).toMatch(/bare\.git\/config/);
    expect(plain.join("\n")).toMatch(/hooks-dir/);
    const cache = new WalkCache();
    expect(held(ws, cache)).toEqual(plain);
    expect(cache.hits).toBe(0);
    const first = cache.misses;
    expect(held(ws, cache)).toEqual(plain);
    expect(cache.hits).toBe(first);
    expect(cache.misses).toBe(first);
  });

  it("every change to a directory's entries is seen: the next walk reads that directory again and finds what a walk without the cache finds", () => {
    const ws = join(s.ws, "t2");
    const e = join(ws, "a/b/c/d/e");
    const changes: [string, () => void][] = [
      ["a new protected link", () => symlinkSync("../../../../../tools/husky-pre-commit", join(e, ".mcp.json"))],
      ["a new subdirectory holding one", () => (mkdirSync(join(e, "sub")), symlinkSync("../real-envrc", join(e, "sub/.envrc")))],
      ["a file renamed over a protected name", () => (writeFileSync(join(e, "plain"), "y\n"), renameSync(join(e, "plain"), join(e, ".envrc")))],
      ["a directory swapped by rename", () => (mkdirSync(join(ws, "swap")), symlinkSync("../envrc-source", join(ws, "swap/.envrc")), rmSync(join(ws, "node_modules/pkg3"), { recursive: true }), renameSync(join(ws, "swap"), join(ws, "node_modules/pkg3")))],
      ["a directory replaced by a link", () => (rmSync(join(ws, "node_modules/pkg4"), { recursive: true }), symlinkSync("../editor", join(ws, "node_modules/pkg4")))],
      ["an entry removed", () => unlinkSync(join(ws, ".vscode"))],
      ["a new repository", () => (mkdirSync(join(ws, "node_modules/pkg5/.git"), { recursive: true }), writeFileSync(join(ws, "node_modules/pkg5/.git/config"), "[core]\n\tfsmonitor = ./evil\n"))],
      ["mtime set back by hand after a change", () => (symlinkSync("x", join(ws, "node_modules/pkg6/.envrc")), utimesSync(join(ws, "node_modules/pkg6"), new Date(2000, 0, 1), new Date(2000, 0, 1)))],
      ["a directory made unreadable (root reads it anyway; its ctime changed)", () => chmodSync(join(ws, "node_modules/pkg7"), 0)],
    ];
    const cache = new WalkCache();
    held(ws, cache);
    for (const [what, change] of changes) {
      change();
      cache.hits = cache.misses = 0;
      expect(held(ws, cache), what).toEqual(held(ws));
      expect(cache.misses, what).toBeGreaterThan(0);
    }
    expect(held(ws).join("\n")).toMatch(/pkg5\/evil/);
  });

  it("a hard link made elsewhere to a protected file is found though no directory of the file changed", () => {
    const ws = join(s.ws, "t3");
    const cache = new WalkCache();
    held(ws, cache);
    mkdirSync(join(s.root, "elsewhere-t3"));
    // The protected file's own directory is unchanged: only its link count says anything.
    linkSync(join(ws, "a/b/c/d/e/real-envrc"), join(ws, "node_modules/pkg1/lib/notes.txt"));
    const after = held(ws, cache);
    expect(after).toEqual(held(ws));
    expect(after.join("\n")).toMatch(/pkg1\/lib\/notes\.txt/);
  });

  it("a directory changed within the last 3 s is not recorded: the next walk reads it again", () => {
    const ws = join(s.ws, "t4");
    mkdirSync(join(ws, "fresh"));
    const cache = new WalkCache();
    held(ws, cache);
    cache.hits = cache.misses = 0;
    held(ws, cache);
    // The workspace's top (a new entry) and fresh/ are read again; the aged rest is not.
    expect(cache.misses).toBe(2);
    expect(cache.hits).toBeGreaterThan(40);
  });
});
