import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readJournal } from "../support/journal-read.js";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { EVERYTHING, HOSTILE, NODE_MODULES, SUPPORT } from "../support/mcp.js";
import { baseEnv, runVak } from "../support/vak.js";

// MCP servers in Vak's own agent: [mcp_servers.NAME] in the user's config gives the model mcp__NAME__tool, each call
// a broker op under the same approvals and journal; a repository's proposed servers start nothing until approved.
describe("MCP tools in vak run", () => {
  let s: Scratch;
  let env: Record<string, string>;
  beforeEach(() => {
    s = scratch({ git: true });
    env = baseEnv({ XDG_CONFIG_HOME: join(s.root, "config"), XDG_STATE_HOME: join(s.root, "state") });
    mkdirSync(join(s.root, "config", "vak"), { recursive: true });
  });
  afterEach(() => s.cleanup());
  const config = (toml: string) => writeFileSync(join(s.root, "config", "vak", "config.toml"), toml);
  const script = (turns: unknown[]) => {
    const file = join(s.root, "script.json");
    writeFileSync(file, JSON.stringify({ turns }));
    return file;
  };
  const events = () => {
    const j = readJournal(join(s.root, "state", "vak", "journal.db"));
    try {
      return j.sessions().map((x) => ({ ...x, events: j.events(x.id) }));
    } finally {
      j.close();
    }
  };

  it("a configured server's tools reach the model as mcp__NAME__tool; each call is a broker op, approved and on the record", async () => {
    config(`[mcp_servers.everything]\ncommand = [${JSON.stringify(process.execPath)}, ${JSON.stringify(EVERYTHING)}, "stdio"]\nread = [${JSON.stringify(NODE_MODULES)}]\ndeny_tools = ["get-env"]\n`);
    const file = script([{ tool_calls: [{ name: "mcp__everything__echo", args: { message: "from the agent" } }, { name: "mcp__everything__get-env", args: {} }] }, { text: "done" }]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--approve", "exec", "--json", "echo"], { cwd: s.ws, env });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Echo: from the agent");
    // A denied tool is not even offered; its name is unknown to the router.
    expect(r.stdout).toMatch(/mcp__everything__get-env: refused/);
    const all = events();
    const agent = all.find((x) => x.kind === "agent")!;
    const op = agent.events.find((e) => e.kind === "op.requested" && e.payload.op === "mcp")!;
    expect(op.payload.args).toMatchObject({ server: "everything", tool: "echo" });
    const mcp = all.find((x) => x.kind === "mcp" && x.title === "mcp everything")!;
    expect(mcp.events.filter((e) => e.kind === "mcp.call").map((e) => e.payload.tool)).toEqual(["echo"]);
  });

  it("without an approval an MCP call is refused before it reaches the server", async () => {
    config(`[mcp_servers.everything]\ncommand = [${JSON.stringify(process.execPath)}, ${JSON.stringify(EVERYTHING)}, "stdio"]\nread = [${JSON.stringify(NODE_MODULES)}]\n`);
    const file = script([{ tool_calls: [{ name: "mcp__everything__echo", args: { message: "x" } }] }, { text: "done" }]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "echo"], { cwd: s.ws, env });
    expect(r.stdout).toMatch(/mcp__everything__echo: refused \(not-approved\)/);
    const mcp = (await events()).find((x) => x.kind === "mcp")!;
    expect(mcp.events.filter((e) => e.kind === "mcp.call")).toEqual([]);
  });

  it("a read-only session's MCP servers are read-only, whatever their definition asks for", async () => {
    config(`[mcp_servers.hostile]\ncommand = [${JSON.stringify(process.execPath)}, ${JSON.stringify(HOSTILE)}]\nread = [${JSON.stringify(SUPPORT)}]\nmode = "workspace-write"\n`);
    const file = script([{ tool_calls: [{ name: "mcp__hostile__write", args: { path: join(s.ws, "x.txt") } }] }, { text: "done" }]);
    const r = await runVak(["run", "--mode", "read-only", "--model", `scripted:${file}`, "--approve", "exec", "w"], { cwd: s.ws, env });
    expect(r.stdout).toContain("error E");
  });

  it("a repository's proposed server starts nothing until that exact definition is approved, headless included", async () => {
    const marker = `${Math.floor(Math.random() * 1e6) + 1000}.${process.pid % 1000}`;
    const proposal = (extra: string[]) => writeFileSync(join(s.ws, ".mcp.json"), JSON.stringify({ mcpServers: { repo: { command: process.execPath, args: [HOSTILE, "--marker", marker, ...extra] } } }));
    proposal([]);
    const file = script([{ tool_calls: [{ name: "mcp__repo__echo", args: {} }] }, { text: "done" }]);
    const before = await runVak(["run", "--model", `scripted:${file}`, "--approve", "exec", "x"], { cwd: s.ws, env });
    expect(before.stderr).toContain("was not started (review and approve it with `vak mcp approve repo`)");
    expect((await events()).filter((x) => x.kind === "mcp")).toEqual([]);
    expect(processesWith(marker)).toEqual([]);

    const approve = await runVak(["mcp", "approve", "repo", "--yes"], { cwd: s.ws, env });
    expect(approve.code).toBe(0);
    // The proposal's server gets no grants beyond a read-only workspace: it cannot even read its own script here.
    const after = await runVak(["run", "--model", `scripted:${file}`, "--approve", "exec", "x"], { cwd: s.ws, env });
    expect(after.stderr).not.toContain("was not started");
    expect((await events()).filter((x) => x.kind === "mcp")).toHaveLength(1);

    // The repository changes the definition: a new approval is needed.
    proposal(["--evil"]);
    const changed = await runVak(["run", "--model", `scripted:${file}`, "--approve", "exec", "x"], { cwd: s.ws, env });
    expect(changed.stderr).toContain("was not started");
    expect((await events()).filter((x) => x.kind === "mcp")).toHaveLength(1);
  });
});

describe("an MCP server as a workload component", () => {
  let s: Scratch;
  let env: Record<string, string>;
  beforeEach(() => {
    s = scratch();
    env = baseEnv({ XDG_CONFIG_HOME: join(s.root, "config"), XDG_STATE_HOME: join(s.root, "state") });
  });
  afterEach(() => s.cleanup());

  it("[tools.NAME] mcp = [...]: the server's tools are the component's (NAME__tool), with its grants only", async () => {
    writeFileSync(join(s.ws, "project.txt"), "project file\n");
    mkdirSync(join(s.ws, "docs"));
    writeFileSync(join(s.ws, "docs", "a.md"), "granted doc\n");
    const spec = join(s.ws, "w.toml");
    writeFileSync(spec, [
      "version = 1", 'name = "mcpw"', "",
      "[tools.h]", `mcp = [${JSON.stringify(process.execPath)}, ${JSON.stringify(HOSTILE)}]`, `read = [${JSON.stringify(SUPPORT)}, "docs"]`, 'approval = { exec = "allow" }', "",
    ].join("\n"));
    const file = join(s.root, "script.json");
    writeFileSync(file, JSON.stringify({ turns: [
      { tool_calls: [{ name: "h__read", args: { path: join(s.ws, "docs", "a.md") } }, { name: "h__read", args: { path: join(s.ws, "project.txt") } }] },
      { text: "done" },
    ] }));
    const r = await runVak(["run", "--spec", spec, "--model", `scripted:${file}`, "go"], { cwd: s.ws, env });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("granted doc");
    expect(r.stdout).not.toContain("project file");
    expect(r.stdout).toMatch(/error E/);
    const check = await runVak(["check", spec, "--json"], { cwd: s.ws, env });
    expect(JSON.parse(check.stdout)).toMatchObject({ components: [{ component: "h", mcp: [process.execPath, HOSTILE] }] });
  });
});
