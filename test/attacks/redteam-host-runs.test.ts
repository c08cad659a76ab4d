import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, sandboxSh } from "../support/vak.js";

/**
 * Files that a tool on the host reads and runs what they say, without being asked to run the project:
 * a version control system on `log`/`diff` (its pager, hooks), an editor or an agent on opening the
 * folder (language servers, MCP servers, hooks), a build tool's settings read before any build file, the
 * desktop session at login. A sandboxed command must not be able to plant or change any of them, by any
 * way of writing (a write, a rename onto it, a link, a copy of a prepared directory).
 */

/** Each way a command might put `body` at `rel` (relative to the workspace). */
function plantAll(rel: string): string {
  const q = `'${rel}'`;
  return [
    `mkdir -p "$(dirname ${q})"`,
    `echo evil > ${q}`,
    `echo evil >> ${q}`,
    `echo evil > /tmp/src && cp /tmp/src ${q}.new; mv ${q}.new ${q}`,
    `echo evil > ${q}.2; ln ${q}.2 ${q}`,
    `ln -s /tmp/src ${q}`,
  ].join("; ");
}

const REPO_FILES: [string, string][] = [
  [".jj/repo/config.toml", "Jujutsu's repository config"],
  [".jj/repo/store/git_target", "names the git directory Jujutsu runs git on"],
  [".sl/config", "Sapling"],
  [".helix/languages.toml", "Helix"],
  [".helix/config.toml", "Helix"],
  ["bunfig.toml", "Bun"],
  [".bunfig.toml", "Bun"],
  [".bazelrc", "Bazel"],
  [".mvn/jvm.config", "Maven"],
  [".mvn/extensions.xml", "Maven"],
  [".qwen/settings.json", "Qwen Code"],
  [".kilocode/mcp.json", "Kilo Code"],
  [".clinerules/hooks/PreToolUse", "Cline"],
  ["crush.json", "Crush"],
  [".crush.json", "Crush"],
];

describe("files a host tool runs from a repository cannot be planted", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());

  for (const [rel, tool] of REPO_FILES)
    it(`${rel} (${tool}) cannot be created at the top or deep in the workspace, by write, rename, hard or symbolic link`, async () => {
      const deep = `pkg/sub/${rel}`;
      const r = await sandboxSh(s.ws, `${plantAll(rel)}; ${plantAll(deep)}; true`);
      expect(r.code).toBe(0);
      expect(r.stderr).toContain(`protected path`);
      for (const p of [rel, deep]) expect(existsSync(join(s.ws, p)), p).toBe(false);
    });

  it("an existing .jj/repo/config.toml and .mvn/jvm.config keep their content", async () => {
    const files = [".jj/repo/config.toml", ".mvn/jvm.config"];
    for (const f of files) {
      mkdirSync(dirname(join(s.ws, f)), { recursive: true });
      writeFileSync(join(s.ws, f), "# ok\n");
    }
    const r = await sandboxSh(
      s.ws,
      `printf '[ui]\\npager = ["sh", "-c", "touch /tmp/pwned"]\\n' >> .jj/repo/config.toml; echo -javaagent:/tmp/evil.jar > .mvn/jvm.config; truncate -s0 .mvn/jvm.config; mv .mvn .mvn-old; mv .jj/repo .jj/repo-old; true`,
    );
    expect(r.code).toBe(0);
    for (const f of files) expect(readFileSync(join(s.ws, f), "utf8")).toBe("# ok\n");
  });

  it("ordinary files of the same names elsewhere stay writable (no over-reach)", async () => {
    const r = await sandboxSh(s.ws, `mkdir -p docs && echo ok > docs/bazelrc.md && echo ok > jj-config.toml && mkdir -p helix && echo ok > helix/config.toml && echo done`);
    expect(r.stdout).toContain("done");
    expect(readFileSync(join(s.ws, "helix/config.toml"), "utf8")).toBe("ok\n");
  });
});

const HOME_FILES = [
  ".config/systemd/user/evil.service",
  ".config/systemd/user/default.target.wants/evil.service",
  ".config/autostart/evil.desktop",
  ".config/environment.d/50-evil.conf",
  ".config/jj/config.toml",
  ".config/jj/repos/0123abcd/config.toml",
  ".jjconfig.toml",
  ".config/helix/languages.toml",
  ".config/zed/settings.json",
  ".config/gh/config.yml",
  ".config/starship.toml",
  ".pam_environment",
  ".xprofile",
  ".xsessionrc",
  ".bunfig.toml",
  ".local/lib/python3.11/site-packages/evil.pth",
  ".local/lib/python3.11/site-packages/usercustomize.py",
  ".local/share/nvim/site/plugin/evil.lua",
  ".vim/plugin/evil.vim",
  ".config/emacs/init.el",
  ".oh-my-zsh/custom/evil.zsh",
  ".ipython/profile_default/startup/00-evil.py",
  ".jupyter/jupyter_server_config.py",
  ".gradle/init.d/evil.gradle",
  ".gradle/init.gradle",
  ".gradle/gradle.properties",
];

describe("a grant that covers the home directory does not let a command plant what the session runs at login or on a prompt", () => {
  let s: Scratch;
  let home: string;
  beforeEach(() => {
    s = scratch({ git: true });
    home = join(s.root, "home");
    mkdirSync(join(home, ".config"), { recursive: true });
  });
  afterEach(() => s.cleanup());

  it("systemd user units, autostart entries, environment.d, jj, helix, zed, gh, starship and login files are refused", async () => {
    const script = HOME_FILES.map((f) => plantAll(join(home, f))).join("; ") + "; true";
    const r = await sandboxSh(s.ws, script, ["--allow-write", home], { env: baseEnv({ HOME: home }) });
    expect(r.code).toBe(0);
    for (const f of HOME_FILES) expect(existsSync(join(home, f)), f).toBe(false);
    // The rest of the home directory is what the grant says: writable.
    const ok = await sandboxSh(s.ws, `echo ok > ${home}/.config/notes.txt && echo done`, ["--allow-write", home], { env: baseEnv({ HOME: home }) });
    expect(ok.stdout).toContain("done");
  });
});

/**
 * A hook is held; what it runs by path is the host's next command as much: `.git/hooks/pre-commit` running
 * `./scripts/check.sh` runs whatever the sandbox wrote there at the user's next `git commit`.
 */
describe("what an existing git hook runs cannot be rewritten to run at the user's next commit", () => {
  let s: Scratch;
  let mark: string;
  beforeEach(() => {
    s = scratch({ git: true });
    mark = join(s.root, "PWNED");
  });
  afterEach(() => s.cleanup());

  const put = (rel: string, text: string) => {
    mkdirSync(dirname(join(s.ws, rel)), { recursive: true });
    writeFileSync(join(s.ws, rel), text, { mode: 0o755 });
  };
  const gitHost = (...args: string[]) =>
    execFileSync("git", ["-c", "user.email=t@t.invalid", "-c", "user.name=t", ...args], { cwd: s.ws, stdio: "ignore", env: { ...process.env, HOME: s.root } });
  /** The user's next commit on the host, after the sandbox: the hooks run for real. */
  const commitOnHost = () => gitHost("commit", "-q", "--allow-empty", "-m", "after the agent");

  it("a script the default hook runs by path, and the script that one runs, are held", async () => {
    put(".git/hooks/pre-commit", "#!/bin/sh\n./scripts/check.sh\n");
    put("scripts/check.sh", "#!/bin/sh\nsh tools/lint.sh\n");
    put("tools/lint.sh", "exit 0\n");
    const r = await sandboxSh(s.ws, `echo 'touch ${mark}' > scripts/check.sh; echo 'touch ${mark}' > tools/lint.sh; mv scripts scripts.old; mkdir -p scripts; true`);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/named by the hook/);
    commitOnHost();
    expect(existsSync(mark)).toBe(false);
  });

  it("a script a core.hooksPath hook names, and one husky's layout (.husky/_ running .husky/NAME) names, are held", async () => {
    gitHost("config", "core.hooksPath", ".husky/_");
    put(".husky/_/pre-commit", '#!/bin/sh\n. "$(dirname "$0")/h"\n');
    put(".husky/_/h", '#!/bin/sh\nn=$(basename "$0")\nsh -e "$(dirname "$(dirname "$0")")/$n"\n');
    put(".husky/pre-commit", "./bin/verify\n");
    put("bin/verify", "#!/bin/sh\nexit 0\n");
    const r = await sandboxSh(s.ws, `echo 'touch ${mark}' >> bin/verify; rm -f bin/verify; true`);
    expect(r.code).toBe(0);
    expect(readFileSync(join(s.ws, "bin/verify"), "utf8")).toBe("#!/bin/sh\nexit 0\n");
    commitOnHost();
    expect(existsSync(mark)).toBe(false);
  });

  it("a script a hook names that does not exist yet cannot be planted", async () => {
    put(".git/hooks/pre-push", "#!/bin/sh\n[ -x ./scripts/prepush.sh ] && ./scripts/prepush.sh\nexit 0\n");
    const r = await sandboxSh(s.ws, `mkdir -p scripts; printf '#!/bin/sh\\ntouch ${mark}\\n' > scripts/prepush.sh; chmod +x scripts/prepush.sh; true`);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, "scripts/prepush.sh"))).toBe(false);
  });

  it("a directory a hook passes to a tool (eslint src/) stays writable, and samples name nothing", async () => {
    put(".git/hooks/pre-commit", "#!/bin/sh\nnpx eslint src/\n");
    put("src/index.js", "1\n");
    const r = await sandboxSh(s.ws, `echo 2 > src/index.js && echo 2 > src/new.js && echo done`);
    expect(r.stdout).toContain("done");
    expect(readFileSync(join(s.ws, "src/index.js"), "utf8")).toBe("2\n");
  });

  // Not closed (see ARCHITECTURE's known limits): a hook that runs the project's own scripts by a package
  // manager (`npm test`) runs package.json's scripts, which are the project's files and stay writable.
  it.fails("a hook running `npm test` does not run a test script the sandbox rewrote (known limit)", async () => {
    put(".git/hooks/pre-commit", "#!/bin/sh\nnpm test --silent\n");
    put("package.json", '{"name":"x","scripts":{"test":"true"}}\n');
    await sandboxSh(s.ws, `printf '{"name":"x","scripts":{"test":"touch ${mark}"}}\\n' > package.json; true`);
    commitOnHost();
    expect(existsSync(mark)).toBe(false);
  });
});

/**
 * A protected config that the host acts on by itself names scripts by path: direnv sources what `.envrc`
 * sources at the next cd, an agent starts the MCP server `.mcp.json` names when it opens the folder,
 * pre-commit runs a `repo: local` entry at the next commit. The config is held; what it names must be too.
 */
describe("what a protected config runs by path cannot be rewritten", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());
  const put = (rel: string, text: string) => {
    mkdirSync(dirname(join(s.ws, rel)), { recursive: true });
    writeFileSync(join(s.ws, rel), text, { mode: 0o755 });
  };

  const CASES: [string, string, string][] = [
    [".envrc", "source_env ./env/dev.sh\n", "env/dev.sh"],
    ["app/.envrc", "source ./local.sh\n", "app/local.sh"],
    [".mcp.json", '{"mcpServers":{"x":{"command":"node","args":["./mcp/server.mjs"]}}}\n', "mcp/server.mjs"],
    [".claude/settings.json", '{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"scripts/on-stop.sh"}]}]}}\n', "scripts/on-stop.sh"],
    [".vscode/tasks.json", '{"tasks":[{"label":"x","command":"./tools/dev.sh","runOptions":{"runOn":"folderOpen"}}]}\n', "tools/dev.sh"],
    [".pre-commit-config.yaml", "repos:\n- repo: local\n  hooks:\n  - id: lint\n    name: lint\n    entry: scripts/lint.sh\n    language: script\n", "scripts/lint.sh"],
    ["lefthook.yml", "pre-commit:\n  commands:\n    x:\n      run: ./ci/check.sh\n", "ci/check.sh"],
  ];

  for (const [config, text, script] of CASES)
    it(`${script}, which ${config} runs, cannot be written, replaced or removed`, async () => {
      put(config, text);
      put(script, "#!/bin/sh\nexit 0\n");
      const r = await sandboxSh(s.ws, `echo 'touch /tmp/pwned' >> '${script}'; printf x > /tmp/n; mv /tmp/n '${script}'; rm -f '${script}'; true`);
      expect(r.code).toBe(0);
      expect(r.stderr).toContain(`named by`);
      expect(readFileSync(join(s.ws, script), "utf8")).toBe("#!/bin/sh\nexit 0\n");
    });

  it("prose in agent directories (a Markdown command naming source files) and a debug launch config leave those files writable", async () => {
    put(".claude/commands/fix.md", "Fix the bug in src/app.js and update ./README\n");
    put(".vscode/launch.json", '{"configurations":[{"type":"node","request":"launch","program":"src/app.js"}]}\n');
    put("src/app.js", "1\n");
    const r = await sandboxSh(s.ws, `echo 2 > src/app.js && echo done`);
    expect(r.stdout).toContain("done");
    expect(readFileSync(join(s.ws, "src/app.js"), "utf8")).toBe("2\n");
  });
});

/**
 * Not closed (see the redteam report): git's object store, index and refs are writable so that git works
 * inside, so a command can put a protected file into the index and HEAD without writing the working tree
 * (git hash-object, update-index --cacheinfo, commit-tree, update-ref). The user's next ordinary
 * `git checkout -- .` or `git stash` on the host writes it out. Closing it means checking, after a run, the
 * index and the refs a run changed for protected paths (or holding .git/index and refs whenever a protected
 * path is tracked), which is larger than a patch.
 */
describe("a protected file smuggled through git's index and history", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());

  it.fails("does not reach the working tree at the user's next git checkout -- . (known limit)", async () => {
    const plant = [
      `b=$(printf 'touch /tmp/pwned\\n' | git hash-object -w --stdin)`,
      `git update-index --add --cacheinfo 100644,$b,.envrc`,
      `git -c user.email=t@t.invalid -c user.name=t commit -qm 'tidy' --no-verify`,
      `git rm -q --cached .envrc; git -c user.email=t@t.invalid -c user.name=t commit -qm 'x' --no-verify; git reset -q --soft HEAD~1`,
      `git update-index --add --cacheinfo 100644,$b,.envrc`,
      "true",
    ].join("; ");
    const r = await sandboxSh(s.ws, plant);
    expect(r.code).toBe(0);
    expect(existsSync(join(s.ws, ".envrc"))).toBe(false);
    execFileSync("git", ["checkout", "--", "."], { cwd: s.ws, stdio: "ignore" });
    expect(existsSync(join(s.ws, ".envrc"))).toBe(false);
  });
});
