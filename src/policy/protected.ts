/**
 * Protected paths: read-only even inside a writable grant, at any depth, whether
 * or not they exist yet. Each is something the host runs or trusts later, so a
 * sandboxed write there would run code outside the sandbox.
 *
 * Patterns are path components below a writable grant; `**` matches any number
 * of components. Matching ignores ASCII case. A `tree` covers the entry and
 * everything below it; a `file` covers the entry itself (it may not be created,
 * written, renamed or removed). The launcher's write guard enforces them.
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

/**
 * Which protected path (if any) covers a path relative to a writable grant.
 * The same matcher as the launcher's guard (native/guard.c), for planning and
 * for the broker's own checks.
 */
export function protectedMatch(relative: string): ProtectedPath | undefined {
  const comps = relative.split("/").filter((c) => c !== "" && c !== ".");
  for (const p of PROTECTED_PATHS) {
    const pattern = p.pattern.split("/");
    for (let start = 0; start < comps.length; start++)
      if (matchesAt(comps, start, pattern, 0, p.kind === "file")) return p;
  }
  return undefined;
}
