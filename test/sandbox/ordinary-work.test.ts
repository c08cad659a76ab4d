import { readFileSync, writeFileSync } from "node:fs";
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
