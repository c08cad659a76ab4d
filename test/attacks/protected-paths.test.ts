import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { listTree, scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

const DEEP = "a/b/c/d/e"; // a protected path below it sits at depth 6

/** Plants a nested repository (with config and hooks) at dir. */
function nestedRepo(dir: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync("git", ["init", "-q"], { cwd: dir });
}

describe("protected paths stay read-only inside a writable workspace", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
    nestedRepo(join(s.ws, DEEP));
  });
  afterEach(() => s.cleanup());

  const configOf = (repo: string) => readFileSync(join(repo, ".git/config"), "utf8");

  it("existing .git/config at depth 1 and depth 6 cannot be overwritten, appended, truncated or replaced", async () => {
    const before = [configOf(s.ws), configOf(join(s.ws, DEEP))];
    const r = await sandboxSh(
      s.ws,
      [".git/config", `${DEEP}/.git/config`]
        .map((p) => `echo '[core] fsmonitor=evil' > ${p}; echo x >> ${p}; truncate -s0 ${p}; cp /dev/null ${p}.new && mv ${p}.new ${p}; rm -f ${p}; ln -sf /tmp/x ${p}`)
        .join("; ") + "; true",
    );
    expect(r.code).toBe(0);
    expect([configOf(s.ws), configOf(join(s.ws, DEEP))]).toEqual(before);
    expect(r.stderr).toContain("protected path .git/config");
  });

  it("git config edits of a protected file are refused, and git says so", async () => {
    const r = await sandboxSh(s.ws, `git config core.fsmonitor 'touch /tmp/pwned'; echo status=$?`);
    expect(r.stdout).toContain("status=");
    expect(r.stdout).not.toContain("status=0");
    expect(configOf(s.ws)).not.toContain("fsmonitor");
  });

  it("a hook cannot be created at depth 1 or depth 6, directly or by renaming a sample", async () => {
    const r = await sandboxSh(
      s.ws,
      [".git/hooks", `${DEEP}/.git/hooks`]
        .map((h) => `echo 'touch /tmp/pwned' > ${h}/pre-commit; mv ${h}/pre-commit.sample ${h}/pre-commit; ln -s /bin/sh ${h}/post-checkout; chmod +x ${h}/*.sample`)
        .join("; ") + "; true",
    );
    expect(r.code).toBe(0);
    for (const h of [".git/hooks", `${DEEP}/.git/hooks`]) {
      expect(existsSync(join(s.ws, h, "pre-commit"))).toBe(false);
      expect(existsSync(join(s.ws, h, "post-checkout"))).toBe(false);
    }
  });

  it("missing protected paths cannot be created at depth 1 or depth 6, and the host is left without placeholders", async () => {
    const before = listTree(s.ws);
    const names = [".envrc", ".vscode/settings.json", ".mcp.json", ".gitmodules", ".idea/workspace.xml", ".husky/pre-commit", ".vak/config.toml", ".bashrc", ".profile"];
    const script = ["", `${DEEP}/`, "fresh/dir/"]
      .flatMap((prefix) => names.map((n) => `mkdir -p ${prefix}${n.includes("/") ? n.split("/")[0] : "."} 2>/dev/null; echo evil > ${prefix}${n}`))
      .join("; ");
    const r = await sandboxSh(s.ws, `${script}; true`);
    expect(r.code).toBe(0);
    const after = listTree(s.ws).filter((p) => !p.startsWith("fresh"));
    expect(after).toEqual(before);
    // "fresh/dir" was created by the command itself (allowed); nothing protected inside it.
    expect(listTree(join(s.ws, "fresh"))).toEqual(["dir"]);
  });

  it("a new repository cannot be created anywhere in the workspace (git init writes .git/config)", async () => {
    const r = await sandboxSh(s.ws, `mkdir -p x/y/z && cd x/y/z && git init -q; echo status=$?`);
    expect(r.stdout).not.toContain("status=0");
    expect(existsSync(join(s.ws, "x/y/z/.git"))).toBe(false);
  });

  it(".git cannot be moved aside and replaced", async () => {
    const r = await sandboxSh(s.ws, `mv .git g; mkdir -p g2/hooks && mv g2 .git; mv ${DEEP}/.git ${DEEP}/g; true`);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, ".git/config"))).toBe(true);
    expect(existsSync(join(s.ws, "g"))).toBe(false);
    expect(existsSync(join(s.ws, DEEP, ".git/config"))).toBe(true);
  });

  it("a symlink or hardlink elsewhere does not open a protected file for writing", async () => {
    const before = configOf(s.ws);
    const r = await sandboxSh(s.ws, `ln -s .git/config cfg && echo evil > cfg; ln .git/config hard && echo evil > hard; echo evil > /proc/self/cwd/.git/config; true`);
    expect(r.code).toBe(0);
    expect(configOf(s.ws)).toBe(before);
    expect(existsSync(join(s.ws, "hard"))).toBe(false);
  });

  it("a read-only fd of a protected file cannot be reopened for writing through /proc/self/fd", async () => {
    const before = configOf(s.ws);
    const r = await sandboxSh(s.ws, `exec 7<.git/config; echo evil > /proc/self/fd/7; echo evil > /dev/fd/7; true`);
    expect(r.code).toBe(0);
    expect(configOf(s.ws)).toBe(before);
  });

  it("protected names match regardless of case", async () => {
    const r = await sandboxSh(s.ws, `echo evil > .ENVRC; mkdir .VSCode; echo evil > .Git/CONFIG; true`);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, ".ENVRC"))).toBe(false);
    expect(existsSync(join(s.ws, ".VSCode"))).toBe(false);
  });

  it(".git/commondir cannot redirect the repository to an attacker's config (host code execution)", async () => {
    const pwned = join(s.root, "PWNED_commondir");
    const r = await sandboxSh(s.ws, `mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/; printf '[core]\\n\\tfsmonitor = "touch ${pwned}; false"\\n' > evil/config; echo ../evil > .git/commondir; echo ../evil > ${DEEP}/.git/commondir; true`);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, ".git/commondir"))).toBe(false);
    expect(existsSync(join(s.ws, DEEP, ".git/commondir"))).toBe(false);
    execFileSync("git", ["status"], { cwd: s.ws, stdio: "ignore" });
    expect(existsSync(pwned)).toBe(false);
  });

  it("a directory cannot be turned into a bare repository that the host's git would trust", async () => {
    const pwned = join(s.root, "PWNED_bare");
    const r = await sandboxSh(s.ws, `mkdir -p pkg/objects pkg/refs && echo "ref: refs/heads/main" > pkg/HEAD; printf '[core]\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = "touch ${pwned}; false"\\n' > pkg/config; true`);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, "pkg/HEAD"))).toBe(false);
    expect(r.stderr).toContain("would make this directory a git repository");
  });

  it("the config and hooks of an existing bare repository in the workspace are protected", async () => {
    execFileSync("git", ["init", "-q", "--bare", join(s.ws, "vendor/lib.git")]);
    const before = readFileSync(join(s.ws, "vendor/lib.git/config"), "utf8");
    const r = await sandboxSh(s.ws, `echo '[core] fsmonitor=evil' >> vendor/lib.git/config; echo evil > vendor/lib.git/hooks/post-update; true`);
    expect(r.code).toBe(0);
    expect(readFileSync(join(s.ws, "vendor/lib.git/config"), "utf8")).toBe(before);
    expect(existsSync(join(s.ws, "vendor/lib.git/hooks/post-update"))).toBe(false);
  });

  it("a submodule's git directory cannot be swapped for a prepared one (rename of an ancestor)", async () => {
    const pwned = join(s.root, "PWNED_submodule");
    mkdirSync(join(s.ws, ".git/modules/sub/hooks"), { recursive: true });
    writeFileSync(join(s.ws, ".git/modules/sub/config"), "[core]\n");
    const r = await sandboxSh(
      s.ws,
      `mkdir -p stage/hooks && printf '[core]\\n\\tfsmonitor = "touch ${pwned}"\\n' > stage/config; mv .git/modules/sub old; mv stage .git/modules/sub2; mv stage .git/modules/sub; ln -s ../../stage .git/modules/sub3; true`,
    );
    expect(r.code).toBe(0);
    expect(readFileSync(join(s.ws, ".git/modules/sub/config"), "utf8")).toBe("[core]\n");
    expect(existsSync(join(s.ws, ".git/modules/sub2"))).toBe(false);
    expect(existsSync(join(s.ws, ".git/modules/sub3"))).toBe(false);
    expect(existsSync(join(s.ws, "old"))).toBe(false);
  });

  it("granting the repository's .git itself (to commit from a subdirectory) keeps its hooks and config protected", async () => {
    mkdirSync(join(s.ws, "pkg"));
    const before = configOf(s.ws);
    const r = await sandboxSh(join(s.ws, "pkg"), `echo evil > ../.git/hooks/pre-commit; echo '[alias]' >> ../.git/config; echo ok > ../.git/scratch-note; true`, ["--allow-write", join(s.ws, ".git")]);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, ".git/hooks/pre-commit"))).toBe(false);
    expect(configOf(s.ws)).toBe(before);
    expect(readFileSync(join(s.ws, ".git/scratch-note"), "utf8")).toBe("ok\n");
  });

  it("ordinary git work still runs: status, add, commit", async () => {
    writeFileSync(join(s.ws, "new.txt"), "data\n");
    const r = await sandboxSh(s.ws, `git status --short && git add new.txt && git -c user.email=a@b.invalid -c user.name=a commit -qm "from the sandbox" && git log --oneline | head -1`);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("?? new.txt");
    expect(r.stdout).toContain("from the sandbox");
  });
});
