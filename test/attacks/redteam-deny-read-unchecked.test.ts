import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, renameSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

/**
 * The check that a --deny-read file's content is not in git's objects (redteam-deny-read.test.ts) must hold
 * where git stores that content in a form the check did not look at, and must refuse, not pass, where it
 * cannot look: a blob stored with its line ends normalised, a version 1 pack index, an object store reached
 * through alternates, a pack whose index is missing or damaged (git index-pack rebuilds it inside), a file
 * bigger than one read.
 */
describe("--deny-read: git's copy of a denied file is found in every form git keeps, or the run is refused", () => {
  let s: Scratch;
  const SECRET = "API_KEY=sk-unchecked-0123456789abcdef";
  const git = (cwd: string, ...a: string[]) => execFileSync("git", ["-c", "user.email=t@t.invalid", "-c", "user.name=t", ...a], { cwd, stdio: "ignore" });
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());
  const packDir = () => join(s.ws, ".git/objects/pack");
  const commitSecret = (content = `${SECRET}\n`) => {
    writeFileSync(join(s.ws, "secret.env"), content);
    git(s.ws, "add", "secret.env");
    git(s.ws, "commit", "-qm", "oops");
  };
  const leaked = "git show HEAD:secret.env; git -c core.autocrlf=false show HEAD:secret.env; git cat-file -p HEAD:secret.env; echo ran";

  it("a file with CRLF line ends that git stored with LF (core.autocrlf) is found", async () => {
    writeFileSync(join(s.ws, "secret.env"), `${SECRET}\r\nSECOND=two\r\n`);
    git(s.ws, "-c", "core.autocrlf=true", "add", "secret.env");
    git(s.ws, "commit", "-qm", "oops");
    const r = await sandboxSh(s.ws, leaked, ["--deny-read", "secret.env"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.stdout).not.toContain("ran");
    expect(r.code).toBe(125);
    expect(r.stderr).toContain("secret.env");
  });

  it("the same when a CRLF straddles the check's 1 MiB reads", async () => {
    const head = `${SECRET}\r\n`;
    const pad = "p".repeat((1 << 20) - head.length - 1);
    writeFileSync(join(s.ws, "secret.env"), `${head}${pad}\r\nTAIL=1\r\n`);
    git(s.ws, "-c", "core.autocrlf=true", "add", "secret.env");
    git(s.ws, "commit", "-qm", "oops");
    const r = await sandboxSh(s.ws, "git show HEAD:secret.env | head -c 64; echo ran", ["--deny-read", "secret.env"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.code).toBe(125);
  });

  it("a blob in a version 1 pack index is found", async () => {
    commitSecret();
    git(s.ws, "-c", "pack.indexVersion=1", "gc", "-q");
    expect(readdirSync(packDir()).some((n) => n.endsWith(".idx"))).toBe(true);
    const r = await sandboxSh(s.ws, leaked, ["--deny-read", "secret.env"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.code).toBe(125);
  });

  it("a blob in an object store the repository borrows through objects/info/alternates is found", async () => {
    const origin = join(s.ws, "vendor", "origin");
    mkdirSync(origin, { recursive: true });
    git(origin, "init", "-q");
    writeFileSync(join(origin, "secret.env"), `${SECRET}\n`);
    git(origin, "add", "secret.env");
    git(origin, "commit", "-qm", "there");
    execFileSync("rm", [join(origin, "secret.env")]);
    // The workspace's own store does not hold it; git reads the borrowed store for `git cat-file <id>`.
    writeFileSync(join(s.ws, "secret.env"), `${SECRET}\n`);
    const id = execFileSync("git", ["hash-object", "secret.env"], { cwd: s.ws, encoding: "utf8" }).trim();
    mkdirSync(join(s.ws, ".git/objects/info"), { recursive: true });
    writeFileSync(join(s.ws, ".git/objects/info/alternates"), `${join(origin, ".git/objects")}\n`);
    const r = await sandboxSh(s.ws, `git cat-file -p ${id}; echo ran`, ["--deny-read", "secret.env"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.code).toBe(125);
    expect(r.stderr).toContain("secret.env");
  });

  it("a pack whose index is missing is refused as unchecked (git index-pack would rebuild it inside)", async () => {
    commitSecret();
    git(s.ws, "gc", "-q");
    const idx = readdirSync(packDir()).find((n) => n.endsWith(".idx"))!;
    renameSync(join(packDir(), idx), join(s.ws, "elsewhere.idx"));
    const r = await sandboxSh(s.ws, "cd .git/objects/pack && git index-pack *.pack >/dev/null && cd ../../.. && git show HEAD:secret.env; echo ran", ["--deny-read", "secret.env", "--deny-read", "elsewhere.idx"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/cannot (tell|check)/);
    expect(r.stderr).toContain(`--deny-read ${join(s.ws, ".git/objects")}`);
  });

  it("a truncated or unknown pack index is refused as unchecked, not read as 'not there'", async () => {
    commitSecret();
    git(s.ws, "gc", "-q");
    const idx = join(packDir(), readdirSync(packDir()).find((n) => n.endsWith(".idx"))!);
    truncateSync(idx, 600);
    const r = await sandboxSh(s.ws, "cd .git/objects/pack && rm -f *.idx; git index-pack *.pack >/dev/null; cd ../../.. && git show HEAD:secret.env; echo ran", ["--deny-read", "secret.env"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/cannot (tell|check)/);
  });

  it("a committed file bigger than one read (70 MB) is hashed whole and found", async () => {
    const big = `${SECRET}\n${"x".repeat(70 << 20)}\n`;
    commitSecret(big);
    const r = await sandboxSh(s.ws, "git cat-file -p HEAD:secret.env | head -c 64; echo ran", ["--deny-read", "secret.env"]);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.code).toBe(125);
  }, 60_000);

  it("a .git file that does not name a git directory is refused as unchecked", async () => {
    const sub = join(s.ws, "sub");
    mkdirSync(sub);
    writeFileSync(join(sub, ".git"), "not a pointer\n");
    writeFileSync(join(sub, "secret.env"), `${SECRET}\n`);
    const r = await sandboxSh(s.ws, "echo ran", ["--deny-read", "sub/secret.env"]);
    expect(r.code).toBe(125);
    expect(r.stderr).toContain(join(sub, ".git"));
  });

  it("a denied file git never held still runs, with alternates, CRLF and a v1 index all present", async () => {
    commitSecret();
    git(s.ws, "-c", "pack.indexVersion=1", "gc", "-q");
    writeFileSync(join(s.ws, "other.env"), "NEVER=committed\r\n");
    mkdirSync(join(s.ws, ".git/objects/info"), { recursive: true });
    writeFileSync(join(s.ws, ".git/objects/info/alternates"), "\n# a comment\n");
    const r = await sandboxSh(s.ws, "cat other.env; echo ran", ["--deny-read", "other.env"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("ran");
    expect(r.stdout).not.toContain("NEVER=committed");
  });
});
