import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { findProposals, ProposalApprovals } from "../../src/mcp/proposals.js";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

// Servers a repository proposes are approved once per exact definition; the repository cannot approve itself.
describe("MCP servers proposed by a repository", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());
  const vak = (...a: string[]) => spawnSync(process.execPath, [VAK_BIN, "mcp", ...a], { cwd: s.ws, env: baseEnv({ XDG_STATE_HOME: join(s.root, "state") }), encoding: "utf8" });

  it("finds the four shapes; grants only in .vak/config.toml; remote, referenced and badly named ones cannot start", () => {
    writeFileSync(join(s.ws, ".mcp.json"), JSON.stringify({ mcpServers: { mem: { command: "npx", args: ["-y", "server-memory"], env: { LEVEL: "1" } }, web: { type: "http", url: "https://x.invalid" } } }));
    mkdirSync(join(s.ws, ".vscode"));
    writeFileSync(join(s.ws, ".vscode/mcp.json"), JSON.stringify({ servers: { git: { type: "stdio", command: "uvx", args: ["mcp-server-git"], env: { T: "${env:GITHUB_TOKEN}" } }, "Bad Name": { command: "x" } } }));
    mkdirSync(join(s.ws, ".vak"));
    writeFileSync(join(s.ws, ".vak/config.toml"), '[mcp_servers.docs]\ncommand = ["node", "docs.js"]\nnet = ["api.example.com"]\n');
    const ps = findProposals(s.ws);
    const by = (n: string) => ps.find((p) => p.name === n)!;
    expect(by("mem").def).toMatchObject({ command: ["npx", "-y", "server-memory"], set_env: { LEVEL: "1" }, net: [], mode: "read-only" });
    expect(by("web").problem).toContain("remote");
    expect(by("git").problem).toContain("literal");
    expect(by("Bad Name").problem).toContain("lower-case");
    expect(by("docs").def).toMatchObject({ net: ["api.example.com"] });
    expect(by("mem").hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it("an approval is bound to the exact definition: a changed one is not approved", () => {
    writeFileSync(join(s.ws, ".mcp.json"), JSON.stringify({ mcpServers: { mem: { command: "server-memory" } } }));
    const approvals = new ProposalApprovals(join(s.root, "approved.json"));
    const p = findProposals(s.ws)[0]!;
    expect(approvals.isApproved(s.ws, p)).toBe(false);
    approvals.approve(s.ws, p);
    expect(approvals.isApproved(s.ws, findProposals(s.ws)[0]!)).toBe(true);
    writeFileSync(join(s.ws, ".mcp.json"), JSON.stringify({ mcpServers: { mem: { command: "server-memory", args: ["--evil"] } } }));
    expect(approvals.isApproved(s.ws, findProposals(s.ws)[0]!)).toBe(false);
    expect(approvals.isApproved(s.outside, p)).toBe(false);
  });

  it("a proposal file that is a symlink (to a config elsewhere) is not read", () => {
    writeFileSync(join(s.outside, "mcp.json"), JSON.stringify({ mcpServers: { x: { command: "x" } } }));
    symlinkSync(join(s.outside, "mcp.json"), join(s.ws, ".mcp.json"));
    expect(findProposals(s.ws)).toEqual([]);
  });

  it("vak mcp approve shows the definition and needs --yes (or a terminal); vak mcp proposals says what is approved", () => {
    writeFileSync(join(s.ws, ".mcp.json"), JSON.stringify({ mcpServers: { mem: { command: "server-memory", args: ["\u001b[2Jhidden"] } } }));
    expect(vak("proposals").stdout).toContain("not approved; nothing starts until `vak mcp approve mem`");
    const no = vak("approve", "mem");
    expect(no.status).toBe(1);
    expect(no.stdout).not.toContain("\u001b");
    expect(no.stdout).toContain("\\u001b[2Jhidden");
    expect(vak("approve", "mem", "--yes").status).toBe(0);
    expect(vak("proposals").stdout).toContain("mem (.mcp.json): approved");
    expect(JSON.parse(execFileSync(process.execPath, [VAK_BIN, "mcp", "proposals", "--json"], { cwd: s.ws, env: baseEnv({ XDG_STATE_HOME: join(s.root, "state") }), encoding: "utf8" }))[0]).toMatchObject({ name: "mem", approved: true });
  });
});
