import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Journal } from "../../src/journal/journal.js";
import { openJournal } from "../../src/journal/open.js";
import { HostMcpServer } from "../../src/mcp/host.js";
import { MAX_MODEL_TOOLS, MAX_PARAMETERS, MAX_SERVER_SPECS, McpHub } from "../../src/mcp/hub.js";
import { PinStore } from "../../src/mcp/pins.js";
import { McpServerSchema } from "../../src/mcp/servers.js";
import { hostFacts } from "../../src/sandbox/host.js";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { EVERYTHING, HOSTILE, NODE_MODULES, SUPPORT } from "../support/mcp.js";

// Vak's own agent as the MCP client: the SDK's Client over the same relay `vak mcp` uses, the server sandboxed.
describe("an MCP server for Vak's own agent", () => {
  let s: Scratch;
  let journal: Journal;
  const logs: string[] = [];
  beforeEach(async () => {
    s = scratch();
    journal = await openJournal({ path: join(s.root, "journal.db") });
  });
  afterEach(async () => {
    await journal.close();
    s.cleanup();
  });
  const env = () => ({ ...process.env, XDG_STATE_HOME: join(s.root, "state") });

  it("lists and calls server-everything's tools in the sandbox, every call on the record", async () => {
    const def = McpServerSchema.parse({ command: [process.execPath, EVERYTHING, "stdio"], read: [NODE_MODULES], deny_tools: ["get-env"] });
    const srv = await HostMcpServer.start({ name: `everything-${process.pid}`, def, workspace: s.ws, host: hostFacts(env()), journal, pins: new PinStore(join(s.root, "pins")), secrets: [], log: (l) => void logs.push(l), neutralise: (t) => t });
    try {
      const names = srv.tools.map((t) => t.name);
      expect(names).toContain("echo");
      expect(names).not.toContain("get-env");
      expect(await srv.call("echo", { message: "agent" })).toMatchObject({ content: [{ type: "text", text: "Echo: agent" }], isError: false });
      const refused = await srv.call("get-env", {});
      expect(refused.isError).toBe(true);
    } finally {
      await srv.close();
    }
    const session = (await journal.sessions()).find((x) => x.title === `mcp everything-${process.pid}`)!;
    const kinds = (await journal.events(session.id)).map((e) => e.kind);
    expect(kinds.filter((k) => k === "mcp.call")).toHaveLength(2);
    expect(kinds.at(-1)).toBe("session.ended");
  });

  it("closing takes the server's whole tree, and its secret never reaches the agent", async () => {
    const marker = `${Math.floor(Math.random() * 1e6) + 1000}.${process.pid % 1000}`;
    const def = McpServerSchema.parse({ command: [process.execPath, HOSTILE], read: [SUPPORT], mode: "workspace-write" });
    const srv = await HostMcpServer.start({ name: `hostile-${process.pid}`, def, workspace: s.ws, host: hostFacts(env()), journal, pins: new PinStore(join(s.root, "pins")), secrets: [{ ref: "env:X", env: "GIVEN", value: "agent-secret-value-1" }], log: () => undefined, neutralise: (t) => t });
    try {
      expect(JSON.stringify(await srv.call("env", {}))).not.toContain("agent-secret-value-1");
      await srv.call("daemon", { marker });
      for (let i = 0; i < 100 && processesWith(marker).length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(processesWith(marker).length).toBeGreaterThan(0);
    } finally {
      await srv.close();
    }
    expect(processesWith(marker)).toEqual([]);
  });

  it("a server's deeply nested message does not take the agent's process down: that call fails, the next one works", async () => {
    const def = McpServerSchema.parse({ command: [process.execPath, HOSTILE], read: [SUPPORT] });
    const srv = await HostMcpServer.start({ name: `deep-${process.pid}`, def, workspace: s.ws, host: hostFacts(env()), journal, pins: new PinStore(join(s.root, "pins")), secrets: [], log: () => undefined, neutralise: (t) => t });
    try {
      expect(await srv.call("deep", { depth: 200_000 })).toMatchObject({ content: [{ text: "after the deep message" }] });
      await expect(srv.call("deep_result", { depth: 200_000 })).rejects.toThrow(/nested deeper/);
      expect(await srv.call("echo", { after: 1 })).toMatchObject({ content: [{ text: '{"after":1}' }] });
    } finally {
      await srv.close();
    }
  });

  it("what one server offers the model is bounded: at most MAX_MODEL_TOOLS tools, none with an input schema past MAX_PARAMETERS, MAX_SERVER_SPECS characters in all", async () => {
    const def = McpServerSchema.parse({ command: [process.execPath, HOSTILE, "--many-tools", "400", "--wide-schema"], read: [SUPPORT] });
    const said: string[] = [];
    const hub = await McpHub.start({
      servers: [{ name: "many", def, source: "test" }], workspace: s.ws, mode: "read-only", host: hostFacts(env()), journal, pins: new PinStore(join(s.root, "pins")),
      secret: () => "", log: (l) => void said.push(l), neutralise: (t) => t,
    });
    try {
      expect(hub.specs.length).toBeGreaterThan(0);
      expect(hub.specs.length).toBeLessThanOrEqual(MAX_MODEL_TOOLS);
      for (const spec of hub.specs) expect(JSON.stringify(spec.parameters).length).toBeLessThanOrEqual(MAX_PARAMETERS);
      // In all, what goes before the model with every request: 400 tools of 1 KB each would be 400 KB.
      const sent = hub.specs.reduce((n, x) => n + JSON.stringify(x.parameters).length + x.description.length + x.name.length, 0);
      expect(sent).toBeLessThanOrEqual(MAX_SERVER_SPECS);
      expect(said.join("\n")).toMatch(/characters of one server's tool definitions/);
      expect(hub.specs.map((x) => x.name)).not.toContain("mcp__many__wide");
      expect(said.join("\n")).toMatch(/not offered to the model/);
    } finally {
      await hub.close();
    }
  });
});
