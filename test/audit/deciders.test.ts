import { describe, expect, it } from "vitest";
import { planFixes } from "../../src/audit/fix.js";
import { wildcardNet } from "../../src/audit/rules.js";
import { unpinnedPackage } from "../../src/audit/trust.js";

describe("wildcardNet: a rule that matches every host, or a whole top-level domain", () => {
  it.each([
    ["*", true], ["*:*", true], ["*:443", true], ["read:*", true], ["*.com", true], ["*.*", true], ["0.0.0.0/0", true], ["::/0", true],
    ["*.github.com", false], ["api.github.com", false], ["api.github.com:*", false], ["10.0.0.0/8", false], ["read:api.example.org", false],
  ])("%s → %s", (rule, wide) => expect(wildcardNet(rule)).toBe(wide));
});

describe("unpinnedPackage: what an npx-style command downloads without an exact version", () => {
  it.each([
    [["npx", "-y", "@modelcontextprotocol/server-github"], "@modelcontextprotocol/server-github"],
    [["/usr/bin/npx", "--yes", "pkg@latest"], "pkg@latest"],
    [["npx", "pkg@^1.2.0"], "pkg@^1.2.0"],
    [["npx", "pkg@1"], "pkg@1"],
    [["pnpm", "dlx", "pkg"], "pkg"],
    [["npm", "exec", "--", "pkg"], "pkg"],
    [["bunx", "pkg@2.0.0-beta.1"], undefined],
    [["npx", "-y", "@scope/pkg@1.2.3"], undefined],
    [["uvx", "mcp-server-fetch"], "mcp-server-fetch"],
    [["uvx", "mcp-server-fetch==2025.1.1"], undefined],
    [["node", "server.js"], undefined],
    [["npx", "./local"], undefined],
  ])("%j → %s", (argv, pkg) => expect(unpinnedPackage(argv)).toBe(pkg));
});

describe("planFixes: only fixable findings, bits merged per path, never more than asked", () => {
  it("merges two findings on one path and skips the unfixable", () => {
    const base = { severity: "warn" as const, title: "t", detail: "d", fix: "f" };
    const plan = planFixes([
      { ...base, id: "control.readable", fixable: true, remove: [{ path: "/a", bits: 0o044, dir: false }] },
      { ...base, id: "control.writable", fixable: true, remove: [{ path: "/a", bits: 0o022, dir: false }] },
      { ...base, id: "control.parent-writable", fixable: false, remove: [{ path: "/b", bits: 0o002, dir: true }] },
    ]);
    expect(plan).toEqual([{ id: "control.readable", path: "/a", bits: 0o066, dir: false }]);
  });
});
