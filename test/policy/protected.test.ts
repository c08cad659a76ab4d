import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { protectedMatch } from "../../src/policy/protected.js";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

const table: [string, string | undefined][] = [
  [".git", ".git"],
  [".git/config", ".git/config"],
  [".git/hooks", ".git/hooks"],
  [".git/hooks/pre-commit", ".git/hooks"],
  [".git/index", undefined],
  [".git/objects/ab/cdef", undefined],
  [".git/config.lock", undefined],
  ["a/b/c/d/e/.git/config", ".git/config"],
  ["a/b/c/d/e/.git/hooks/post-checkout", ".git/hooks"],
  [".git/modules/lib/config", ".git/modules/**/config"],
  [".git/modules/a/b/c/hooks/x", ".git/modules/**/hooks"],
  [".git/worktrees/wt/commondir", ".git/worktrees/**/commondir"],
  [".git/config.worktree", ".git/config.worktree"],
  [".gitmodules", ".gitmodules"],
  ["sub/.gitmodules", ".gitmodules"],
  [".gitignore", undefined],
  [".envrc", ".envrc"],
  ["deep/dir/.envrc", ".envrc"],
  [".envrc.example", undefined],
  [".vscode", ".vscode"],
  [".vscode/tasks.json", ".vscode"],
  ["x/.idea/workspace.xml", ".idea"],
  [".husky/pre-commit", ".husky"],
  [".vak/config.toml", ".vak"],
  [".mcp.json", ".mcp.json"],
  [".claude/projects/-work-repo/memory/MEMORY.md", ".claude"],
  [".gemini/tmp/ws/memory/MEMORY.md", ".gemini"],
  [".bashrc", ".bashrc"],
  ["home/.zshrc", ".zshrc"],
  ["src/config", undefined],
  ["hooks/pre-commit", undefined],
  ["git/config", undefined],
  [".ENVRC", ".envrc"],
  [".Git/Config", ".git/config"],
  ["README.md", undefined],
  // Vak's own names, that `npx vak` finds.
  ["node_modules/vak", "node_modules/vak"],
  ["node_modules/vak/bin/vak.cjs", "node_modules/vak"],
  ["node_modules/.bin/vak", "node_modules/.bin/vak"],
  ["sub/pkg/node_modules/.bin/vak", "node_modules/.bin/vak"],
  ["node_modules/.pnpm/vak@0.1.0/node_modules/vak/dist/x.js", "node_modules/vak"],
  ["node_modules/.bin/vitest", undefined],
  ["node_modules/vakx/index.js", undefined],
  ["node_modules/zod/index.js", undefined],
  // Hook managers, agents, editors and toolchains (issue 12, item 4).
  [".pre-commit-config.yaml", ".pre-commit-config.yaml"],
  ["lefthook.yml", "lefthook.yml"],
  [".lefthook.yaml", ".lefthook.yaml"],
  ["lefthook-local.toml", "lefthook-local.toml"],
  [".config/lefthook.json", "lefthook.json"],
  [".lefthook/pre-commit/x.sh", ".lefthook"],
  [".codex/config.toml", ".codex"],
  [".agents/skills/x/SKILL.md", ".agents"],
  [".gemini/settings.json", ".gemini"],
  [".zed/tasks.json", ".zed"],
  [".cargo/config.toml", ".cargo/config.toml"],
  [".cargo/config", ".cargo/config"],
  [".cargo/registry-notes.txt", undefined],
  [".ripgreprc", ".ripgreprc"],
  [".git/info/attributes", ".git/info/attributes"],
  [".git/info/exclude", undefined],
  [".lfsconfig", ".lfsconfig"],
  [".hg/hgrc", ".hg/hgrc"],
  ["mise.toml", "mise.toml"],
  [".config/mise/config.toml", ".config/mise/config.toml"],
  [".config/other.toml", undefined],
  [".yarn/releases/yarn-4.1.0.cjs", ".yarn/releases"],
  [".yarn/cache/x.zip", undefined],
  [".devcontainer.json", ".devcontainer.json"],
  [".nvim.lua", ".nvim.lua"],
  [".dir-locals.el", ".dir-locals.el"],
  [".kiro/hooks/x.json", ".kiro"],
  ["opencode.json", "opencode.json"],
  ["rust-toolchain.toml", "rust-toolchain.toml"],
  [".pdbrc", ".pdbrc"],
];

describe("protected path patterns", () => {
  for (const [path, pattern] of table)
    it(`${path} → ${pattern ?? "not protected"}`, () => {
      expect(protectedMatch(path)?.pattern).toBe(pattern);
    });
});

describe("inside a grant below a protected directory (the claude preset's ~/.claude/projects)", () => {
  const root = "/home/u/.claude/projects";
  const depth = root.split("/").filter(Boolean).length;
  it("Claude Code's auto memory stays held: every later session on the host loads it", () => {
    expect(protectedMatch(`${root}/-work-repo/memory/MEMORY.md`, { rootDepth: depth })?.pattern).toBe(".claude/projects/**/memory");
    expect(protectedMatch(`${root}/-work-repo/memory`, { rootDepth: depth })?.pattern).toBe(".claude/projects/**/memory");
  });
  it("its sessions do not", () => {
    expect(protectedMatch(`${root}/-work-repo/0b6f.jsonl`, { rootDepth: depth })).toBeUndefined();
  });
});

describe("inside a grant below a protected directory (the gemini preset's ~/.gemini/tmp)", () => {
  const root = "/home/u/.gemini/tmp";
  const depth = root.split("/").filter(Boolean).length;
  it("Gemini CLI's project memory stays held: every later session on the host loads it", () => {
    expect(protectedMatch(`${root}/ws/memory/MEMORY.md`, { rootDepth: depth })?.pattern).toBe(".gemini/tmp/**/memory");
    expect(protectedMatch(`${root}/ws/memory`, { rootDepth: depth })?.pattern).toBe(".gemini/tmp/**/memory");
  });
  it("its chats do not", () => {
    expect(protectedMatch(`${root}/ws/chats/session-1.json`, { rootDepth: depth })).toBeUndefined();
  });
});

// The launcher's guard (C) and protectedMatch (TypeScript) must agree: create
// every path in the table inside a real sandbox and compare what was refused.
describe("the guard in the launcher enforces the same table", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
  });
  afterAll(() => s.cleanup());

  it("refuses exactly the protected entries", async () => {
    const script = table
      .map(([p]) => {
        const parent = p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : ".";
        return `mkdir -p "${parent}" 2>/dev/null; touch "${p}" 2>/dev/null`;
      })
      .join("; ");
    await sandboxSh(s.ws, `${script}; true`);
    for (const [p, pattern] of table) {
      // An unprotected entry below a protected directory cannot exist either.
      const blocked = pattern !== undefined || p.split("/").some((_, i, parts) => protectedMatch(parts.slice(0, i + 1).join("/")) !== undefined);
      expect(existsSync(join(s.ws, p)), p).toBe(!blocked);
    }
  });
});
