import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// The sandbox is only useful if ordinary development work runs in it unchanged.
describe("ordinary work runs inside", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch({ git: true });
    writeFileSync(join(s.ws, "notes.txt"), "alpha\nneedle here\nomega\n");
  });
  afterAll(() => s.cleanup());

  it("bash -c with pipes, subshells and redirections", async () => {
    const r = await sandboxSh(s.ws, `bash -c 'for i in 1 2 3; do echo $i; done | tac | tr "\\n" " " > out.txt; (cat out.txt; echo) 2>&1'`);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe("3 2 1");
  });

  it("git status, add and commit in the workspace", async () => {
    const r = await sandboxSh(s.ws, `git status --short && git add notes.txt && git -c user.email=a@b.invalid -c user.name=a commit -qm "add notes" && git log --oneline | wc -l`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("?? notes.txt");
    expect(r.stdout.trim().split("\n").pop()).toBe("2");
  });

  it("node -e, with its standard library and child processes", async () => {
    const r = await sandboxSh(s.ws, `node -e "const cp = require('child_process'); const fs = require('fs'); fs.writeFileSync('n.json', JSON.stringify({cpus: require('os').cpus().length})); console.log(cp.execSync('cat n.json').toString())"`);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).cpus).toBeGreaterThan(0);
  });

  it("grep and ripgrep", async () => {
    const r = await sandboxSh(s.ws, `grep -rn needle . --include=*.txt; rg --version >/dev/null 2>&1 && rg -n needle notes.txt || echo "rg absent"`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("./notes.txt:2:needle here");
    expect(r.stdout).toContain("2:needle here");
  });

  it("python3 and a build-like write/rename pattern", async () => {
    const r = await sandboxSh(s.ws, `mkdir -p build && python3 -c "
import os, tempfile
fd, tmp = tempfile.mkstemp(dir='build'); os.write(fd, b'artifact'); os.close(fd); os.replace(tmp, 'build/out.bin')
print(open('build/out.bin').read())"`);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe("artifact");
    expect(readFileSync(join(s.ws, "build/out.bin"), "utf8")).toBe("artifact");
  });

  it("exit statuses pass through; a missing command is 127", async () => {
    expect((await sandboxSh(s.ws, "exit 7")).code).toBe(7);
    const r = await (await import("../support/vak.js")).runVak(["exec", "--", "no-such-command-xyz"], { cwd: s.ws });
    expect(r.code).toBe(127);
    expect(r.stderr).toContain("no-such-command-xyz: command not found in the sandbox");
  });
});

// Held paths (what protected names lead to, what git config names, Vak's own
// install) are read-only, never unreadable: the work that reads them runs.
describe("ordinary work around held paths", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch({ git: true });
    mkdirSync(join(s.ws, "scripts/githooks"), { recursive: true });
    writeFileSync(join(s.ws, "scripts/githooks/pre-commit"), "#!/bin/sh\necho hook-ran >&2\n", { mode: 0o755 });
    execFileSync("git", ["config", "core.hooksPath", "scripts/githooks"], { cwd: s.ws });
    mkdirSync(join(s.ws, "editor/vscode"), { recursive: true });
    writeFileSync(join(s.ws, "editor/vscode/settings.json"), '{"editor.tabSize": 2}\n');
    symlinkSync("editor/vscode", join(s.ws, ".vscode"));
    writeFileSync(join(s.ws, "package.json"), JSON.stringify({ name: "p", version: "1.0.0", scripts: { test: "node -e \"require('fs').writeFileSync('tested.txt', 'ok')\"" } }));
  });
  afterAll(() => s.cleanup());

  it("git status, add and commit, with the repository's hooks in core.hooksPath (they run, inside)", async () => {
    writeFileSync(join(s.ws, "work.txt"), "data\n");
    const r = await sandboxSh(s.ws, `git status --short && git add work.txt && git -c user.email=a@b.invalid -c user.name=a commit -qm work && git log --oneline | wc -l`);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("hook-ran");
    expect(r.stdout.trim().split("\n").pop()).toBe("2");
  });

  it("editors' settings are read through a protected link", async () => {
    const r = await sandboxSh(s.ws, `cat .vscode/settings.json editor/vscode/settings.json`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('"editor.tabSize": 2');
  });

  it("npm test", async () => {
    const r = await sandboxSh(s.ws, `npm test --silent && cat tested.txt`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("ok");
  });

  it("git worktree add is refused inside, with a message that says what to do instead; a shared clone made on the host works", async () => {
    const r = await sandboxSh(s.ws, `git worktree add -q wt2; echo status=$?`);
    expect(r.stdout).not.toContain("status=0");
    expect(r.stderr).toContain("git worktree add cannot run inside");
    expect(existsSync(join(s.ws, "wt2"))).toBe(false);
    const clone = join(s.root, "clone");
    execFileSync("git", ["clone", "-q", "--shared", s.ws, clone]);
    const w = await sandboxSh(clone, `echo x > f && git add f && git -c user.email=a@b.invalid -c user.name=a commit -qm in-clone && git log --oneline | head -1`, ["--allow-read", join(s.ws, ".git/objects")]);
    expect(w.code).toBe(0);
    expect(w.stdout).toContain("in-clone");
  });
});
