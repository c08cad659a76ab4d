import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
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
