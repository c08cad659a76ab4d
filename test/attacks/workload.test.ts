import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ApprovalRequest } from "../../src/approvals/approval-gate.js";
import type { Journal } from "../../src/journal/journal.js";
import { openJournal } from "../../src/journal/open.js";
import { ScriptedClient, type Script } from "../../src/model/scripted.js";
import { SecretStore } from "../../src/secrets/store.js";
import { WorkloadSession } from "../../src/workload/workload-session.js";
import { createHost } from "../../src/workload/host.js";
import { checkSpec, loadSpec } from "../../src/workload/spec.js";
import { HOSTILE, SUPPORT } from "../support/mcp.js";
import { ROOT } from "../support/paths.js";
import { runVak, TEST_STATE } from "../support/vak.js";

let root: string;
let ws: string;
let journal: Journal;
let store: SecretStore;
let server: Server;
let port: number;
let hits: { url: string; headers: IncomingHttpHeaders }[];
const A_SECRET = `a-secret-${Math.random().toString(36).slice(2)}`;
const B_SECRET = `b-secret-${Math.random().toString(36).slice(2)}`;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), "vak-test-workload-"));
  ws = join(root, "ws");
  mkdirSync(join(ws, "folderA"), { recursive: true });
  mkdirSync(join(ws, "folderB"));
  writeFileSync(join(ws, "folderA", "a.txt"), "A-CONTENT\n");
  writeFileSync(join(ws, "folderB", "b.txt"), "B-CONTENT\n");
  journal = await openJournal({ path: join(root, "journal.db"), ingest: false });
  store = new SecretStore(join(root, "secrets.json"));
  store.set("a_secret", A_SECRET);
  store.set("b_secret", B_SECRET);
  hits = [];
  server = createServer((req, res) => {
    hits.push({ url: req.url ?? "", headers: req.headers });
    res.end("hello from B\n");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as { port: number }).port;
});
afterEach(async () => {
  await journal.close();
  await new Promise((r) => server.close(r));
  rmSync(root, { recursive: true, force: true });
});

/** The fetcher: reads {path} on stdin, fetches it from host B with its token, and reports what else it can see. */
const FETCHER = [
  "let s='';process.stdin.on('data',d=>s+=d).on('end',async()=>{",
  "const {path}=JSON.parse(s);const fs=require('fs');",
  "const r=await fetch('http://127.0.0.1:'+process.env.B_PORT+path,{headers:{'x-token':process.env.B_TOKEN||'none'}}).then(r=>r.status+' '+r.statusText,e=>'failed '+e.message);",
  "console.log('fetch:',r);console.log('sees folderA:',fs.existsSync(process.env.WS+'/folderA/a.txt'));console.log('A_TOKEN:',process.env.A_TOKEN||'unset');})",
].join("");

function specText(extra = ""): string {
  return `version = 1
name = "test-wl"
workspace = "ws"

[harness]
instructions = "Use the tools."

[tools.reader]
builtin = ["read_file", "list_dir", "exec"]
read = ["folderA"]
secrets = [{ ref = "secret:a_secret", env = "A_TOKEN" }]
stores = ["alpha"]
approval = { exec = "allow" }
${extra}
[tools.fetcher]
command = ["node", "-e", ${JSON.stringify(FETCHER)}]
input = { type = "object", properties = { path = { type = "string" } }, required = ["path"] }
net = ["127.0.0.1:${port}"]
env = ["B_PORT", "WS"]
secrets = [{ ref = "secret:b_secret", env = "B_TOKEN" }]
stores = ["beta"]
approval = { exec = "allow" }
`;
}

function session(script: Script, opts: { file?: string; onApproval?: (r: ApprovalRequest, s: WorkloadSession) => void } = {}) {
  const file = opts.file ?? join(root, "spec.toml");
  if (!opts.file) writeFileSync(file, specText());
  const model = new ScriptedClient(script);
  let s: WorkloadSession | undefined = undefined;
  s = new WorkloadSession(loadSpec(file), {
    model, journal, secretStore: store, storesDir: join(root, "stores"),
    env: { ...process.env, B_PORT: String(port), WS: ws },
    onApproval: opts.onApproval ? (r) => opts.onApproval!(r, s!) : undefined,
  });
  return { s, model, events: async () => (await journal.flush(), journal.events(s!.journalSession!.id)) };
}

const toolOutputs = (model: ScriptedClient) => {
  const last = model.seen[model.seen.length - 1]!;
  return last.messages.filter((m) => m.role === "tool").map((m) => (m.role === "tool" ? m.text : ""));
};

describe("a workload with a harness and two tools with disjoint grants", () => {
  it("each tool reaches only its own folder, host, secret and store; the harness reaches nothing itself", async () => {
    const { s, model, events } = session({
      turns: [
        { tool_calls: [{ name: "reader__read_file", args: { path: "folderA/a.txt" } }] },
        { tool_calls: [{ name: "reader__read_file", args: { path: "folderB/b.txt" } }] },
        { tool_calls: [{ name: "reader__exec", args: { command: `cat ${ws}/folderB/b.txt 2>&1; echo "A=$A_TOKEN"; echo "B=\${B_TOKEN:-unset}"; node -e "fetch('http://127.0.0.1:${port}/from-reader').then(r=>console.log('reader fetch',r.status),e=>console.log('reader fetch failed'))"` } }] },
        { tool_calls: [{ name: "fetcher", args: { path: "/from-fetcher" } }] },
        { tool_calls: [{ name: "reader__store", args: { action: "put", store: "alpha", key: "k", value: "v1" } }] },
        { tool_calls: [{ name: "reader__store", args: { action: "get", store: "beta", key: "k" } }] },
        { tool_calls: [{ name: "fetcher__store", args: { action: "get", store: "alpha", key: "k" } }] },
        { tool_calls: [{ name: "read_file", args: { path: "folderA/a.txt" } }] },
        { text: "done" },
      ],
    });
    try {
      const r = await s.send("go");
      expect(r.outcome).toBe("done");
      const out = toolOutputs(model);
      expect(out[0]).toBe("A-CONTENT\n");
      expect(out[1]).toMatch(/^refused \(denied\)/);
      expect(out[2]).toContain("No such file");
      expect(out[2]).not.toContain("B-CONTENT");
      expect(out[2]).toContain("A=[REDACTED]");
      expect(out[2]).toContain("B=unset");
      expect(out[2]).toContain("reader fetch failed");
      expect(out[3]).toMatch(/fetch: 200\b/);
      expect(out[3]).toContain("sees folderA: false");
      expect(out[3]).toContain("A_TOKEN: unset");
      expect(out[4]).toBe("stored");
      expect(out[5]).toMatch(/refused \(denied\).*alpha/);
      expect(out[6]).toMatch(/refused \(denied\).*beta/);
      expect(out[7]).toMatch(/no tool named "read_file"/);
      // Host B saw only the fetcher, with the fetcher's own secret.
      expect(hits.map((h) => h.url)).toEqual(["/from-fetcher"]);
      expect(hits[0]!.headers["x-token"]).toBe(B_SECRET);
      // The harness was offered only components' tools and session_search.
      expect(model.seen[0]!.tools.sort()).toEqual(["fetcher", "fetcher__store", "reader__exec", "reader__list_dir", "reader__read_file", "reader__store", "session_search"]);
      // Asking tool 1 to read folder B is refused and journaled, with the component as actor.
      const denied = (await events()).filter((e) => e.kind === "decision" && (e.payload as { allowed: boolean }).allowed === false);
      expect(denied.map((e) => e.actor.component)).toEqual(["reader", "reader", "fetcher"]);
      expect(denied[0]!.payload).toMatchObject({ op: "read", rule: "outside-grants" });
      const used = (await events()).filter((e) => e.kind === "secret.used").map((e) => [e.actor.component, (e.payload as { name: string }).name]);
      expect(used).toEqual([["reader", "secret:a_secret"], ["fetcher", "secret:b_secret"]]);
      expect(JSON.stringify((await events()))).not.toContain(A_SECRET);
      expect(JSON.stringify((await events()))).not.toContain(B_SECRET);
    } finally {
      await s.close();
    }
  });

  it("session_search finds this workload's own sessions only", async () => {
    const other = join(root, "other.toml");
    writeFileSync(other, specText().replace('name = "test-wl"', 'name = "other-wl"'));
    const o = session({ turns: [{ tool_calls: [{ name: "reader__list_dir", args: { path: "folderA" } }] }, { text: "x" }] }, { file: other });
    await o.s.send("zebra-marker in the other workload");
    await o.s.close();
    const mine = session({ turns: [{ tool_calls: [{ name: "session_search", args: { query: "zebra" } }] }, { text: "x" }] });
    await mine.s.send("look for it");
    await mine.s.close();
    const first = session({ turns: [{ tool_calls: [{ name: "session_search", args: { query: "look" } }] }, { text: "x" }] });
    await first.s.send("again");
    await first.s.close();
    expect(toolOutputs(mine.model)[0]).not.toContain("zebra-marker");
    expect(toolOutputs(first.model)[0]).toContain("look for it");
    expect(toolOutputs(first.model)[0]).not.toContain("zebra-marker");
  });

  it("stores of two workloads never mix", async () => {
    const other = join(root, "other.toml");
    writeFileSync(other, specText().replace('name = "test-wl"', 'name = "other-wl"'));
    const a = session({ turns: [{ tool_calls: [{ name: "reader__store", args: { action: "put", store: "alpha", key: "shared", value: "from-A" } }] }, { text: "x" }] });
    await a.s.send("put");
    await a.s.close();
    const b = session({ turns: [{ tool_calls: [{ name: "reader__store", args: { action: "get", store: "alpha", key: "shared" } }] }, { text: "x" }] }, { file: other });
    await b.s.send("get");
    await b.s.close();
    expect(toolOutputs(b.model)[0]).toBe("(no such key)");
  });
});

describe("specs that cannot be held are refused before anything starts", () => {
  const write = (text: string) => {
    const f = join(root, "bad.toml");
    writeFileSync(f, text);
    return f;
  };
  it.each([
    ["a harness with a grant", "HARNESS", /bad\.toml:7: harness\.read: the harness holds no grant/],
    ["an unknown key", '[tools.extra]\nbuiltin = ["read_file"]\nread = ["folderA"]\nreed = ["x"]\n', /bad\.toml:\d+: tools\.extra\.reed: Unrecognized key/],
    ["a wildcard host", '[tools.extra]\nbuiltin = ["exec"]\nnet = ["*"]\n', /tools\.extra\.net/],
    ["the whole file system", '[tools.extra]\nbuiltin = ["read_file"]\nread = ["/"]\n', /whole file system/],
    ["a path that does not exist", '[tools.extra]\nbuiltin = ["read_file"]\nread = ["no/such/dir"]\n', /tools\.extra\.read\.0: .*cannot be resolved/],
    ["a glob", '[tools.extra]\nbuiltin = ["read_file"]\nread = ["folder*"]\n', /wildcards are not grants/],
    ["web_fetch without a net grant", '[tools.extra]\nbuiltin = ["web_fetch"]\n', /tools\.extra\.builtin: web_fetch needs a net grant/],
    ["a placeholder secret for a host the tool may not reach", '[tools.extra]\nbuiltin = ["exec"]\nnet = ["api.example.com"]\nsecrets = [{ ref = "secret:k", env = "K", hosts = ["evil.example.net"] }]\n', /tools\.extra\.secrets\.0\.hosts\.0: evil\.example\.net is not in this component's net grants/],
    ["a header secret for a host the tool may not reach", '[tools.extra]\nbuiltin = ["exec"]\nnet = ["api.example.com/v1/*"]\nsecrets = [{ ref = "secret:k", header = "X-K", hosts = ["other.example.com"] }]\n', /tools\.extra\.secrets\.0\.hosts\.0: other\.example\.com is not in/],
  ])("%s", (_name, extra, message) => {
    const text = extra === "HARNESS" ? specText().replace('instructions = "Use the tools."', 'instructions = "Use the tools."\nread = ["folderA"]') : specText().replace("[tools.reader]", `${extra}\n[tools.reader]`);
    expect(() => loadSpec(write(text))).toThrow(message);
  });

  it("a placeholder secret for a granted host (paths aside) is held by the gate, not given to the tool", () => {
    const text = specText().replace("[tools.reader]", '[tools.extra]\nbuiltin = ["exec"]\nnet = ["api.example.com/v1/*"]\nsecrets = [{ ref = "secret:k", env = "K", hosts = ["api.example.com"] }]\n[tools.reader]');
    const plan = loadSpec(write(text));
    expect(plan.components.find((c) => c.name === "extra")!.secrets[0]!.recipient).toEqual({ kind: "placeholder", name: "K", hosts: ["api.example.com"] });
  });

  it("a tool with a write grant when the user's mode is read-only", () => {
    const f = write(specText().replace('read = ["folderA"]', 'read = ["folderA"]\nwrite = ["folderB"]'));
    expect(() => loadSpec(f, { mode: "read-only" })).toThrow(/tools\.reader\.write: the session is read-only/);
    expect(() => loadSpec(f, { mode: "workspace-write" })).not.toThrow();
  });

  it("a missing secret stops the session before any component starts", () => {
    const f = write(specText().replace("secret:a_secret", "secret:nope"));
    expect(() => new WorkloadSession(loadSpec(f), { model: new ScriptedClient({ turns: [{ text: "x" }] }), secretStore: store, storesDir: join(root, "stores") })).toThrow(/secret:nope: no such secret/);
  });

  it("vak check prints what each component reaches, and refuses a bad spec with its line", async () => {
    const f = join(root, "spec.toml");
    writeFileSync(f, specText());
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root, XDG_STATE_HOME: TEST_STATE };
    const ok = await runVak(["check", f, "--json"], { cwd: root, env });
    expect(ok.code).toBe(0);
    const view = JSON.parse(ok.stdout);
    expect(view.harness.grants).toBe("none");
    expect(view.components[0]).toMatchObject({ component: "reader", read: [join(ws, "folderA")], write: [], net: [], stores: ["alpha"], secrets: [{ ref: "secret:a_secret", to: "env A_TOKEN" }] });
    expect(view.components[1]).toMatchObject({ component: "fetcher", read: [], net: [`127.0.0.1:${port}`], stores: ["beta"] });
    const text = await runVak(["check", f], { cwd: root, env });
    expect(text.stdout).toContain("harness: model");
    expect(text.stdout).toContain(join(ws, "folderA"));
    const bad = join(root, "bad.toml");
    writeFileSync(bad, specText().replace('stores = ["alpha"]', 'stores = ["alpha"]\nwrite = ["/"]'));
    const refused = await runVak(["check", bad], { cwd: root, env });
    expect(refused.code).toBe(125);
    expect(refused.stderr).toMatch(/bad\.toml:\d+: tools\.reader\.write\.0: .*whole file system/);
  });
});

describe("vak run --spec", () => {
  it("runs the workload from the CLI, each component under its own grants", async () => {
    const config = join(root, "config");
    const cliStore = new SecretStore(join(config, "vak", "secrets.json"));
    cliStore.set("a_secret", A_SECRET);
    cliStore.set("b_secret", B_SECRET);
    const spec = join(root, "spec.toml");
    writeFileSync(spec, specText());
    const script = join(root, "script.json");
    writeFileSync(script, JSON.stringify({ turns: [{ tool_calls: [{ name: "reader__read_file", args: { path: "folderB/b.txt" } }, { name: "fetcher", args: { path: "/cli" } }] }, { text: "finished" }] }));
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root, XDG_STATE_HOME: TEST_STATE, XDG_CONFIG_HOME: config, B_PORT: String(port), WS: ws };
    const r = await runVak(["run", "--spec", spec, "--model", `scripted:${script}`, "--json", "go"], { cwd: root, env });
    expect(r.code).toBe(3); // finished, with a refusal
    expect(r.stdout).toMatch(/✗ reader__read_file: refused \(denied\)/);
    expect(r.stdout).toMatch(/fetch: 200\b/);
    expect(JSON.parse(r.stderr.trim().split("\n").pop()!)).toMatchObject({ outcome: "done", workload: "test-wl" });
    expect(hits.map((h) => [h.url, h.headers["x-token"]])).toEqual([["/cli", B_SECRET]]);
  });
});

describe("editing the spec during a session", () => {
  it("changes nothing until the user approves the new spec, which starts a new generation", async () => {
    const file = join(root, "spec.toml");
    writeFileSync(file, specText());
    let approve = false;
    const asked: string[] = [];
    const script = { turns: Array.from({ length: 3 }, () => [{ tool_calls: [{ name: "reader__read_file", args: { path: "folderB/b.txt" } }] }, { text: "x" }]).flat() };
    const { s, model, events } = session(script, {
      file,
      onApproval: (r, sess) => {
        asked.push(r.op);
        queueMicrotask(() => sess.approvals.answer({ nonce: r.nonce, digest: r.digest, generation: r.generation, answer: approve ? "allow" : "deny", by: "test" }));
      },
    });
    try {
      await s.send("read b");
      expect(toolOutputs(model).at(-1)).toMatch(/^refused \(denied\)/);
      // The repository (or anyone) widens the reader's grant in the file.
      writeFileSync(file, specText().replace('read = ["folderA"]', 'read = ["folderA", "folderB"]'));
      await s.send("read b again");
      expect(asked).toEqual(["spec"]);
      expect(toolOutputs(model).at(-1)).toMatch(/^refused \(denied\)/);
      expect(s.generation).toBe(1);
      // Approved (a new session would ask again; this one asks once per edit, so edit again).
      approve = true;
      writeFileSync(file, `${specText().replace('read = ["folderA"]', 'read = ["folderA", "folderB"]')}\n# approved\n`);
      await s.send("and now");
      expect(s.generation).toBe(2);
      expect(toolOutputs(model).at(-1)).toBe("B-CONTENT\n");
      const gens = (await events()).filter((e) => e.kind === "policy.generation").map((e) => (e.payload as { generation: number }).generation);
      expect(gens).toEqual([1, 2]);
    } finally {
      await s.close();
    }
  });
});

describe("the library", () => {
  it("two object specs with the same name but other workspaces do not share stores", () => {
    const spec = (workspace: string) => ({ version: 1 as const, name: "assistant", workspace, tools: { t: { builtin: ["read_file" as const], read: ["."], stores: ["s"] } } });
    const other = mkdtempSync(join(tmpdir(), "vak-test-other-ws-"));
    try {
      expect(checkSpec(spec(ws)).id).not.toBe(checkSpec(spec(other)).id);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it("the example in examples/ runs with the scripted provider", async () => {
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const c = spawn(process.execPath, [join(ROOT, "examples", "library.mjs")], { env: { PATH: process.env.PATH ?? "", HOME: root, XDG_STATE_HOME: TEST_STATE }, cwd: ROOT });
      let stdout = "";
      let stderr = "";
      c.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      c.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      c.on("close", (code) => resolve({ code, stdout, stderr }));
    });
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/denied notes__read_file: refused \(denied\)/);
    expect(out.stdout).toMatch(/approval asked by counter/);
    expect(out.stdout).toMatch(/done: Deploys happen on Tuesdays/);
    void readFileSync;
  });
});

describe("an MCP component's stderr reaches the library's onLog", () => {
  it("terminal escapes, bidi controls and a component's secret written to stderr reach onLog neutralised and redacted, one bounded line", async () => {
    const file = join(root, "mcp.toml");
    writeFileSync(file, [
      "version = 1", 'name = "mcp-log"', 'workspace = "ws"', "", "[harness]", 'instructions = "Use the tools."', "",
      "[tools.h]", `mcp = [${JSON.stringify(process.execPath)}, ${JSON.stringify(HOSTILE)}]`, `read = [${JSON.stringify(SUPPORT)}]`,
      'secrets = [{ ref = "secret:a_secret", env = "A_TOKEN" }]', 'approval = { exec = "allow" }', "",
    ].join("\n"));
    const lines: string[] = [];
    const model = new ScriptedClient({ turns: [
      { tool_calls: [{ name: "h__stderr_escape", args: { secret: A_SECRET } }, { name: "h__flood_stderr", args: { bytes: 8 * 1024 } }, { name: "h__stderr_escape", args: { secret: "x".repeat(64 * 1024) } }] },
      { text: "done" },
    ] });
    const s = new WorkloadSession(loadSpec(file), { model, journal, secretStore: store, onLog: (l) => lines.push(l) });
    try {
      await s.send("go");
    } finally {
      await s.close();
    }
    const all = lines.join("\n");
    expect(all).toContain("leaked [REDACTED]");
    expect(all).not.toContain(A_SECRET);
    // Nothing a terminal obeys: no ESC, BEL, no direction override, only their escapes.
    expect(all).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(all).toContain("\\u{1b}");
    expect(all).toContain("\\u{202e}");
    // Each line is bounded, and says it was cut.
    expect(Math.max(...lines.map((l) => l.length))).toBeLessThanOrEqual(8 * 1024);
    expect(all).toContain("[line cut]");
  });
});

describe("a command component's own files (command = [..., path])", () => {
  const commandSpec = (argv: string) => `version = 1
name = "cmd-wl"
workspace = "ws"

[tools.t]
command = ${argv}
input = { type = "object", properties = { q = { type = "string" } } }
approval = { exec = "allow" }
`;
  const SECRET = `outside-secret-${Math.random().toString(36).slice(2)}`;
  beforeEach(() => {
    mkdirSync(join(ws, "tools"));
    writeFileSync(join(ws, "tools", "t.js"), "console.log('the tool ran')\n");
    writeFileSync(join(root, "secret.js"), `console.log(${JSON.stringify(SECRET)})\n`);
  });

  it("a relative path that climbs out of the workspace with .. is refused, with its field", () => {
    const f = join(root, "s.toml");
    writeFileSync(f, commandSpec('["node", "../secret.js"]'));
    expect(() => loadSpec(f)).toThrow(/s\.toml:6: tools\.t\.command\.1: \.\.\/secret\.js leads outside the workspace/);
  });

  it("a relative path through a symlink planted in the workspace is refused", () => {
    symlinkSync(join(root, "secret.js"), join(ws, "tools", "link.js"));
    const f = join(root, "s.toml");
    writeFileSync(f, commandSpec('["node", "tools/link.js"]'));
    expect(() => loadSpec(f)).toThrow(/tools\.t\.command\.1: tools\/link\.js leads outside the workspace/);
  });

  it("a path into Vak's own state is refused like any grant of it", () => {
    const state = join(root, "vakstate");
    mkdirSync(join(state, "vak"), { recursive: true });
    writeFileSync(join(state, "vak", "journal.db"), "x");
    const f = join(root, "s.toml");
    writeFileSync(f, commandSpec(`["cat", ${JSON.stringify(join(state, "vak", "journal.db"))}]`));
    const before = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = state;
    try {
      expect(() => loadSpec(f)).toThrow(/tools\.t\.command: .*covers Vak's own state/);
    } finally {
      if (before === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = before;
    }
  });

  it("the file swapped for a symlink after the spec was checked does not run what the link points to", async () => {
    const f = join(root, "s.toml");
    writeFileSync(f, commandSpec('["node", "tools/t.js"]'));
    const model = new ScriptedClient({ turns: [{ tool_calls: [{ name: "t", args: { q: "1" } }] }, { text: "a" }, { tool_calls: [{ name: "t", args: { q: "2" } }] }, { text: "b" }] });
    const s = new WorkloadSession(loadSpec(f), { model, journal, secretStore: store, storesDir: join(root, "stores") });
    try {
      await s.send("first");
      expect(toolOutputs(model)[0]).toContain("the tool ran");
      rmSync(join(ws, "tools", "t.js"));
      symlinkSync(join(root, "secret.js"), join(ws, "tools", "t.js"));
      await s.send("second");
      const second = toolOutputs(model).at(-1)!;
      expect(second).not.toContain(SECRET);
      expect(second).toMatch(/^refused \(changed\): t's command changed since the spec was checked: .*t\.js is now a symbolic link/);
    } finally {
      await s.close();
    }
  });
});

describe("a spec cannot hand the provider key to a component", () => {
  const KEY = `sk-ant-api03-${"K".repeat(24)}${Math.random().toString(36).slice(2)}`;
  const config = () => {
    const dir = join(root, "config");
    mkdirSync(join(dir, "vak"), { recursive: true });
    writeFileSync(join(dir, "vak", "config.toml"), `[providers.local]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "LOCAL_KEY"\n`);
    return dir;
  };
  const withTool = (extra: string) => specText().replace("[tools.fetcher]", `[tools.leaky]\nbuiltin = ["exec"]\n${extra}\n\n[tools.fetcher]`);
  const cliEnv = (more: Record<string, string> = {}) => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root, XDG_STATE_HOME: TEST_STATE, XDG_CONFIG_HOME: config(), B_PORT: String(port), WS: ws, ...more });

  it.each([
    ["the variable a configured provider's key is in", 'env = ["LOCAL_KEY"]', {}, /tools\.leaky\.env\.0: LOCAL_KEY is the environment variable of a model provider's key; the key stays with the host/],
    ["a built-in provider's variable", 'env = ["ANTHROPIC_API_KEY"]', {}, /tools\.leaky\.env\.0: ANTHROPIC_API_KEY is the environment variable of a model provider's key/],
    ["another variable that holds the key's value", 'env = ["INNOCENT"]', { INNOCENT: KEY, OPENAI_API_KEY: KEY }, /tools\.leaky\.env\.0: INNOCENT holds the value of a model provider's key/],
    ["an env: secret of the key's variable", 'secrets = [{ ref = "env:OPENAI_API_KEY", env = "TOKEN" }]', {}, /tools\.leaky\.secrets\.0\.ref: OPENAI_API_KEY is the environment variable/],
    ["an env: secret of a copy", 'secrets = [{ ref = "env:INNOCENT", env = "TOKEN" }]', { INNOCENT: `x${KEY}`, LOCAL_KEY: KEY }, /tools\.leaky\.secrets\.0\.ref: INNOCENT holds the value/],
  ])("vak check refuses %s, with its line", async (_what, extra, env, message) => {
    const f = join(root, "leaky.toml");
    writeFileSync(f, withTool(extra));
    const r = await runVak(["check", f], { cwd: root, env: cliEnv(env) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/leaky\.toml:\d+: /);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toContain(KEY);
  });

  it("a stored secret whose value is a provider key stops the session at its start (library and vak run --spec)", async () => {
    store.set("copied", KEY);
    const spec = () => ({ version: 1 as const, name: "leaky", workspace: ws, tools: { t: { builtin: ["exec" as const], secrets: [{ ref: "secret:copied", env: "TOKEN" }] } } });
    const host = await createHost(spec(), { model: new ScriptedClient({ turns: [{ text: "x" }] }), journalPath: join(root, "lib.db"), secretStore: store, storesDir: join(root, "stores"), env: { ...process.env, OPENAI_API_KEY: KEY } });
    try {
      expect(() => host.session()).toThrow(/the secret secret:copied \(for TOKEN\) would give its commands the value of a model provider's key/);
    } finally {
      await host.close();
    }
    const cliStore = new SecretStore(join(config(), "vak", "secrets.json"));
    cliStore.set("copied", KEY);
    cliStore.set("a_secret", A_SECRET);
    cliStore.set("b_secret", B_SECRET);
    const f = join(root, "leaky.toml");
    writeFileSync(f, withTool('secrets = [{ ref = "secret:copied", env = "TOKEN" }]'));
    const script = join(root, "s.json");
    writeFileSync(script, JSON.stringify({ turns: [{ tool_calls: [{ name: "leaky__exec", args: { command: "echo $TOKEN" } }] }, { text: "x" }] }));
    const r = await runVak(["run", "--spec", f, "--model", `scripted:${script}`, "go"], { cwd: root, env: cliEnv({ LOCAL_KEY: KEY }) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/leaky: the secret secret:copied \(for TOKEN\) would give its commands the value of a model provider's key/);
    expect(r.stdout + r.stderr).not.toContain(KEY);
  });
});

describe("approval of a command tool", () => {
  it("'a' for {target: staging} does not run {target: PRODUCTION-delete-everything} unasked, and the prompt says what it covers", async () => {
    const file = join(root, "deploy.toml");
    writeFileSync(file, `version = 1\nname = "deployer"\nworkspace = "ws"\n[tools.deploy]\ncommand = ["node", "-e", "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log('deployed', JSON.parse(s).target))"]\ninput = { type = "object", properties = { target = { type = "string" } }, required = ["target"] }\n`);
    const asked: ApprovalRequest[] = [];
    const { s, model } = session(
      {
        turns: [
          { tool_calls: [{ name: "deploy", args: { target: "staging" } }] },
          { tool_calls: [{ name: "deploy", args: { target: "PRODUCTION-delete-everything" } }] },
          { tool_calls: [{ name: "deploy", args: { target: "staging" } }] },
          { text: "done" },
        ],
      },
      {
        file,
        onApproval: (r, sess) => {
          asked.push(r);
          const answer = r.view.kind === "tool" && r.view.input.includes("PRODUCTION") ? "deny" : "allow-session";
          queueMicrotask(() => sess.approvals.answer({ nonce: r.nonce, digest: r.digest, generation: r.generation, answer, by: "test" }));
        },
      },
    );
    try {
      await s.send("deploy");
      expect(asked.map((r) => (r.view.kind === "tool" ? r.view.input : r.view.kind))).toEqual(['{"target":"staging"}', '{"target":"PRODUCTION-delete-everything"}']);
      expect(asked[0]!.scope).toMatch(/again with exactly this input \(sha256 [0-9a-f]{16}…\); any other input asks again/);
      const out = toolOutputs(model);
      expect(out[0]).toContain("deployed staging");
      expect(out[1]).toMatch(/^refused \(not-approved\)/);
      expect(out[2]).toContain("deployed staging");
    } finally {
      await s.close();
    }
  });
});

describe("session_search shows what was asked and decided, not what the host looked up", () => {
  it("no pids, mounts, resolved addresses or canonical plans of the host in what the model reads back", async () => {
    const first = session({ turns: [{ tool_calls: [{ name: "fetcher", args: { path: "/probe-marker" } }, { name: "reader__exec", args: { command: "echo probe-marker" } }] }, { text: "x" }] });
    await first.s.send("probe-marker run");
    await first.s.close();
    const raw = JSON.stringify(await first.events());
    expect(raw).toMatch(/"pid":\d+/);
    expect(raw).toMatch(/"address":/);
    const again = session({ turns: [{ tool_calls: [{ name: "session_search", args: { query: "probe" } }] }, { text: "x" }] });
    await again.s.send("search");
    await again.s.close();
    const seen = toolOutputs(again.model)[0]!;
    expect(seen).toContain("probe-marker");
    for (const leak of ['"pid"', '"address"', '"resolved"', '"mounts"', '"sandbox"', '"canonical"']) expect(seen).not.toContain(leak);
  });
});
