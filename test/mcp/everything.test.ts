import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readJournal } from "../support/journal-read.js";
import { scratch, type Scratch } from "../support/fs.js";
import { EVERYTHING, NODE_MODULES, sdkClient, type SdkConnection } from "../support/mcp.js";
import { TEST_STATE } from "../support/vak.js";

// Every capability server-everything (from npm) exposes, through `vak mcp`, driven by the MCP SDK's own client:
// tools, resources and subscriptions, prompts and completions, logging, progress, cancellation, sampling,
// elicitation, roots, tasks, list_changed. The client declares everything it can.

const textOf = (r: object) => (((r as { content?: unknown }).content as { type: string; text?: string }[]) ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const until = async (f: () => boolean, ms = 15_000) => {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe("server-everything through vak mcp", () => {
  let s: Scratch;
  let c: SdkConnection;
  const logs: unknown[] = [];
  const updates: string[] = [];

  beforeAll(async () => {
    s = scratch();
    c = await sdkClient(["--allow-read", NODE_MODULES, "--name", `everything-${process.pid}`, "--", process.execPath, EVERYTHING, "stdio"], {
      cwd: s.ws,
      capabilities: { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
    });
    const cl = c.client;
    cl.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
      role: "assistant", model: "test-model", stopReason: "endTurn",
      content: { type: "text", text: `sampled: ${JSON.stringify(req.params.messages[0]?.content)}` },
    }));
    cl.setRequestHandler(ElicitRequestSchema, async (req) => ({ action: req.params.message.startsWith(`[MCP server everything-${process.pid}] `) ? "accept" : "decline", content: { name: "Ada", check: true, email: "ada@example.invalid", integer: 7, number: 3.5, untitledSingleSelectEnum: "option1", untitledMultipleSelectEnum: ["option1"], titledSingleSelectEnum: "value1", titledMultipleSelectEnum: ["value1"], legacyTitledEnum: "opt1" } }));
    cl.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: `file://${s.ws}`, name: "workspace" }, { uri: "file:///etc", name: "not granted" }] }));
    cl.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    cl.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updates.push(n.params.uri));
  });
  afterAll(async () => {
    await c?.close();
    s?.cleanup();
  });

  it("initializes and answers ping", async () => {
    expect(c.client.getServerVersion()?.name).toContain("everything");
    expect(c.client.getServerCapabilities()?.tools).toBeDefined();
    expect(await c.client.ping()).toEqual({});
  });

  it("lists and calls tools: text, sums, images, annotations, resource links and references, structured content", async () => {
    const names = (await c.client.listTools()).tools.map((t) => t.name);
    for (const n of ["echo", "get-sum", "get-tiny-image", "get-annotated-message", "get-resource-links", "get-resource-reference", "get-structured-content", "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"])
      expect(names).toContain(n);
    expect(textOf(await c.client.callTool({ name: "echo", arguments: { message: "through vak" } }))).toBe("Echo: through vak");
    expect(textOf(await c.client.callTool({ name: "get-sum", arguments: { a: 2, b: 40 } }))).toContain("42");
    const img = await c.client.callTool({ name: "get-tiny-image", arguments: {} });
    expect((img.content as { type: string }[]).some((x) => x.type === "image")).toBe(true);
    const ann = await c.client.callTool({ name: "get-annotated-message", arguments: { messageType: "error", includeImage: true } });
    expect((ann.content as { annotations?: unknown }[])[0]?.annotations).toBeDefined();
    const links = await c.client.callTool({ name: "get-resource-links", arguments: { count: 3 } });
    expect((links.content as { type: string }[]).filter((x) => x.type === "resource_link")).toHaveLength(3);
    const ref = await c.client.callTool({ name: "get-resource-reference", arguments: { resourceType: "Text", resourceId: 2 } });
    expect((ref.content as { type: string }[]).some((x) => x.type === "resource")).toBe(true);
    const structured = await c.client.callTool({ name: "get-structured-content", arguments: { location: "New York" } });
    expect(structured.structuredContent).toHaveProperty("temperature");
  });

  it("resources: list, templates, read text and blob, subscribe and receive updates", async () => {
    const list = await c.client.listResources();
    expect(list.resources.length).toBeGreaterThan(0);
    const templates = await c.client.listResourceTemplates();
    expect(templates.resourceTemplates.map((t) => t.uriTemplate).join(" ")).toContain("demo://resource/dynamic/text/");
    const textRes = await c.client.readResource({ uri: "demo://resource/dynamic/text/1" });
    expect(textRes.contents[0]).toHaveProperty("text");
    const blob = await c.client.readResource({ uri: "demo://resource/dynamic/blob/1" });
    expect(blob.contents[0]).toHaveProperty("blob");
    const uri = list.resources[0]!.uri;
    await c.client.subscribeResource({ uri });
    await c.client.callTool({ name: "toggle-subscriber-updates", arguments: {} });
    await until(() => updates.includes(uri), 20_000);
    await c.client.callTool({ name: "toggle-subscriber-updates", arguments: {} });
    await c.client.unsubscribeResource({ uri });
  });

  it("prompts: list, get with arguments, and completions", async () => {
    const prompts = (await c.client.listPrompts()).prompts.map((p) => p.name);
    expect(prompts).toEqual(expect.arrayContaining(["simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"]));
    const simple = await c.client.getPrompt({ name: "simple-prompt" });
    expect(simple.messages.length).toBeGreaterThan(0);
    const args = await c.client.getPrompt({ name: "args-prompt", arguments: { city: "Paris", state: "IDF" } });
    expect(JSON.stringify(args.messages)).toContain("Paris");
    const res = await c.client.getPrompt({ name: "resource-prompt", arguments: { resourceType: "Text", resourceId: "1" } });
    expect(JSON.stringify(res.messages)).toContain("resource");
    const done = await c.client.complete({ ref: { type: "ref/prompt", name: "completable-prompt" }, argument: { name: "department", value: "E" } });
    expect(done.completion.values).toContain("Engineering");
  });

  it("logging: setLevel, then log notifications from the server", async () => {
    await c.client.setLoggingLevel("debug");
    const before = logs.length;
    await c.client.callTool({ name: "toggle-simulated-logging", arguments: {} });
    await until(() => logs.length > before, 20_000);
    await c.client.callTool({ name: "toggle-simulated-logging", arguments: {} });
  });

  it("progress notifications for a long-running call", async () => {
    const seen: number[] = [];
    const r = await c.client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 1, steps: 4 } }, undefined, { onprogress: (p) => void seen.push(p.progress) });
    expect(textOf(r)).toContain("completed");
    expect(seen.length).toBeGreaterThanOrEqual(3);
  });

  it("cancellation reaches the server, and the client gets no answer after it", async () => {
    const ac = new AbortController();
    const call = c.client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 5, steps: 5 } }, undefined, { signal: ac.signal });
    setTimeout(() => ac.abort("changed my mind"), 300);
    await expect(call).rejects.toThrow();
    expect(textOf(await c.client.callTool({ name: "echo", arguments: { message: "still here" } }))).toBe("Echo: still here");
  });

  it("sampling: the server's request reaches the client's handler, and its answer the server", async () => {
    const r = await c.client.callTool({ name: "trigger-sampling-request", arguments: { prompt: "hello model", maxTokens: 20 } });
    expect(textOf(r)).toContain("sampled:");
    expect(textOf(r)).toContain("hello model");
  });

  it("elicitation: the server's form reaches the client, and the answer comes back", async () => {
    const r = await c.client.callTool({ name: "trigger-elicitation-request", arguments: {} });
    expect(textOf(r)).toContain("Ada");
  });

  it("roots: the server is told the client's roots intersected with the grants", async () => {
    const r = await c.client.callTool({ name: "get-roots-list", arguments: {} });
    const t = textOf(r);
    expect(t).toContain(s.ws);
    expect(t).not.toContain("file:///etc");
  });

  it("tasks: a task-augmented call is created, polled and its result fetched", async () => {
    const kinds: string[] = [];
    let result: unknown;
    for await (const m of c.client.experimental.tasks.callToolStream({ name: "simulate-research-query", arguments: { topic: "sandboxes", ambiguous: false } }, undefined, { task: { ttl: 60_000 } })) {
      kinds.push(m.type);
      if (m.type === "result") result = m.result;
      if (m.type === "error") throw m.error;
    }
    expect(kinds).toContain("taskCreated");
    expect(JSON.stringify(result)).toContain("sandboxes");
  });

  it("every call was on the record, and the stderr of the server reached vak's stderr", () => {
    expect(c.stderr()).toContain(`mcp everything-${process.pid}: `);
    const j = readJournal(join(TEST_STATE, "vak", "journal.db"));
    try {
      const session = j.sessions().filter((x) => x.title === `mcp everything-${process.pid}`).at(-1)!;
      const ev = j.events(session.id);
      const calls = ev.filter((e) => e.kind === "mcp.call");
      const results = ev.filter((e) => e.kind === "mcp.result");
      expect(calls.length).toBeGreaterThanOrEqual(15);
      expect(calls.every((e) => e.payload.decision === "allowed")).toBe(true);
      const echo = calls.find((e) => e.payload.tool === "echo")!;
      expect(echo.payload.arguments).toEqual({ message: "through vak" });
      const r = results.find((e) => e.payload.call === echo.payload.call)!;
      expect(r.payload).toMatchObject({ ok: true, tool: "echo" });
      expect(r.payload.digest).toMatch(/^[0-9a-f]{64}$/);
      expect(ev.find((e) => e.kind === "mcp.initialized")!.payload.server).toMatchObject({ info: { name: expect.stringContaining("everything") } });
      expect(j.search("through vak").some((e) => e.session === session.id && e.kind === "mcp.call")).toBe(true);
    } finally {
      j.close();
    }
  });
});
