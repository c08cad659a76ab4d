import { linkSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// A secret planted in the real home directory and one beside the workspace:
// no spelling of either path may read them from inside the sandbox.
describe("no read outside grants", () => {
  const secret = `vak-secret-${process.pid}-${Date.now()}`;
  const homeDir = join(homedir(), `.vak-test-${process.pid}`);
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
    mkdirSync(homeDir, { mode: 0o700 });
    writeFileSync(join(homeDir, "id_rsa"), `${secret}\n`);
    writeFileSync(join(s.outside, "secret"), `${secret}\n`);
    symlinkSync(join(homeDir, "id_rsa"), join(s.ws, "key-link"));
    symlinkSync(homeDir, join(s.ws, "home-link"));
  });
  afterAll(() => {
    s.cleanup();
    rmSync(homeDir, { recursive: true, force: true });
  });

  const attempts: [string, () => string][] = [
    ["absolute path into the real home", () => `cat ${homeDir}/id_rsa`],
    ["absolute path beside the workspace", () => `cat ${s.outside}/secret`],
    ["../ traversal", () => `cat ../outside/secret`],
    ["a workspace symlink to the file", () => `cat key-link`],
    ["a workspace symlink to the directory", () => `cat home-link/id_rsa`],
    ["/proc/self/root", () => `cat /proc/self/root${homeDir}/id_rsa`],
    ["/proc/1/root", () => `cat /proc/1/root${s.outside}/secret`],
    ["a recursive grep of home and the scratch root", () => `grep -r ${secret} ${homedir()} ${s.root} 2>/dev/null | head -1`],
    ["listing the real home", () => `ls -la ${homedir()}`],
  ];

  for (const [title, cmd] of attempts) {
    it(`${title} reads nothing`, async () => {
      const r = await sandboxSh(s.ws, `${cmd()}; true`);
      expect(r.code).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(secret);
      expect(r.stdout).not.toContain(`.vak-test-${process.pid}`);
    });
  }

  it("the home directory inside is private and empty", async () => {
    const r = await sandboxSh(s.ws, `ls -A "$HOME" | wc -l`);
    expect(r.stdout.trim()).toBe("0");
  });

  it("host accounts do not leak through /etc/passwd", async () => {
    const r = await sandboxSh(s.ws, `cat /etc/passwd`);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").filter(Boolean).length).toBeLessThanOrEqual(3);
    expect(r.stdout).not.toMatch(/^(daemon|bin|sys|www-data|postgres):/m);
  });

  it("--deny-read hides a path inside a granted directory", async () => {
    mkdirSync(join(s.ws, "private"), { recursive: true });
    writeFileSync(join(s.ws, "private", "token"), `${secret}\n`);
    const r = await sandboxSh(s.ws, `cat private/token; ls private; true`, ["--deny-read", "private"]);
    expect(r.stdout + r.stderr).not.toContain(secret);
    expect(r.stdout).not.toContain("token");
  });

  it("an explicit --allow-read grant is readable, and only that", async () => {
    const r = await sandboxSh(s.ws, `cat ${s.outside}/secret; cat ${homeDir}/id_rsa; true`, ["--allow-read", s.outside]);
    expect(r.stdout).toBe(`${secret}\n`);
  });
});

// --deny-read of a path inside the view: a mask hides it, and every read of
// it, by any spelling, is refused with a Vak line that names the path and the
// rule (never a silent empty file). Each attack reaches for the same file.
describe("--deny-read inside the workspace, by every name", () => {
  const secret = `vak-denied-${process.pid}-${Date.now()}`;
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
    mkdirSync(join(s.ws, "private", "deeper"), { recursive: true });
    writeFileSync(join(s.ws, "private", "token"), `${secret}\n`);
    writeFileSync(join(s.ws, "private", "deeper", "key"), `${secret}\n`);
    mkdirSync(join(s.ws, "a", "b"), { recursive: true });
    writeFileSync(join(s.ws, "a", "b", "env"), `${secret}\n`);
    writeFileSync(join(s.ws, "alone"), `${secret}\n`);
    writeFileSync(join(s.ws, "run.sh"), `#!/bin/sh\necho ${secret}\n`, { mode: 0o755 });
    symlinkSync("private/token", join(s.ws, "token-link"));
    symlinkSync("alone", join(s.ws, "alone-link"));
    linkSync(join(s.ws, "alone"), join(s.ws, "alone-hardlink"));
    mkdirSync(join(s.ws, "elsewhere"));
    linkSync(join(s.ws, "private", "deeper", "key"), join(s.ws, "elsewhere", "key-hardlink"));
  });
  afterAll(() => s.cleanup());

  const deny = ["--deny-read", "private", "--deny-read", "alone", "--deny-read", "a/b/env", "--deny-read", "run.sh"];
  const ws = (p: string) => join(s.ws, p);
  /** The command read nothing of it, and Vak said which path and which rule. */
  const refused = (r: { stdout: string; stderr: string }, path: string, rule: RegExp) => {
    expect(r.stdout + r.stderr).not.toContain(secret);
    const line = r.stderr.split("\n").find((l) => l.startsWith("vak: refused ") && l.includes(` ${path}:`));
    expect(line, r.stderr).toBeDefined();
    expect(line).toMatch(rule);
  };
  const byFlag = /\(deny_read, from --deny-read\)$/;

  it("reading the denied file is refused with a line, not an empty file", async () => {
    const r = await sandboxSh(s.ws, `cat alone; echo "rc=$?"`, deny);
    expect(r.stdout).toContain("rc=1");
    refused(r, ws("alone"), byFlag);
  });

  it("a symlink to it is refused by the path it leads to", async () => {
    const r = await sandboxSh(s.ws, `cat alone-link token-link; true`, deny);
    refused(r, ws("alone"), byFlag);
    refused(r, ws("private/token"), /protected path .*\/private \(deny_read, from --deny-read\)$/);
  });

  it("a hard link made on the host before the run is masked and refused too", async () => {
    const r = await sandboxSh(s.ws, `cat alone-hardlink elsewhere/key-hardlink; true`, deny);
    refused(r, ws("alone-hardlink"), /a hard link to .*\/alone, which --deny-read denies/);
    refused(r, ws("elsewhere/key-hardlink"), /a hard link to .*\/private\/deeper\/key, which --deny-read denies/);
  });

  it("a hard link made inside the sandbox is refused", async () => {
    const r = await sandboxSh(s.ws, `ln alone mine; cat mine; true`, deny);
    refused(r, ws("alone"), byFlag);
  });

  it("a path through .. is refused", async () => {
    const r = await sandboxSh(s.ws, `cat elsewhere/../private/../alone; cd a && cat ../a/b/./env; true`, deny);
    refused(r, ws("alone"), byFlag);
    refused(r, ws("a/b/env"), byFlag);
  });

  it("a rename of it or of a directory above it is refused", async () => {
    const r = await sandboxSh(s.ws, `mv alone moved; mv a c; mv private p2; cat moved c/b/env p2/token; true`, deny);
    expect(r.stdout + r.stderr).not.toContain(secret);
    for (const p of ["alone", "a", "private"]) expect(r.stderr).toMatch(new RegExp(`^vak: refused rename ${ws(p).replace(/[/.]/g, "\\$&")}: `, "m"));
  });

  it("a file in a child directory of a denied directory, and the directory's listing, are refused", async () => {
    const r = await sandboxSh(s.ws, `cat private/deeper/key; ls private; true`, deny);
    refused(r, ws("private/deeper/key"), /protected path .*\/private \(deny_read, from --deny-read\)$/);
    expect(r.stdout).not.toContain("token");
  });

  it("an fd opened as a handle and reopened through /proc/self/fd is refused", async () => {
    const r = await sandboxSh(s.ws, `python3 -c '
import os
fd = os.open("alone", os.O_PATH)
try: print(open("/proc/self/fd/%d" % fd).read())
except OSError as e: print("refused", e.errno)
d = os.open("private", os.O_PATH | os.O_DIRECTORY)
try: print(os.read(os.open("token", os.O_RDONLY, dir_fd=d), 100))
except OSError as e: print("refused", e.errno)
'`, deny);
    expect(r.stdout).toBe("refused 13\nrefused 13\n");
    refused(r, ws("alone"), byFlag);
    refused(r, ws("private/token"), /protected path .*\/private/);
  });

  it("running it is refused", async () => {
    const r = await sandboxSh(s.ws, `./run.sh; true`, deny);
    refused(r, ws("run.sh"), byFlag);
  });

  it("a path it does not deny reads as before", async () => {
    writeFileSync(join(s.ws, "public"), "fine\n");
    const r = await sandboxSh(s.ws, `cat public`, deny);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("fine\n");
    expect(r.stderr).not.toMatch(/^vak: refused/m);
  });
});
