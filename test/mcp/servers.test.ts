import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { FILESYSTEM, MEMORY, NODE_MODULES, sdkClient, type SdkConnection } from "../support/mcp.js";
import { baseEnv } from "../support/vak.js";

// The filesystem and memory reference servers from npm, through `vak mcp`, with the MCP SDK's client: they do
// their work inside the grants, and the sandbox holds where the server's own checks would not.

const textOf = (r: object) => (((r as { content?: unknown }).content as { type: string; text?: string }[]) ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

describe("reference servers through vak mcp", () => {
  let s: Scratch;
  let conns: SdkConnection[] = [];
  beforeEach(() => {
    s = scratch();
  });
  afterEach(async () => {
    for (const c of conns) await c.close();
    conns = [];
    s.cleanup();
  });
  const open = async (flags: string[], server: string[], opts: { env?: Record<string, string>; roots?: string[] } = {}) => {
    const c = await sdkClient(["--allow-read", NODE_MODULES, ...flags, "--", process.execPath, ...server], {
      cwd: s.ws, env: opts.env, capabilities: { capabilities: opts.roots ? { roots: { listChanged: true } } : {} },
    });
    if (opts.roots) c.client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: opts.roots!.map((p) => ({ uri: `file://${p}` })) }));
    conns.push(c);
    return c;
  };

  it("server-filesystem reads the workspace; read-only by default, so its writes fail in the sandbox", async () => {
    writeFileSync(join(s.ws, "notes.txt"), "inside the workspace\n");
    writeFileSync(join(s.outside, "secret.txt"), "outside\n");
    const c = await open(["--name", `fs-ro-${process.pid}`], [FILESYSTEM, s.ws]);
    expect(textOf(await c.client.callTool({ name: "read_text_file", arguments: { path: join(s.ws, "notes.txt") } }))).toBe("inside the workspace\n");
    expect(textOf(await c.client.callTool({ name: "list_directory", arguments: { path: s.ws } }))).toContain("notes.txt");
    const w = await c.client.callTool({ name: "write_file", arguments: { path: join(s.ws, "new.txt"), content: "x" } });
    expect(w.isError).toBe(true);
    expect(existsSync(join(s.ws, "new.txt"))).toBe(false);
  });

  it("server-filesystem told it may read all of / still cannot read outside the grants: the sandbox holds", async () => {
    writeFileSync(join(s.outside, "secret.txt"), "outside\n");
    // The server itself believes it may read everything under /; its sandbox has no `outside` in it.
    const c = await open(["--name", `fs-out-${process.pid}`], [FILESYSTEM, "/"]);
    expect(textOf(await c.client.callTool({ name: "list_allowed_directories", arguments: {} }))).toContain("/");
    const r = await c.client.callTool({ name: "read_text_file", arguments: { path: join(s.outside, "secret.txt") } });
    expect(r.isError).toBe(true);
    expect(textOf(r)).not.toContain("outside\n");
  });

  it("server-filesystem writes in workspace-write, and its roots are the client's roots within the grants", async () => {
    const c = await open(["--mode", "workspace-write", "--name", `fs-rw-${process.pid}`], [FILESYSTEM, s.ws], { roots: ["/", s.ws, s.outside] });
    const w = await c.client.callTool({ name: "write_file", arguments: { path: join(s.ws, "new.txt"), content: "written through vak" } });
    expect(w.isError).toBeFalsy();
    expect(readFileSync(join(s.ws, "new.txt"), "utf8")).toBe("written through vak");
    const dirs = textOf(await c.client.callTool({ name: "list_allowed_directories", arguments: {} }));
    expect(dirs).toContain(s.ws);
    expect(dirs).not.toContain(s.outside);
    expect(dirs.split("\n")).not.toContain("/");
  });

  it("server-memory keeps its graph in a granted file", async () => {
    const file = join(s.ws, "memory.jsonl");
    const c = await open(["--mode", "workspace-write", "--allow-env", "MEMORY_FILE_PATH", "--name", `memory-${process.pid}`], [MEMORY], { env: baseEnv({ MEMORY_FILE_PATH: file }) });
    await c.client.callTool({ name: "create_entities", arguments: { entities: [{ name: "vak", entityType: "project", observations: ["sandboxes MCP servers"] }] } });
    const graph = textOf(await c.client.callTool({ name: "read_graph", arguments: {} }));
    expect(graph).toContain("sandboxes MCP servers");
    expect(readFileSync(file, "utf8")).toContain("sandboxes MCP servers");
  });
});
