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
  [".bashrc", ".bashrc"],
  ["home/.zshrc", ".zshrc"],
  ["src/config", undefined],
  ["hooks/pre-commit", undefined],
  ["git/config", undefined],
  [".ENVRC", ".envrc"],
  [".Git/Config", ".git/config"],
  ["README.md", undefined],
];

describe("protected path patterns", () => {
  for (const [path, pattern] of table)
    it(`${path} → ${pattern ?? "not protected"}`, () => {
      expect(protectedMatch(path)?.pattern).toBe(pattern);
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
