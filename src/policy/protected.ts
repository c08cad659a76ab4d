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

const RC_FILES = [
  ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
  ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc",
] as const;

export const PROTECTED_PATHS: readonly ProtectedPath[] = [
  { pattern: ".vak", kind: "tree", why: "Vak's repository configuration" },
  { pattern: ".git", kind: "file", why: "a repository's git dir, or a gitdir pointer that redirects git" },
  { pattern: ".git/config", kind: "file", why: "git configuration can run commands (core.fsmonitor, core.pager)" },
  { pattern: ".git/config.worktree", kind: "file", why: "per-worktree git configuration" },
  { pattern: ".git/commondir", kind: "file", why: "redirects git to another git directory, its config and hooks" },
  { pattern: ".git/modules/**/commondir", kind: "file", why: "redirects a submodule's git directory" },
  { pattern: ".git/hooks", kind: "tree", why: "git hooks run on the host" },
  { pattern: ".git/modules/**/config", kind: "file", why: "a submodule's git configuration" },
  { pattern: ".git/modules/**/hooks", kind: "tree", why: "a submodule's git hooks" },
  { pattern: ".git/worktrees/**/config.worktree", kind: "file", why: "a worktree's git configuration" },
  { pattern: ".git/worktrees/**/commondir", kind: "file", why: "redirects a worktree to another git dir" },
  { pattern: ".git/worktrees/**/gitdir", kind: "file", why: "redirects a worktree's git dir" },
  { pattern: ".gitmodules", kind: "file", why: "submodule URLs and commands" },
  { pattern: ".mcp.json", kind: "file", why: "MCP servers that agents start" },
  { pattern: ".vscode", kind: "tree", why: "editor tasks and settings that run commands" },
  { pattern: ".idea", kind: "tree", why: "editor run configurations" },
  { pattern: ".husky", kind: "tree", why: "git hooks installed by husky" },
  { pattern: ".envrc", kind: "file", why: "direnv runs it on cd" },
  { pattern: ".devcontainer", kind: "tree", why: "dev container commands that editors run" },
  { pattern: ".claude", kind: "tree", why: "agent settings and hooks that run commands" },
  { pattern: ".cursor", kind: "tree", why: "editor agent rules and settings" },
  { pattern: ".npmrc", kind: "file", why: "npm settings (script-shell, node-options) that run code" },
  { pattern: ".yarnrc", kind: "file", why: "yarn settings that run code" },
  { pattern: ".yarnrc.yml", kind: "file", why: "yarn settings (yarnPath) that run code" },
  { pattern: ".pnpmfile.cjs", kind: "file", why: "pnpm hooks that run on install" },
  { pattern: ".gitconfig", kind: "file", why: "a user git configuration, when a grant covers a home directory" },
  { pattern: ".ssh", kind: "tree", why: "SSH keys and configuration" },
  ...RC_FILES.map((f) => ({ pattern: f, kind: "file" as const, why: "shell startup file" })),
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
