import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { lineDiff } from "../../src/mcp/diff.js";
import { edgeId, LineReader } from "../../src/mcp/framing.js";
import { checkNotification, checkRequest, checkResult, MAX_DEPTH, parseEnvelope } from "../../src/mcp/messages.js";
import { acceptPending, canonicalJson, judge, type PinFile, PinStore, toolDigest } from "../../src/mcp/pins.js";
import { decideCall, listed, trustCommand, type ToolPolicy } from "../../src/mcp/policy.js";
import { intersectRoots } from "../../src/mcp/roots.js";
import { StderrRelay } from "../../src/mcp/stderr.js";

const policy = (p: Partial<ToolPolicy> = {}): ToolPolicy => ({ server: "srv", deny: new Set(), ask: new Set(), ...p });

describe("per-tool policy (a table)", () => {
  const rows: [string, Partial<ToolPolicy>, string, Parameters<typeof decideCall>[2], string, string?][] = [
    ["a pinned tool runs", {}, "t", "pinned", "allow"],
    ["a tool pinned on first sight runs", {}, "t", "first-sight", "allow"],
    ["--deny-tool beats everything", { deny: new Set(["t"]), ask: "all" }, "t", "pinned", "deny", "deny-tool"],
    ["a changed tool is withheld", {}, "t", "changed", "deny", "withheld"],
    ["a new tool on a trusted server is withheld", {}, "t", "new", "deny", "withheld"],
    ["withheld even under --ask: asking cannot approve what was not trusted", { ask: "all" }, "t", "changed", "deny", "withheld"],
    ["a tool never listed is refused", {}, "t", undefined, "deny", "not-listed"],
    ["a definition too large to keep is withheld, even under --ask", { ask: "all" }, "t", "over-limit", "deny", "withheld"],
    ["--ask all asks", { ask: "all" }, "t", "pinned", "ask"],
    ["--ask names ask only for those", { ask: new Set(["u"]) }, "t", "pinned", "allow"],
    ["--ask T asks for T", { ask: new Set(["t"]) }, "t", "pinned", "ask"],
  ];
  for (const [title, p, tool, verdict, action, rule] of rows)
    it(title, () => {
      const d = decideCall(policy(p), tool, verdict);
      expect(d.action).toBe(action);
      if (rule) expect(d.action === "deny" && d.rule).toBe(rule);
    });
  it("a withheld tool's refusal names the command that trusts it, quoted for a shell", () => {
    const d = decideCall(policy({ server: "npx -y it's" }), "t", "changed");
    expect(d.action === "deny" && d.reason).toContain(trustCommand("npx -y it's"));
    expect(trustCommand("npx -y it's")).toBe("vak mcp trust 'npx -y it'\\''s'");
    expect(trustCommand("github")).toBe("vak mcp trust github");
  });
  it("only pinned tools are listed, and denied ones never", () => {
    expect(listed(policy(), "t", "pinned")).toBe(true);
    expect(listed(policy(), "t", "changed")).toBe(false);
    expect(listed(policy(), "t", "new")).toBe(false);
    expect(listed(policy({ deny: new Set(["t"]) }), "t", "pinned")).toBe(false);
  });
});

describe("tool pins", () => {
  const def = { name: "t", description: "d", inputSchema: { type: "object", properties: { a: { type: "string" } } } };
  it("a definition's digest does not depend on key order, and covers every field", () => {
    expect(toolDigest(def)).toBe(toolDigest({ inputSchema: { properties: { a: { type: "string" } }, type: "object" }, description: "d", name: "t" }));
    expect(toolDigest({ ...def, annotations: { readOnlyHint: true } })).not.toBe(toolDigest(def));
    expect(toolDigest({ ...def, description: "d\u200b" })).not.toBe(toolDigest(def));
    expect(canonicalJson({ b: 1, a: [2, { d: 3, c: 4 }] })).toBe('{"a":[2,{"c":4,"d":3}],"b":1}');
  });
  it("judges: first sight, pinned, changed, new", () => {
    const file: PinFile = { v: 1, server: "s", command: [], created: "", tools: { t: { digest: toolDigest(def), definition: def, at: "" } }, pending: {} };
    expect(judge(undefined, true, def)).toBe("first-sight");
    expect(judge(file, false, def)).toBe("pinned");
    expect(judge(file, false, { ...def, description: "changed" })).toBe("changed");
    expect(judge(file, false, { ...def, name: "u" })).toBe("new");
  });
  it("the store is 0600 in a 0700 directory, refuses a damaged file, and accepts only what was shown", () => {
    const dir = mkdtempSync(join(tmpdir(), "vak-pins-"));
    try {
      const store = new PinStore(join(dir, "pins"));
      const changed = { ...def, description: "v2" };
      store.update("s", ["cmd"], (f) => {
        f.pending.t = { digest: toolDigest(changed), definition: changed, at: "", why: "changed" };
      });
      const f = store.load("s")!;
      expect(acceptPending(f, new Map([["t", "0".repeat(64)]]))).toEqual([]);
      expect(acceptPending(f, new Map([["t", toolDigest(changed)]]))).toEqual(["t"]);
      expect(f.tools.t!.digest).toBe(toolDigest(changed));

      expect(statSync(store.path("s")).mode & 0o777).toBe(0o600);
      expect(statSync(join(dir, "pins")).mode & 0o777).toBe(0o700);
      writeFileSync(store.path("s"), "{ damaged");
      expect(() => store.load("s")).toThrow(/damaged/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("the diff shows what changed", () => {
    expect(lineDiff(["a", "b", "c"], ["a", "x", "c"])).toEqual(["  a", "- b", "+ x", "  c"]);
  });
});

describe("roots ∩ grants", () => {
  const dir = mkdtempSync(join(tmpdir(), "vak-roots-"));
  const ws = join(dir, "ws");
  const other = join(dir, "other");
  mkdirSync(join(ws, "sub", "deny"), { recursive: true });
  mkdirSync(other);
  symlinkSync(other, join(ws, "escape"));
  const reach = { paths: [ws], denied: [join(ws, "sub", "deny")] };
  const uris = (rs: { uri: string }[]) => rs.map((r) => r.uri);
  it("a root inside a grant is kept; one that contains grants becomes them", () => {
    expect(uris(intersectRoots([{ uri: `file://${join(ws, "sub")}` }], reach))).toEqual([`file://${join(ws, "sub")}`]);
    expect(uris(intersectRoots([{ uri: "file:///" }], reach))).toEqual([`file://${ws}`]);
  });
  it("outside, through a symlink, through .., denied, a remote host, another scheme: dropped", () => {
    for (const uri of [`file://${other}`, `file://${join(ws, "escape")}`, `file://${ws}/../other`, `file://${join(ws, "sub", "deny")}`, `file://example.invalid${ws}`, "https://example.invalid/", `file://${join(ws, "missing")}`])
      expect(intersectRoots([{ uri }], reach), uri).toEqual([]);
  });
});

describe("framing", () => {
  const collect = (max: number, chunks: (string | Buffer)[]) => {
    const got: string[] = [];
    const r = new LineReader(max, { line: (l) => got.push(l), oversized: (n) => got.push(`<oversized ${n}>`), undecodable: (n) => got.push(`<bad utf8 ${n}>`) });
    for (const c of chunks) r.push(Buffer.isBuffer(c) ? c : Buffer.from(c));
    return got;
  };
  it("splits lines across chunks, strips CR, skips blank lines", () => {
    expect(collect(100, ['{"a"', ":1}\r\n\n{", '"b":2}\n'])).toEqual(['{"a":1}', '{"b":2}']);
  });
  it("an oversized line is skipped to its newline, without being held, and the next line is read", () => {
    expect(collect(10, ["x".repeat(8), "y".repeat(8), "z\nok\n"])).toEqual(["<oversized 17>", "ok"]);
  });
  it("a line that is not UTF-8 is dropped, not repaired", () => {
    expect(collect(100, [Buffer.from([0x7b, 0xff, 0x7d, 0x0a]), "ok\n"])).toEqual(["<bad utf8 3>", "ok"]);
  });
  it("finds the id of an oversized message at its start or end", () => {
    expect(edgeId('{"jsonrpc":"2.0","id":7,"result":{"x":"', '"}}')).toEqual({ id: 7, request: false });
    expect(edgeId('{"result":{"content":[', '...]},"jsonrpc":"2.0","id":"a"}')).toEqual({ id: "a", request: false });
    expect(edgeId('{"method":"tools/call","params":{', '"}},"jsonrpc":"2.0","id":3}')).toEqual({ id: 3, request: true });
    expect(edgeId('{"result":{"id":5', '"nested":{"id":9}}}')).toBeUndefined();
  });
});

describe("messages against the SDK's schemas", () => {
  it("envelopes: a batch, a non-object, both result and error, an extra top-level field, a bad id", () => {
    expect(parseEnvelope("[1]").kind).toBe("invalid");
    expect(parseEnvelope("3").kind).toBe("invalid");
    expect(parseEnvelope('{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}').kind).toBe("invalid");
    expect(parseEnvelope('{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}').kind).toBe("invalid");
    expect(parseEnvelope('{"jsonrpc":"2.0","id":1.5,"method":"ping"}').kind).toBe("invalid");
    expect(parseEnvelope('{"jsonrpc":"1.0","id":1,"method":"ping"}').kind).toBe("invalid");
    expect(parseEnvelope("nope")).toMatchObject({ kind: "invalid", answer: { code: -32700 } });
    expect(parseEnvelope('{"jsonrpc":"2.0","id":1,"method":"ping"}')).toEqual({ kind: "request", id: 1, method: "ping", params: undefined });
  });
  it("nesting: up to MAX_DEPTH passes; deeper is invalid, answered when a request, failing its request when a response", () => {
    const nest = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    // The envelope and params are two levels, _meta a third: the value inside may take the rest.
    expect(parseEnvelope(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":${nest(MAX_DEPTH - 3)}}}}`).kind).toBe("request");
    expect(parseEnvelope(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":${nest(MAX_DEPTH - 2)}}}}`)).toMatchObject({ kind: "invalid", answer: { id: 1, code: -32600 } });
    expect(parseEnvelope(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":${nest(1e5)}}}`)).toMatchObject({ kind: "invalid" });
    expect(parseEnvelope(`{"jsonrpc":"2.0","id":"r","result":{"x":${nest(1e5)}}}`)).toMatchObject({ kind: "invalid", respondsTo: "r" });
    expect(parseEnvelope('{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"x"}}')).toMatchObject({ kind: "invalid", respondsTo: 7 });
  });
  it("a duplicate key cannot mean two things: what is passed on is the parsed value", () => {
    const m = parseEnvelope('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}');
    expect(m.kind === "request" && m.params?.name).toBe("b");
  });
  it("each side may send only its own requests and notifications", () => {
    expect(checkRequest("server", "tools/call", { name: "x" }).ok).toBe(false);
    expect(checkRequest("client", "sampling/createMessage", { messages: [], maxTokens: 1 }).ok).toBe(false);
    expect(checkRequest("client", "tools/call", { name: 5 })).toMatchObject({ ok: false, code: -32602 });
    expect(checkRequest("client", "tools/call", { name: "x", arguments: {} }).ok).toBe(true);
    expect(checkNotification("client", "notifications/tools/list_changed", undefined).ok).toBe(false);
    expect(checkNotification("server", "notifications/tools/list_changed", undefined).ok).toBe(true);
  });
  it("a result must match the schema of the method it answers", () => {
    expect(checkResult("tools/list", { tools: [{ name: "t", inputSchema: { type: "array" } }] }, false).ok).toBe(false);
    expect(checkResult("tools/call", { content: [{ type: "text", text: "ok" }] }, false).ok).toBe(true);
    expect(checkResult("roots/list", { roots: [{ uri: "https://example.invalid/" }] }, false).ok).toBe(false);
  });
});

describe("the server's stderr", () => {
  it("is cut per line, prefixed, and held to a budget that refills; what is over it is counted", () => {
    let now = 0;
    const out: string[] = [];
    const r = new StderrRelay({ name: "mcp s", write: (t) => out.push(t), redact: (t) => t.replace("secret", "[REDACTED]"), neutralise: (t) => t.replace("\u001b", "\\e"), rate: 100, burst: 100, now: () => now });
    r.push(Buffer.from("a secret \u001b[2J\n"));
    r.push(Buffer.from(`${"x".repeat(200)}\n`));
    now = 10_000;
    r.push(Buffer.from("later\n"));
    r.finish();
    expect(out[0]).toBe("mcp s: a [REDACTED] \\e[2J\n");
    expect(out[1]).toContain("1 line(s), 201 bytes of the server's stderr not shown");
    expect(out[2]).toBe("mcp s: later\n");
  });
});

describe("the relay's order of things", () => {
  it("a tools/call reaches the server only once its record is durable, and a refusal reaches the client only once it is recorded", async () => {
    const { Relay } = await import("../../src/mcp/relay.js");
    const dir = mkdtempSync(join(tmpdir(), "vak-relay-"));
    const toServer: Record<string, unknown>[] = [];
    const toClient: Record<string, unknown>[] = [];
    let durable: () => void = () => undefined;
    const relay = new Relay({
      policy: policy({ deny: new Set(["bad"]) }), pins: new PinStore(join(dir, "pins")), command: ["x"], warn: () => undefined,
      reach: { paths: [], denied: [] }, neutralise: (t) => t, redact: (v) => v, toServer: (m) => void toServer.push(m), toClient: (m) => void toClient.push(m),
      record: {
        call: () => new Promise<void>((r) => (durable = r)), result: () => undefined, dropped: () => undefined,
        initialized: () => undefined, tools: () => undefined, approval: () => undefined,
      },
    });
    const tick = () => new Promise((r) => setImmediate(r));
    relay.fromClient(JSON.stringify({ jsonrpc: "2.0", id: "c1", method: "tools/list" }));
    relay.fromServer(JSON.stringify({ jsonrpc: "2.0", id: toServer.at(-1)!.id, result: { tools: [{ name: "t", inputSchema: { type: "object" } }, { name: "bad", inputSchema: { type: "object" } }] } }));
    expect(((toClient.at(-1)!.result as { tools: { name: string }[] }).tools).map((t) => t.name)).toEqual(["t"]);
    const sent = toServer.length;
    relay.fromClient(JSON.stringify({ jsonrpc: "2.0", id: "c2", method: "tools/call", params: { name: "t", arguments: {} } }));
    await tick();
    await tick();
    expect(toServer.length).toBe(sent);
    durable();
    await tick();
    expect(toServer.at(-1)).toMatchObject({ method: "tools/call", params: { name: "t" } });
    expect(toServer.at(-1)!.id).not.toBe("c2");
    const answered = toClient.length;
    relay.fromClient(JSON.stringify({ jsonrpc: "2.0", id: "c3", method: "tools/call", params: { name: "bad" } }));
    await tick();
    await tick();
    expect(toClient.length).toBe(answered);
    durable();
    await tick();
    expect(toClient.at(-1)).toMatchObject({ id: "c3", result: { isError: true } });
    rmSync(dir, { recursive: true, force: true });
  });
});
