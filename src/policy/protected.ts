/**
 * Protected paths: read-only even inside a writable grant, at any depth, whether
 * or not they exist yet. Each is something the host runs or trusts later, so a
 * sandboxed write there would run code outside the sandbox.
 *
 * Patterns are path components; `**` matches any number of components, and
 * matching ignores ASCII case. A match counts when it reaches below the root of
 * the writable grant (so granting /repo/.git still protects /repo/.git/hooks).
 * A `tree` covers the entry and everything below it; a `file` covers the entry
 * itself (it may not be created, written, renamed or removed). An entry that
 * could become an ancestor of a protected path (`.git/modules/x` for
 * `.git/modules/**\/config`) may not be created, renamed or removed either.
 * The launcher's write guard enforces these, plus two git rules no pattern can
 * express: no HEAD or commondir outside .git, and no change to the config or
 * hooks of any directory that is a git directory.
 */
export interface ProtectedPath {
  readonly pattern: string;
  readonly kind: "tree" | "file";
  readonly why: string;
}

/**
 * What is on this list, and what is not. An entry is here when a tool that
 * is not itself a "run this project's code" command reads it and runs what it
 * says: the shell on start-up or on `cd` (direnv, mise), git on every commit
 * or status (hooks, config, hook managers), an editor or an agent when the
 * folder is opened (tasks, MCP servers, hooks), a package manager before it
 * runs anything (npmrc, yarnPath, pnpmfile), a debugger or linter on start.
 * A project's own build and test files (package.json scripts, Makefile,
 * build.rs, conftest.py) are not: running them is running the project, which
 * is what the sandbox was for. Reviewed against Codex (`.git`, `.codex`,
 * `.agents` read-only), sandbox-runtime (`.gitconfig`, `.gitmodules`, shell rc
 * files, `.ripgreprc`, `.mcp.json`, `.vscode`, `.idea`, `.claude/commands`,
 * `.claude/agents`, `.git/hooks`, `.git/config`) and Claude Code (which uses
 * sandbox-runtime's list): everything they protect is here, most of it more
 * broadly (all of `.claude`, all of `.git`'s redirects).
 *
 * Files that a repository's git config or a protected link points to are not
 * on this list by name: `held.ts` finds them on disk for each run.
 */
const RC_FILES = [
  ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
  ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc", ".inputrc",
] as const;

const file = (pattern: string, why: string): ProtectedPath => ({ pattern, kind: "file", why });
const tree = (pattern: string, why: string): ProtectedPath => ({ pattern, kind: "tree", why });

// lefthook reads lefthook.*, .lefthook.* and .config/lefthook.*, each with a -local twin, in five formats.
const LEFTHOOK = ["yml", "yaml", "toml", "json", "jsonc"].flatMap((ext) =>
  ["lefthook", ".lefthook", ".config/lefthook"].flatMap((base) => [`${base}.${ext}`, `${base}-local.${ext}`]),
);

export const PROTECTED_PATHS: readonly ProtectedPath[] = [
  // Vak itself.
  tree(".vak", "Vak's repository configuration"),
  tree("node_modules/vak", "a copy of Vak that `npx vak` would run next, outside any sandbox"),
  file("node_modules/.bin/vak", "the launcher `npx vak` looks for first, walking up from the current directory"),

  // git: what it reads from a repository and runs.
  file(".git", "a repository's git dir, or a gitdir pointer that redirects git"),
  file(".git/config", "git configuration can run commands (core.fsmonitor, core.pager)"),
  file(".git/config.worktree", "per-worktree git configuration"),
  file(".git/commondir", "redirects git to another git directory, its config and hooks"),
  file(".git/modules/**/commondir", "redirects a submodule's git directory"),
  tree(".git/hooks", "git hooks run on the host"),
  file(".git/info/attributes", "chooses the diff, merge and filter drivers git runs for each path"),
  file(".git/modules/**/config", "a submodule's git configuration"),
  file(".git/modules/**/config.worktree", "a submodule's per-worktree git configuration"),
  tree(".git/modules/**/hooks", "a submodule's git hooks"),
  file(".git/modules/**/info/attributes", "a submodule's driver choices"),
  file(".git/worktrees/**/config.worktree", "a worktree's git configuration"),
  file(".git/worktrees/**/commondir", "redirects a worktree to another git dir"),
  file(".git/worktrees/**/gitdir", "redirects a worktree's git dir"),
  file(".gitmodules", "submodule URLs and commands"),
  file(".lfsconfig", "git-lfs settings, among them custom transfer agents (lfs.customtransfer.*.path) it runs"),
  file(".gitconfig", "a user git configuration, when a grant covers a home directory"),
  file(".hg/hgrc", "Mercurial runs the hooks a repository's hgrc names"),
  file(".hgrc", "a user Mercurial configuration (hooks), when a grant covers a home directory"),
  file(".sl/config", "Sapling runs the hooks a repository's config names"),
  file(".jj/repo/config.toml", "Jujutsu's repository config (before 0.38): its pager, fix and merge tools are commands jj runs"),
  file(".jj/repo/store/git_target", "names the git directory Jujutsu runs git on (its config and hooks)"),

  // git hook managers: the installed hook reads these on every commit and runs what they say.
  tree(".husky", "git hooks installed by husky"),
  file(".pre-commit-config.yaml", "pre-commit's hooks (`repo: local` entries are commands) run on every commit"),
  file(".overcommit.yml", "overcommit's hooks run on every commit"),
  ...LEFTHOOK.map((p) => file(p, "lefthook's hooks run on every commit")),
  tree(".lefthook", "lefthook's hook scripts (source_dir)"),
  tree(".lefthook-local", "lefthook's local hook scripts (source_dir_local)"),

  // The shell: on start-up and on cd.
  file(".envrc", "direnv runs it on cd"),
  ...["mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".config/mise.toml", ".config/mise/config.toml", ".mise/config.toml"].map((p) =>
    file(p, "mise runs its hooks and env scripts on cd, once the file is trusted (by path)"),
  ),
  ...RC_FILES.map((f) => file(f, "shell startup file")),

  // Editors: tasks, settings and run configurations that run commands when a folder is opened.
  tree(".vscode", "editor tasks and settings that run commands"),
  tree(".idea", "editor run configurations"),
  tree(".fleet", "JetBrains Fleet run configurations"),
  tree(".zed", "Zed tasks and settings (language servers, formatters as commands)"),
  tree(".helix", "Helix's workspace config and languages.toml (language servers and formatters as commands)"),
  tree(".devcontainer", "dev container commands that editors run"),
  file(".devcontainer.json", "dev container commands that editors run"),
  file(".nvim.lua", "Neovim runs it on start with 'exrc'"),
  file(".nvimrc", "Neovim runs it on start with 'exrc'"),
  file(".exrc", "Vim and Neovim run it on start with 'exrc'"),
  file(".dir-locals.el", "Emacs applies (and may evaluate) it when a file below is opened"),
  file(".dir-locals-2.el", "Emacs applies (and may evaluate) it when a file below is opened"),

  // Coding agents: their settings name hooks, MCP servers and commands they start.
  tree(".claude", "agent settings and hooks that run commands"),
  // Held even where a grant reaches inside ~/.claude (the claude preset's projects/): every later session loads it.
  tree(".claude/projects/**/memory", "Claude Code's auto memory: every later session in that folder loads it into its prompt"),
  tree(".codex", "Codex's project config (MCP servers, commands) and its sandbox settings"),
  tree(".agents", "agent skills and instructions that Codex and others load and run"),
  tree(".gemini", "Gemini CLI settings (MCP servers, tool commands)"),
  // Held even where a grant reaches inside ~/.gemini (the gemini preset's tmp/): every later session loads it.
  tree(".gemini/tmp/**/memory", "Gemini CLI's project memory (MEMORY.md, GEMINI.md, inbox patches to ~/.gemini/GEMINI.md): every later session in that project loads it into its prompt"),
  // Held even where a grant reaches inside ~/.gemini: Gemini CLI keeps the ripgrep it downloaded in tmp/bin and runs it for every search.
  tree(".gemini/tmp/bin", "Gemini CLI's own ripgrep (tmp/bin/rg), which it runs for every search, preferring it to any rg on PATH"),
  tree(".cursor", "editor agent rules, MCP servers and settings"),
  tree(".windsurf", "Windsurf agent workflows and rules"),
  tree(".continue", "Continue's config (MCP servers, commands)"),
  tree(".roo", "Roo Code's MCP servers and rules"),
  tree(".kiro", "Kiro's agent hooks (commands on file events) and MCP servers"),
  tree(".amazonq", "Amazon Q's MCP servers and rules"),
  tree(".opencode", "opencode's plugins (code it loads) and commands"),
  file("opencode.json", "opencode's project config (MCP servers as commands)"),
  file("opencode.jsonc", "opencode's project config (MCP servers as commands)"),
  file(".aider.conf.yml", "aider runs its lint-cmd and test-cmd automatically"),
  file(".mcp.json", "MCP servers that agents start"),
  tree(".qwen", "Qwen Code's settings (MCP servers, tool commands)"),
  tree(".kilocode", "Kilo Code's MCP servers and rules"),
  tree(".clinerules", "Cline's rules and hooks (commands it runs on agent events)"),
  file("crush.json", "Crush's project config (MCP servers and language servers as commands)"),
  file(".crush.json", "Crush's project config (MCP servers and language servers as commands)"),

  // Package managers and toolchains: settings read before anything the user asked for runs.
  file(".npmrc", "npm settings (script-shell, node-options) that run code"),
  file(".yarnrc", "yarn settings that run code"),
  file(".yarnrc.yml", "yarn settings (yarnPath, plugins) that run code"),
  tree(".yarn/releases", "where yarnPath points: the yarn that every `yarn` command runs"),
  tree(".yarn/plugins", "yarn plugins that every `yarn` command loads"),
  file(".pnpmfile.cjs", "pnpm hooks that run on install"),
  file("bunfig.toml", "Bun's settings: its preload scripts run before every `bun run` and `bun test`"),
  file(".bunfig.toml", "Bun's settings: its preload scripts run before every `bun run` and `bun test`"),
  file(".bazelrc", "Bazel's options for every command (--workspace_status_command, --run_under, startup JVM options)"),
  tree(".mvn", "Maven's jvm.config (JVM options such as -javaagent), maven.config, extensions.xml and wrapper, read by every `mvn`"),
  file(".cargo/config.toml", "cargo settings (rustc-wrapper, runners, aliases) that run commands"),
  file(".cargo/config", "cargo settings (the older name) that run commands"),
  file("rust-toolchain.toml", "rustup runs the toolchain it names, which may be a path"),
  file("rust-toolchain", "rustup runs the toolchain it names, which may be a path"),

  // Other tools that read a file in the current directory and run what it says.
  file(".ripgreprc", "ripgrep's --pre command, where RIPGREP_CONFIG_PATH names it"),
  file(".pdbrc", "Python's debugger runs its commands on start"),
  file(".gdbinit", "gdb runs its commands on start"),
  file(".lldbinit", "lldb runs its commands on start"),
  file(".pylintrc", "pylint runs its init-hook (editors run pylint on open)"),
  file("pylintrc", "pylint runs its init-hook (editors run pylint on open)"),

  // A user's own configuration and keys, when a grant covers a home directory.
  tree(".ssh", "SSH keys and configuration"),
  tree(".gnupg", "GnuPG keys and agent settings (pinentry-program is a command)"),
];

/**
 * Protected paths that only mean something in the user's home directory:
 * held there by absolute path (see homeHeld) rather than at any depth, so
 * that a project's own `.config/` or `.aws/` directory stays ordinary.
 */
export const HOME_PROTECTED: readonly ProtectedPath[] = [
  tree(".config/git", "the user's git configuration, attributes and ignore rules ($XDG_CONFIG_HOME/git)"),
  tree(".config/husky", "husky sources its init.sh before every hook"),
  tree(".config/fish", "fish startup files"),
  tree(".config/mise", "mise's global config (hooks, env scripts)"),
  tree(".config/direnv", "direnv's own settings and libraries (direnvrc)"),
  tree(".config/nvim", "Neovim's startup files"),
  tree(".config/Code/User", "VS Code's user settings and tasks"),
  file(".aws/config", "credential_process is a command the AWS tools run"),
  file(".kube/config", "exec credential plugins are commands kubectl runs"),
  file(".docker/config.json", "credential helpers that docker runs"),
  file(".vimrc", "Vim's startup file"),
  file(".emacs", "Emacs's startup file"),
  tree(".emacs.d", "Emacs's startup files"),
  file(".tmux.conf", "tmux runs its run-shell commands"),
  tree(".npm/_npx", "where `npx` keeps the packages it runs"),
  tree(".config/jj", "Jujutsu's user config and the per-repository configs it keeps there (pager, fix and merge tools)"),
  file(".jjconfig.toml", "Jujutsu's user config"),
  tree(".config/helix", "Helix's config and languages.toml (language servers as commands)"),
  tree(".config/zed", "Zed's settings and tasks"),
  tree(".config/gh", "gh's config: its shell aliases are commands"),
  tree(".config/systemd/user", "user services systemd starts at login, outside any sandbox"),
  tree(".config/autostart", "desktop entries the session runs at login"),
  tree(".config/environment.d", "variables systemd sets for every user service (PATH, LD_PRELOAD)"),
  file(".config/starship.toml", "starship runs its custom modules' commands at every prompt"),
  file(".pam_environment", "variables set at login (LD_PRELOAD)"),
  file(".xprofile", "run by the display manager at login"),
  file(".xsessionrc", "run at the start of an X session"),
  tree(".local/lib", "Python's user site-packages: a .pth file or usercustomize there runs in every python on the host"),
  tree(".local/share/nvim", "Neovim loads the plugins under site/ at every start"),
  tree(".vim", "Vim loads its plugin/ and ftplugin/ scripts at every start"),
  tree(".config/emacs", "Emacs's startup files (init.el, early-init.el)"),
  tree(".oh-my-zsh", "oh-my-zsh's custom scripts and plugins, sourced by every zsh"),
  tree(".ipython", "IPython runs the scripts in profile_*/startup at every start"),
  tree(".jupyter", "Jupyter runs its *_config.py files at every start"),
  tree(".gradle/init.d", "Gradle runs its init scripts before every build"),
  file(".gradle/init.gradle", "Gradle runs it before every build"),
  file(".gradle/init.gradle.kts", "Gradle runs it before every build"),
  file(".gradle/gradle.properties", "Gradle's JVM options for every build (org.gradle.jvmargs: -javaagent)"),
];

/**
 * Where the host's tools look instead of a HOME_PROTECTED name when their environment says so: `.config/fish`
 * is `$XDG_CONFIG_HOME/fish` for fish, `.aws/config` is `$AWS_CONFIG_FILE` for the AWS tools. A variable that
 * moves a name moves everything below it. `list`: the variable holds paths separated by colons (KUBECONFIG).
 */
export const HOME_RELOCATED: readonly { name: string; env: string; list?: boolean }[] = [
  { name: ".config", env: "XDG_CONFIG_HOME" },
  { name: ".local/share", env: "XDG_DATA_HOME" },
  { name: ".aws/config", env: "AWS_CONFIG_FILE" },
  { name: ".kube/config", env: "KUBECONFIG", list: true },
  { name: ".docker", env: "DOCKER_CONFIG" },
  { name: ".gradle", env: "GRADLE_USER_HOME" },
  { name: ".ipython", env: "IPYTHONDIR" },
  { name: ".jupyter", env: "JUPYTER_CONFIG_DIR" },
];

const same = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** Does pattern[j..] match comps[i..] (to the end of comps when wholeRest)? */
function matchesAt(comps: string[], i: number, pattern: string[], j: number, wholeRest: boolean): boolean {
  if (j === pattern.length) return !wholeRest || i === comps.length;
  if (pattern[j] === "**") {
    for (let k = i; k <= comps.length; k++) if (matchesAt(comps, k, pattern, j + 1, wholeRest)) return true;
    return false;
  }
  const c = comps[i];
  const p = pattern[j];
  return c !== undefined && p !== undefined && same(c, p) && matchesAt(comps, i + 1, pattern, j + 1, wholeRest);
}

/** Do comps[i..] match a proper, non-empty beginning of pattern[j..]? */
function prefixAt(comps: string[], i: number, pattern: string[], j: number, consumed: boolean): boolean {
  if (i === comps.length) return consumed && j < pattern.length;
  if (j === pattern.length) return false;
  if (pattern[j] === "**") return prefixAt(comps, i, pattern, j + 1, consumed) || prefixAt(comps, i + 1, pattern, j, true);
  return same(comps[i]!, pattern[j]!) && prefixAt(comps, i + 1, pattern, j + 1, true);
}

/**
 * Which protected path (if any) covers a path. The same matcher as the
 * launcher's guard (native/guard.c). rootDepth is the number of components of
 * the writable grant's root: a match must reach below it. With `entry`, a path
 * that could become an ancestor of a protected path counts too.
 */
export function protectedMatch(path: string, opts: { rootDepth?: number; entry?: boolean } = {}): ProtectedPath | undefined {
  const comps = path.split("/").filter((c) => c !== "" && c !== ".");
  const rootDepth = opts.rootDepth ?? 0;
  if (comps.length <= rootDepth) return undefined;
  for (const p of PROTECTED_PATHS) {
    const pattern = p.pattern.split("/");
    for (let start = 0; start < comps.length; start++) {
      if (p.kind === "file" && matchesAt(comps, start, pattern, 0, true)) return p;
      if (p.kind === "tree")
        for (let end = Math.max(start + 1, rootDepth + 1); end <= comps.length; end++)
          if (matchesAt(comps.slice(0, end), start, pattern, 0, true)) return p;
      if (opts.entry && prefixAt(comps, start, pattern, 0, false)) return p;
    }
  }
  return undefined;
}
