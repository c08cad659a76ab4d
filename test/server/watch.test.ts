import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, spawnVak } from "../support/vak.js";
import type { ChildProcess } from "node:child_process";

// `vak --serve`: the interactive terminal session and the browser client
// watch the same session, in one process. An approval can be answered from
// either; the first answer counts and the other is void, on the record.

let s: Scratch;
let vak: ChildProcess;
let out = "";
let base: string;
let token: string;

const api = async (method: "GET" | "POST", path: string, body?: unknown) => {
  const r = await fetch(`${base}api/${path}`, {
    method, headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};
const until = async (what: string, cond: () => boolean | Promise<boolean>, ms = 15_000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; the terminal shows:\n${out}`);
    await new Promise((r) => setTimeout(r, 30));
  }
};
let sessionId: string;
const pending = async () => ((await api("GET", `sessions/${sessionId}/approvals`)).body.approvals as { nonce: string; digest: string; generation: number }[]);
const events = async () => ((await api("GET", `sessions/${sessionId}/events?limit=500`)).body.events as { kind: string; payload: Record<string, unknown> }[]);

beforeAll(async () => {
  s = scratch();
  writeFileSync(join(s.ws, "a.txt"), "one\n");
  const script = join(s.root, "script.json");
  writeFileSync(script, JSON.stringify({ turns: [
    { text: "first edit", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "one", new_text: "two" } }] },
    { text: "second edit", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "two", new_text: "three" } }] },
    { text: "all done" },
    { text: "the browser's instruction, answered" },
  ] }));
  const root = mkdtempSync(join(tmpdir(), "vak-watch-"));
  mkdirSync(join(root, "config", "vak"), { recursive: true });
  vak = spawnVak(["--serve", "--model", `scripted:${script}`], { cwd: s.ws, env: baseEnv({ XDG_STATE_HOME: join(root, "state"), XDG_CONFIG_HOME: join(root, "config") }) });
  vak.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  vak.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  await until("the login URL", () => /the browser client: http:\/\/vak-[0-9a-f]{16}\.localhost:(\d+)\/\?token=(\S+)/.test(out));
  const m = /the browser client: http:\/\/vak-[0-9a-f]{16}\.localhost:(\d+)\/\?token=(\S+)/.exec(out)!;
  base = `http://127.0.0.1:${m[1]!}/`;
  token = m[2]!;
});
afterAll(async () => {
  if (vak && vak.exitCode === null) {
    vak.stdin!.end("/quit\n");
    await new Promise((r) => vak.once("exit", r));
  }
  s?.cleanup();
});

describe("vak --serve: the terminal and the browser watch one session", () => {
  it("the browser lists the terminal's session as live", async () => {
    const list = (await api("GET", "sessions")).body.sessions as { id: string; live: boolean; title: string }[];
    const live = list.filter((x) => x.live);
    expect(live).toHaveLength(1);
    sessionId = live[0]!.id;
  });

  it("the browser answers first: the terminal's prompt is retracted, and the terminal's late answer is void on the record", async () => {
    vak.stdin!.write("make the edits\n");
    await until("the first approval", async () => (await pending()).length === 1 && out.includes("allow? [y]"));
    const [card] = await pending();
    // The browser sees what the terminal prints: the model's text, streamed into its transcript.
    const items = (await api("GET", `sessions/${sessionId}/messages`)).body.items as { type: string; text?: { text: string } }[];
    expect(items.some((i) => i.type === "text" && i.text?.text === "first edit")).toBe(true);
    expect((await api("POST", `sessions/${sessionId}/approvals`, { nonce: card!.nonce, digest: card!.digest, generation: card!.generation, answer: "allow" })).status).toBe(200);
    await until("the retraction", () => out.includes("(answered from the browser: allow)"));
    vak.stdin!.write("n\n");
    await until("the void answer", () => out.includes("that answer no longer counts"));
    await until("the file change", () => readFileSync(join(s.ws, "a.txt"), "utf8") === "two\n");
    const ev = await events();
    const answered = ev.filter((e) => e.kind === "approval.answered" && e.payload.nonce === card!.nonce);
    expect(answered).toHaveLength(1);
    expect(answered[0]!.payload).toMatchObject({ answer: "allow", by: "web" });
    expect(ev.some((e) => e.kind === "approval.voided" && e.payload.nonce === card!.nonce && e.payload.by === "terminal")).toBe(true);
  });

  it("the terminal answers first: the browser's card closes, and its late answer is refused (409)", async () => {
    await until("the second approval", async () => (await pending()).length === 1);
    const [card] = await pending();
    await until("the terminal prompt", () => out.split("allow? [y]").length === 3);
    vak.stdin!.write("n\n");
    await until("the card to close", async () => (await pending()).length === 0);
    const late = await api("POST", `sessions/${sessionId}/approvals`, { nonce: card!.nonce, digest: card!.digest, generation: card!.generation, answer: "allow" });
    expect(late.status).toBe(409);
    expect(String((late.body.error as { message: string }).message)).toContain("already answered");
    await until("the run to end", () => out.includes("── done"));
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("two\n");
  });

  it("an instruction from the browser runs in the same session, and the terminal shows it", async () => {
    expect((await api("POST", `sessions/${sessionId}/messages`, { text: "from the browser" })).status).toBe(202);
    await until("the answer in the terminal", () => out.includes("the browser's instruction, answered"));
  });

  it("a mode switch from the browser revokes, and the terminal is told the new state", async () => {
    await until("the run to end", async () => !((await api("GET", `sessions/${sessionId}`)).body.state as { running: boolean }).running);
    const r = await api("POST", `sessions/${sessionId}/mode`, { mode: "read-only" });
    expect(r.status).toBe(200);
    expect(r.body.state).toMatchObject({ mode: "read-only", generation: 2 });
    await until("the terminal's mode line", () => out.includes("[mode is now read-only; generation 2"));
    vak.stdin!.write("/status\n");
    await until("the status line", () => out.includes("vak · read-only · generation 2"));
  });
});
