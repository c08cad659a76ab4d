import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { scratch, type Scratch } from "../support/fs.js";
import { head, rawRequest, type RawResponse } from "../support/raw-http.js";
import { serve, serveRefused, type Served } from "../support/serve.js";
import { project } from "../../src/server/terminal-stream.js";

// The exposure policy of `vak serve`, tried for real against the real server
// over real sockets: each test is one way a page, a peer or a repository has
// tried to drive a local server (the MCP Inspector before CVE-2025-49596,
// OpenCode's CVE-2026-22812, DNS rebinding, CSRF), and must fail.

let s: Scratch;
let srv: Served;
let host: string;
let cookie: string;
let scripts: string;

const script = (name: string, turns: unknown[]) => {
  const p = join(scripts, `${name}.json`);
  writeFileSync(p, JSON.stringify({ turns }));
  return `scripted:${p}`;
};

/** A request to the server with the given extra headers (Host is ours unless given). */
function req(method: string, path: string, headers: [string, string][] = [], body?: string, o: { localAddress?: string } = {}): Promise<RawResponse> {
  const hs: [string, string][] = headers.some(([k]) => k.toLowerCase() === "host") ? headers : [["Host", host], ...headers];
  if (body !== undefined) hs.push(["Content-Length", String(Buffer.byteLength(body))]);
  return rawRequest(head(method, path, hs), { port: srv.port, body, ...o });
}
const bearer = (): [string, string] => ["Authorization", `Bearer ${srv.token}`];
const json: [string, string] = ["Content-Type", "application/json"];
const own = () => `http://${host}`;

/** An upgrade request's answer: 101 or the refusal. */
function upgrade(path: string, headers: [string, string][], o: { localAddress?: string } = {}): Promise<RawResponse> {
  const hs: [string, string][] = headers.some(([k]) => k.toLowerCase() === "host") ? headers : [["Host", host], ...headers];
  return rawRequest(head("GET", path, [...hs, ["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Sec-WebSocket-Version", "13"], ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="]]), { port: srv.port, ...o, timeoutMs: 5000 });
}

async function sessionsCount(): Promise<number> {
  const r = await req("GET", "/api/sessions", [bearer()]);
  return (JSON.parse(r.body) as { sessions: unknown[] }).sessions.length;
}

/** Creates a session through the API (bearer), waits for its first approval card. */
async function sessionWaitingForApproval(model: string): Promise<{ id: string; card: { nonce: string; digest: string; generation: number } }> {
  const r = await req("POST", "/api/sessions", [bearer(), json], JSON.stringify({ kind: "agent", model, prompt: "go" }));
  expect(r.status, r.body).toBe(201);
  const id = (JSON.parse(r.body) as { id: string }).id;
  for (let i = 0; i < 300; i++) {
    const a = await req("GET", `/api/sessions/${id}/approvals`, [bearer()]);
    const cards = (JSON.parse(a.body) as { approvals: { nonce: string; digest: string; generation: number }[] }).approvals;
    // An answer names exactly the request's three bindings.
    if (cards.length) return { id, card: { nonce: cards[0]!.nonce, digest: cards[0]!.digest, generation: cards[0]!.generation } };
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error("no approval was asked");
}

beforeAll(async () => {
  s = scratch({ git: true });
  scripts = join(s.root, "scripts");
  mkdirSync(scripts);
  writeFileSync(join(s.ws, "a.txt"), "hello\n");
  srv = await serve({ workspace: s.ws, config: '[server]\ntrusted_hosts = ["vak.test"]\nterminal = true\n' });
  host = `127.0.0.1:${srv.port}`;
  const login = await req("GET", `/?token=${srv.token}`);
  cookie = login.headers["set-cookie"]!.split(";")[0]!;
});
afterAll(async () => {
  await srv?.close();
  s?.cleanup();
});

describe("the Host header (DNS rebinding)", () => {
  it("a rebinding page's Host (attacker.example with our port) gets 421 before its body is read", async () => {
    // The head promises 10 MB that never come: an answer proves nothing waited for the body.
    const r = await rawRequest(head("POST", "/api/sessions", [["Host", `attacker.example:${srv.port}`], ["Cookie", cookie], json, ["Content-Length", "10000000"]]), { port: srv.port, timeoutMs: 3000 });
    expect(r.status).toBe(421);
    expect(r.headers["content-security-policy"]).toContain("frame-ancestors 'none'");
  });

  it.each([
    ["127.1", (p: number) => `127.1:${p}`],
    ["a decimal IP", (p: number) => `2130706433:${p}`],
    ["a hex IP", (p: number) => `0x7f000001:${p}`],
    ["a trailing dot", (p: number) => `localhost.:${p}`],
    ["IPv4-mapped IPv6", (p: number) => `[::ffff:127.0.0.1]:${p}`],
    ["another 127/8 address", (p: number) => `127.0.0.2:${p}`],
    ["no port", () => "127.0.0.1"],
    ["another port", (p: number) => `127.0.0.1:${p + 1}`],
    ["a loopback name as a prefix", (p: number) => `127.0.0.1:${p}.attacker.example`],
    ["a wildcard-DNS name for loopback", (p: number) => `127.0.0.1.nip.io:${p}`],
    ["userinfo", (p: number) => `attacker.example@127.0.0.1:${p}`],
    ["a trusted host with a subdomain", () => "evil.vak.test"],
    ["a trusted host as a suffix", () => "vak.test.attacker.example"],
    ["an empty Host", () => ""],
    ["another instance's *.localhost name", (p: number) => `vak-0123456789abcdef.localhost:${p}`],
    ["a name under this instance's", () => `evil.${new URL(srv.loginUrl!).host}`],
    ["this instance's name at another port", (p: number) => `${new URL(srv.loginUrl!).hostname}:${p + 1}`],
    ["this instance's name as a prefix", () => `${new URL(srv.loginUrl!).host}.attacker.example`],
  ])("Host spelled as %s is refused", async (_what, spell) => {
    const r = await req("GET", "/api/sessions", [["Host", spell(srv.port)], bearer()]);
    expect(r.status).toBe(421);
  });

  it("the exact loopback names and the exact trusted host are answered", async () => {
    for (const h of [`127.0.0.1:${srv.port}`, `localhost:${srv.port}`, `[::1]:${srv.port}`, `LOCALHOST:${srv.port}`, "vak.test", new URL(srv.loginUrl!).host]) {
      const r = await req("GET", "/api/sessions", [["Host", h], bearer()]);
      expect(r.status, h).toBe(200);
    }
  });

  it("two Host headers are refused, whichever comes first", async () => {
    for (const pair of [[host, "attacker.example"], ["attacker.example", host], [host, host]]) {
      const r = await req("GET", "/api/sessions", [["Host", pair[0]!], ["Host", pair[1]!], bearer()]);
      expect(r.status).toBe(421);
    }
  });

  it("an absolute-form target naming another host is refused (it is not a proxy)", async () => {
    const r = await req("GET", "http://attacker.example/api/sessions", [bearer()]);
    expect(r.status).toBe(400);
    const own = await req("GET", `http://${host}/api/sessions`, [["Host", "attacker.example"], bearer()]);
    expect(own.status).toBe(400);
    const authority = await req("CONNECT", "attacker.example:443", [bearer()]);
    expect(authority.status).toBe(400);
  });

  it("a request without a Host (HTTP/1.0) is refused", async () => {
    const r = await rawRequest(head("GET", "/api/sessions", [bearer()], "HTTP/1.0"), { port: srv.port });
    expect(r.status).toBe(421);
  });

  it("a WebSocket with a rebinding Host gets no 101", async () => {
    const r = await upgrade("/api/ws", [["Host", `attacker.example:${srv.port}`], ["Cookie", cookie], ["Origin", `http://attacker.example:${srv.port}`]]);
    expect(r.status).toBe(421);
  });
});

describe("authentication", () => {
  it("no credential: the API answers 401 and says how to log in", async () => {
    for (const [m, p] of [["GET", "/api/sessions"], ["GET", "/api/info"], ["GET", "/api/journal/verify"]] as const) {
      const r = await req(m, p);
      expect(r.status).toBe(401);
      expect(r.body).toContain("login URL");
    }
    const post = await req("POST", "/api/sessions", [json], JSON.stringify({ kind: "agent" }));
    expect(post.status).toBe(401);
  });

  it("the page itself loads without a credential, so a logged-out browser can log in", async () => {
    const r = await req("GET", "/");
    expect(r.status).toBe(200);
    expect(r.body).toContain('<div id="app">');
  });

  it("a forged session cookie is refused", async () => {
    const name = cookie.split("=")[0]!;
    const r = await req("GET", "/api/sessions", [["Cookie", `${name}=forged-value`]]);
    expect(r.status).toBe(401);
  });

  it("a WebSocket without a credential gets no 101", async () => {
    const r = await upgrade("/api/ws", [["Origin", own()]]);
    expect(r.status).toBe(401);
  });

  it("the login URL answers 303 to the same URL without the token, with an HttpOnly SameSite=Strict cookie", async () => {
    const r = await req("GET", `/?view=x&token=${srv.token}`);
    expect(r.status).toBe(303);
    expect(r.headers.location).toBe("/?view=x");
    const c = r.headers["set-cookie"]!;
    expect(c).toMatch(/HttpOnly/);
    expect(c).toMatch(/SameSite=Strict/);
    expect(c).toMatch(/Path=\//);
    expect(r.headers["referrer-policy"]).toBe("no-referrer");
    expect(r.headers["cache-control"]).toBe("no-store");
    const ok = await req("GET", "/api/sessions", [["Cookie", c.split(";")[0]!]]);
    expect(ok.status).toBe(200);
  });

  it("the login URL from a peer that is not this machine's loopback (127.0.0.2) is refused, and sets no cookie", async () => {
    const r = await req("GET", `/?token=${srv.token}`, [], undefined, { localAddress: "127.0.0.2" });
    expect(r.status).toBe(403);
    expect(r.headers["set-cookie"]).toBeUndefined();
    expect(r.body).toContain("only from this machine's loopback");
  });

  it("the login URL through a proxy (X-Forwarded-For, Forwarded) is refused", async () => {
    for (const h of [["X-Forwarded-For", "203.0.113.9"], ["Forwarded", "for=203.0.113.9"], ["X-Real-IP", "203.0.113.9"]] as [string, string][]) {
      const r = await req("GET", `/?token=${srv.token}`, [h]);
      expect(r.status).toBe(403);
      expect(r.headers["set-cookie"]).toBeUndefined();
    }
  });

  it("the login URL on a trusted host name is refused: anywhere reachable by name it would be a credential in an access log", async () => {
    const r = await req("GET", `/?token=${srv.token}`, [["Host", "vak.test"]]);
    expect(r.status).toBe(403);
    expect(r.headers["set-cookie"]).toBeUndefined();
  });

  it("a token in the URL of anything but GET / is refused", async () => {
    for (const [m, p] of [["GET", `/api/sessions?token=${srv.token}`], ["POST", `/?token=${srv.token}`], ["GET", `/index.html?token=${srv.token}`]] as const) {
      const r = await req(m, p, m === "POST" ? [json] : [], m === "POST" ? "{}" : undefined);
      expect(r.status, p).toBe(403);
      expect(r.headers["set-cookie"]).toBeUndefined();
    }
  });

  it("a token in a WebSocket URL is refused", async () => {
    const r = await upgrade(`/api/ws?token=${srv.token}`, [["Origin", own()]]);
    expect(r.status).toBe(403);
  });

  it("a guessed token is rate-limited: after 10 failures from a peer even the right one gets 429", async () => {
    const peer = { localAddress: "127.0.0.9" };
    for (let i = 0; i < 10; i++) expect((await req("GET", "/api/sessions", [["Authorization", `Bearer wrong-${i}`]], undefined, peer)).status).toBe(401);
    const locked = await req("GET", "/api/sessions", [bearer()], undefined, peer);
    expect(locked.status).toBe(429);
    expect(Number(locked.headers["retry-after"])).toBeGreaterThan(0);
    // The limit is per peer and per kind of credential: everyone else, and this peer's cookie, are unaffected.
    expect((await req("GET", "/api/sessions", [bearer()])).status).toBe(200);
    expect((await req("GET", "/api/sessions", [["Cookie", cookie]], undefined, peer)).status).toBe(200);
  });

  it("a page that floods the login URL with wrong tokens cannot log out a browser already in", async () => {
    const peer = { localAddress: "127.0.0.1" };
    for (let i = 0; i < 12; i++) await req("GET", `/?token=wrong-${i}`, [], undefined, peer);
    expect((await req("GET", "/api/sessions", [["Cookie", cookie]], undefined, peer)).status).toBe(200);
    expect((await req("GET", "/api/sessions", [bearer()], undefined, peer)).status).toBe(200);
  });
});

describe("cross-site request forgery", () => {
  const create = JSON.stringify({ kind: "agent", mode: "read-only", model: "scripted:/nonexistent", prompt: "pwn" });

  it("a state change with the cookie and a foreign Origin is refused, and changes nothing", async () => {
    const before = await sessionsCount();
    for (const origin of ["http://attacker.example", `http://127.0.0.1:${srv.port + 1}`, `http://localhost:${srv.port + 1}`, "null", `https://${host}`]) {
      const r = await req("POST", "/api/sessions", [["Cookie", cookie], ["Origin", origin], json], create);
      expect(r.status, origin).toBe(403);
    }
    expect(await sessionsCount()).toBe(before);
  });

  it("a state change with the cookie and no Origin is refused, with a body or without", async () => {
    const r = await req("POST", "/api/sessions", [["Cookie", cookie], json], create);
    expect(r.status).toBe(403);
    expect(r.body).toContain("Authorization: Bearer");
    const { id } = await sessionWaitingForApproval(script(`cancel-${Date.now()}`, [{ text: "x", tool_calls: [{ name: "exec", args: { command: "true" } }] }]));
    for (const h of [[], [["Origin", "http://attacker.example"]], [["Origin", "http://attacker.example"], ["Content-Type", "application/x-www-form-urlencoded"]]] as [string, string][][]) {
      const bare = await req("POST", `/api/sessions/${id}/cancel`, [["Cookie", cookie], ...h], "");
      expect(bare.status).toBe(403);
    }
    const state = JSON.parse((await req("GET", `/api/sessions/${id}`, [bearer()])).body) as { state: { running: boolean } };
    expect(state.state.running).toBe(true);
    expect((await req("POST", `/api/sessions/${id}/cancel`, [bearer()], "")).status).toBe(200);
  });

  it("a cross-site text/plain form post with the cookie is refused", async () => {
    const before = await sessionsCount();
    const form = '{"kind":"agent","prompt":"pwn","x":"=' + '"}';
    const r = await req("POST", "/api/sessions", [["Cookie", cookie], ["Origin", "http://attacker.example"], ["Sec-Fetch-Site", "cross-site"], ["Sec-Fetch-Mode", "navigate"], ["Content-Type", "text/plain"]], form);
    expect(r.status).toBe(403);
    // Even with our own Origin, a form's content types are not a request of ours.
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const same = await req("POST", "/api/sessions", [["Cookie", cookie], ["Origin", own()], ["Content-Type", type]], form);
      expect(same.status).toBe(415);
    }
    expect(await sessionsCount()).toBe(before);
  });

  it("what the browser labels cross-site or same-site (another port of 127.0.0.1) is refused, even with the bearer", async () => {
    for (const site of ["cross-site", "same-site"]) {
      const r = await req("GET", "/api/sessions", [["Sec-Fetch-Site", site], bearer()]);
      expect(r.status).toBe(403);
      const page = await req("GET", "/", [["Sec-Fetch-Site", site]]);
      expect(page.status).toBe(403);
    }
    for (const site of ["same-origin", "none"]) expect((await req("GET", "/api/sessions", [["Sec-Fetch-Site", site], ["Cookie", cookie]])).status).toBe(200);
  });

  it("a program's state change with the bearer and no Origin works (the relaxation is not a bypass)", async () => {
    const r = await req("POST", "/api/sessions", [bearer(), json], JSON.stringify({ kind: "agent", model: script("idle", [{ text: "ok" }]) }));
    expect(r.status, r.body).toBe(201);
  });

  it("a foreign Origin is refused even on a read with the cookie", async () => {
    const r = await req("GET", "/api/sessions", [["Cookie", cookie], ["Origin", "http://attacker.example"]]);
    expect(r.status).toBe(403);
  });

  it("a foreign-origin WebSocket with the cookie gets no 101", async () => {
    for (const origin of ["http://attacker.example", `http://127.0.0.1:${srv.port + 1}`, "null"]) {
      const r = await upgrade("/api/ws", [["Cookie", cookie], ["Origin", origin]]);
      expect(r.status, origin).toBe(403);
    }
    const none = await upgrade("/api/ws", [["Cookie", cookie]]);
    expect(none.status).toBe(403);
    const ok = await upgrade("/api/ws", [["Cookie", cookie], ["Origin", own()]]);
    expect(ok.status).toBe(101);
  });

  it("no answer carries a CORS header, and a preflight gets none", async () => {
    const pre = await req("OPTIONS", "/api/sessions", [["Origin", "http://attacker.example"], ["Access-Control-Request-Method", "POST"], ["Access-Control-Request-Headers", "content-type"]]);
    expect(pre.status).toBe(405);
    const answers = [pre, await req("GET", "/"), await req("GET", "/api/sessions", [bearer(), ["Origin", own()]]), await req("GET", "/api/sessions", [["Origin", "http://attacker.example"]])];
    for (const a of answers) for (const [k] of a.rawHeaders) expect(k).not.toMatch(/^access-control-/);
  });

  it("every answer, refusals included, carries the security headers", async () => {
    for (const a of [await req("GET", "/"), await req("GET", "/api/sessions"), await req("GET", "/nope", [bearer()]), await req("GET", "/api/sessions", [["Host", "evil.example"]])]) {
      expect(a.headers["content-security-policy"]).toMatch(/frame-ancestors 'none'/);
      expect(a.headers["content-security-policy"]).toMatch(/script-src 'self'(;|$)/);
      expect(a.headers["x-content-type-options"]).toBe("nosniff");
      expect(a.headers["x-frame-options"]).toBe("DENY");
    }
  });

  it("the page has no inline script and loads nothing from another origin", async () => {
    const page = (await req("GET", "/")).body;
    for (const tag of page.match(/<script[^>]*>[\s\S]*?<\/script>/g) ?? []) expect(tag).toMatch(/^<script type="module" crossorigin src="\/assets\/[^"]+\.js"><\/script>$/);
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//);
  });
});

describe("approvals through the API", () => {
  const editScript = () => script(`edit-${Date.now()}-${Math.random()}`, [
    { text: "editing", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "hello", new_text: "HACKED" } }] },
    { text: "done" },
  ]);

  it("an answer with a stale generation is void (409), recorded, and the op still waits", async () => {
    const { id, card } = await sessionWaitingForApproval(editScript());
    const r = await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, generation: card.generation + 1, answer: "allow" }));
    expect(r.status).toBe(409);
    expect(r.body).toContain("generation");
    const still = JSON.parse((await req("GET", `/api/sessions/${id}/approvals`, [bearer()])).body) as { approvals: unknown[] };
    expect(still.approvals).toHaveLength(1);
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("hello\n");
    const older = await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, generation: 0, answer: "allow" }));
    expect(older.status).toBe(409);
    await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, answer: "deny" }));
  });

  it("an answer for another digest is void (409) and the file is unchanged", async () => {
    const { id, card } = await sessionWaitingForApproval(editScript());
    const other = card.digest.replace(/^./, (c) => (c === "0" ? "1" : "0"));
    const r = await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, digest: other, answer: "allow" }));
    expect(r.status).toBe(409);
    expect(r.body).toContain("digest");
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("hello\n");
    await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, answer: "deny" }));
  });

  it("a replayed answer and an answer sent to another session are void", async () => {
    const a = await sessionWaitingForApproval(editScript());
    const b = await sessionWaitingForApproval(editScript());
    const cross = await req("POST", `/api/sessions/${b.id}/approvals`, [bearer(), json], JSON.stringify({ ...a.card, answer: "allow" }));
    expect(cross.status).toBe(409);
    expect((await req("POST", `/api/sessions/${a.id}/approvals`, [bearer(), json], JSON.stringify({ ...a.card, answer: "deny" }))).status).toBe(200);
    const replay = await req("POST", `/api/sessions/${a.id}/approvals`, [bearer(), json], JSON.stringify({ ...a.card, answer: "allow" }));
    expect(replay.status).toBe(409);
    expect(replay.body).toContain("replay");
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("hello\n");
    await req("POST", `/api/sessions/${b.id}/approvals`, [bearer(), json], JSON.stringify({ ...b.card, answer: "deny" }));
  });

  it("an answer with an unknown field or a malformed nonce is refused by its schema", async () => {
    const { id, card } = await sessionWaitingForApproval(editScript());
    for (const body of [{ ...card, answer: "allow", scope: "everything" }, { ...card, nonce: "x", answer: "allow" }, { ...card, answer: "always" }, { ...card, generation: "1", answer: "allow" }]) {
      const r = await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify(body));
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, answer: "deny" }));
  });

  it("a session cannot be started outside the workspace vak serve runs in", async () => {
    for (const workspace of ["/", s.outside, "../outside", "/etc"]) {
      const r = await req("POST", "/api/sessions", [bearer(), json], JSON.stringify({ kind: "agent", workspace, model: script("w", [{ text: "x" }]) }));
      expect(r.status, workspace).toBe(400);
    }
  });

  it("oversized bodies are refused before they are parsed", async () => {
    const r = await req("POST", "/api/sessions", [bearer(), json], JSON.stringify({ kind: "agent", prompt: "x".repeat(300 * 1024) }));
    expect(r.status).toBe(413);
  });
});

describe("the web terminal", () => {
  const liveSession = async () => {
    const r = await req("POST", "/api/sessions", [bearer(), json], JSON.stringify({ kind: "agent", model: script(`t-${Date.now()}`, [{ text: "x" }]) }));
    return (JSON.parse(r.body) as { id: string }).id;
  };

  it("is refused to a peer that is not this machine's loopback, on a trusted host name and through a proxy, even when turned on", async () => {
    const id = await liveSession();
    const far = await upgrade(`/api/sessions/${id}/terminal`, [bearer()], { localAddress: "127.0.0.2" });
    expect(far.status).toBe(403);
    expect(far.body).toContain("loopback");
    const named = await upgrade(`/api/sessions/${id}/terminal`, [["Host", "vak.test"], bearer()]);
    expect(named.status).toBe(403);
    const proxied = await upgrade(`/api/sessions/${id}/terminal`, [bearer(), ["X-Forwarded-For", "203.0.113.9"]]);
    expect(proxied.status).toBe(403);
    const foreign = await upgrade(`/api/sessions/${id}/terminal`, [["Cookie", cookie], ["Origin", "http://attacker.example"]]);
    expect(foreign.status).toBe(403);
  });

  it("its shell runs inside the session's sandbox with the session's grants, and a mode switch stops it before the new mode is reported", async () => {
    writeFileSync(join(s.outside, "secret.txt"), "OUTSIDE-SECRET\n");
    const gitConfig = readFileSync(join(s.ws, ".git", "config"), "utf8");
    const id = await liveSession();
    const ws = new WebSocket(`ws://${host}/api/sessions/${id}/terminal`, { headers: { Cookie: cookie, Origin: own() } });
    let screen = "";
    ws.on("message", (d: Buffer) => (screen += d.toString()));
    const closed = new Promise<void>((res) => ws.on("close", () => res()));
    await new Promise<void>((res, rej) => {
      ws.once("open", () => res());
      ws.once("error", rej);
    });
    const type = (line: string) => ws.send(Buffer.from(`${line}\n`), { binary: true });
    const until = async (what: string, cond: () => boolean) => {
      for (let i = 0; i < 300 && !cond(); i++) await new Promise((r) => setTimeout(r, 30));
      if (!cond()) throw new Error(`no ${what} in: ${screen}`);
    };
    type("echo MARK-$((6*7)); hostname; [ -t 0 ] && echo IS-A-$((1))-TTY; cat " + join(s.outside, "secret.txt") + "; echo hi > made.txt; echo x > .git/config; echo END-$((1+1))");
    await until("end marker", () => screen.includes("END-2"));
    expect(screen).toContain("MARK-42");
    expect(screen).toMatch(/\bvak\r?\n/);
    expect(screen).toContain("IS-A-1-TTY");
    expect(screen).not.toContain("OUTSIDE-SECRET");
    expect(readFileSync(join(s.ws, "made.txt"), "utf8")).toBe("hi\n");
    expect(readFileSync(join(s.ws, ".git", "config"), "utf8")).toBe(gitConfig);
    const mode = await req("POST", `/api/sessions/${id}/mode`, [bearer(), json], JSON.stringify({ mode: "read-only" }));
    expect(mode.status).toBe(200);
    await closed;
    const ev = JSON.parse((await req("GET", `/api/sessions/${id}/events?limit=500`, [bearer()])).body) as { events: { kind: string; payload: Record<string, unknown> }[] };
    const exited = ev.events.findIndex((e) => e.kind === "worker.exited" && e.payload.op === "terminal");
    const spawned = ev.events.findIndex((e) => e.kind === "worker.spawned" && e.payload.op === "terminal");
    const reported = ev.events.findIndex((e) => e.kind === "policy.generation" && e.payload.generation === 2);
    expect(spawned).toBeGreaterThan(0);
    expect(exited).toBeGreaterThan(spawned);
    expect(reported).toBeGreaterThan(exited);
  });
});

describe("the session cookie: cookies ignore ports, so every loopback server gets ours", () => {
  it("two vak serve on two ports: neither takes the other's cookie, a cookie of the other's name cannot shadow ours, and a restart on the same port refuses the old one", async () => {
    const b = await serve({ workspace: s.ws });
    let oldB = "";
    const at = (x: { port: number }) => `127.0.0.1:${x.port}`;
    const get = (x: { port: number }, path: string, hs: [string, string][] = []) => rawRequest(head("GET", path, [["Host", at(x)], ...hs]), { port: x.port });
    try {
      const loginA = cookie;
      const loginB = (await get(b, `/?token=${b.token}`)).headers["set-cookie"]!.split(";")[0]!;
      oldB = loginB;
      const [nameA, nameB] = [loginA.split("=")[0]!, loginB.split("=")[0]!];
      // Bound to the instance: the port and an id another server cannot know before it sees one.
      expect(nameA).toMatch(new RegExp(`^vak_${srv.port}_[0-9a-f]{16}$`));
      expect(nameB).toMatch(new RegExp(`^vak_${b.port}_[0-9a-f]{16}$`));
      // A browser sends both cookies to both servers (same host, ports ignored): each takes its own only.
      const both = `${loginA}; ${loginB}`;
      expect((await get(srv, "/api/sessions", [["Cookie", both]])).status).toBe(200);
      expect((await get(b, "/api/sessions", [["Cookie", both]])).status).toBe(200);
      // B handed A's cookie (all it could have received from the browser) is not logged in, and says why.
      const onlyA = await get(b, "/api/sessions", [["Cookie", loginA]]);
      expect(onlyA.status).toBe(401);
      expect(onlyA.body).toContain("another `vak serve`");
      // A cookie planted under A's old-style name (port only) or under B's name with A's value does nothing at A.
      expect((await get(srv, "/api/sessions", [["Cookie", `vak_${srv.port}=${loginA.split("=")[1]}`]])).status).toBe(401);
      expect((await get(srv, "/api/sessions", [["Cookie", `${nameB}=${loginA.split("=")[1]}`]])).status).toBe(401);
      // Planted values under our own name beside the real one do not push it out (every value is tried, a few at most).
      expect((await get(srv, "/api/sessions", [["Cookie", `${nameA}=planted1; ${nameA}=planted2; ${loginA}`]])).status).toBe(200);
    } finally {
      await b.close();
    }
    // A new server on B's port is another instance: B's old cookie is refused there.
    const again = await serve({ workspace: s.ws, args: ["--port", String(b.port)] });
    try {
      const old = await get(again, "/api/sessions", [["Cookie", oldB]]);
      expect(old.status).toBe(401);
      expect(old.body).toContain("another `vak serve`");
    } finally {
      await again.close();
    }
  });
});

describe("the web terminal: a secret split across output chunks, escapes and lines", () => {
  it("a secret the shell prints one byte at a time (each its own pty write), or cut by an escape and line breaks, never reaches the browser whole, nor its base64; other output is not held", async () => {
    const value = `Tv9-${Math.random().toString(36).slice(2)}-term-secret`;
    // A profile's secret: the session's sandbox (and so the terminal's shell) holds it in TOK, and the host's redactor knows it.
    const x = await serve({ workspace: s.ws, config: '[server]\nterminal = true\n[profiles.tok]\nsecrets = ["TOK=env:VAK_TEST_TERM_SECRET"]\n', args: ["--profile", "tok"], env: { VAK_TEST_TERM_SECRET: value } });
    try {
      const h = `127.0.0.1:${x.port}`;
      const login = await rawRequest(head("GET", `/?token=${x.token}`, [["Host", h]]), { port: x.port });
      const c = login.headers["set-cookie"]!.split(";")[0]!;
      const body = JSON.stringify({ kind: "agent", model: script(`term-${Date.now()}`, [{ text: "x" }]) });
      const created = await rawRequest(head("POST", "/api/sessions", [["Host", h], ["Authorization", `Bearer ${x.token}`], json, ["Content-Length", String(Buffer.byteLength(body))]]), { port: x.port, body });
      expect(created.status, created.body).toBe(201);
      const id = (JSON.parse(created.body) as { id: string }).id;
      const ws = new WebSocket(`ws://${h}/api/sessions/${id}/terminal`, { headers: { Cookie: c, Origin: `http://${h}` } });
      const frames: string[] = [];
      ws.on("message", (d: Buffer) => frames.push(d.toString()));
      await new Promise<void>((res, rej) => {
        ws.once("open", () => res());
        ws.once("error", rej);
      });
      const screen = () => frames.join("");
      const until = async (what: string) => {
        for (let i = 0; i < 400 && !screen().includes(what); i++) await new Promise((r) => setTimeout(r, 30));
        if (!screen().includes(what)) throw new Error(`no ${what} in: ${screen()}`);
      };
      // Each character its own write, 20 ms apart: the pty hands them over as separate chunks.
      const slowly = (expr: string) => `s=${expr}; i=0; while [ $i -lt \${#s} ]; do printf %s "\${s:$i:1}"; sleep 0.02; i=$((i+1)); done; echo`;
      ws.send(Buffer.from(`${slowly('"$TOK"')}; ${slowly('"$(printf %s "$TOK" | base64 -w0)"')}; ${slowly('"\${TOK:0:6}zz"')}; printf '%s\\033[1m%s\\n%s\\033[0m\\n' "\${TOK:0:5}" "\${TOK:5:5}" "\${TOK:10}"; echo END-$((2+3))\n`), { binary: true });
      await until("END-5");
      ws.close();
      const all = screen();
      expect(all).not.toContain(value);
      expect(all).not.toContain(Buffer.from(value).toString("base64"));
      // Nor as the emulator prints it: split by an escape sequence and across two line breaks.
      expect(project(all).text.replace(/\r?\n/g, "")).not.toContain(value);
      expect(all.match(/\[REDACTED\]/g)?.length ?? 0).toBeGreaterThanOrEqual(3);
      // The start of the secret followed by something else is not a secret: it is shown once it is settled.
      expect(all).toContain(`${value.slice(0, 6)}zz`);
    } finally {
      await x.close();
    }
  });
});

describe("[server] is user-tier only", () => {
  it("a repository's .vak/config.toml that sets [server] changes nothing, and is said to be ignored", async () => {
    const r = scratch();
    mkdirSync(join(r.ws, ".vak"));
    writeFileSync(join(r.ws, ".vak", "config.toml"), '[server]\nhost = "0.0.0.0"\nport = 8080\ntrusted_hosts = ["attacker.example"]\nterminal = true\n');
    const x = await serve({ workspace: r.ws });
    try {
      expect(x.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect(x.port).not.toBe(8080);
      expect(x.stderr()).toContain("ignored");
      const named = await rawRequest(head("GET", "/api/sessions", [["Host", "attacker.example"], ["Authorization", `Bearer ${x.token}`]]), { port: x.port });
      expect(named.status).toBe(421);
      const body = JSON.stringify({ kind: "agent", model: script("r", [{ text: "x" }]) });
      const created = await rawRequest(head("POST", "/api/sessions", [["Host", `127.0.0.1:${x.port}`], ["Authorization", `Bearer ${x.token}`], json, ["Content-Length", String(Buffer.byteLength(body))]]), { port: x.port, body });
      const id = (JSON.parse(created.body) as { id: string }).id;
      const term = await rawRequest(head("GET", `/api/sessions/${id}/terminal`, [["Host", `127.0.0.1:${x.port}`], ["Authorization", `Bearer ${x.token}`], ["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Sec-WebSocket-Version", "13"], ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="]]), { port: x.port });
      expect(term.status).toBe(403);
      expect(term.body).toContain("terminal is off");
    } finally {
      await x.close();
      r.cleanup();
    }
  });

  it.each([
    ["a wildcard in trusted_hosts", '[server]\ntrusted_hosts = ["*.example.com"]\n', "wildcard"],
    ["a non-loopback host with no trusted_hosts", '[server]\nhost = "0.0.0.0"\ntls_terminated_by_proxy = true\n', "trusted_hosts is empty"],
    ["a non-loopback host without TLS or a proxy that terminates it", '[server]\nhost = "0.0.0.0"\ntrusted_hosts = ["vak.example.com"]\n', "tls_cert"],
    ["a host name instead of an address", '[server]\nhost = "localhost"\n', "IP address"],
    ["a URL in trusted_hosts", '[server]\ntrusted_hosts = ["https://vak.example.com"]\n', "URL"],
    ["an unknown key", '[server]\nallow_all = true\n', "allow_all"],
  ])("%s refuses to start", async (_what, config, says) => {
    const r = scratch();
    try {
      const x = await serveRefused({ workspace: r.ws, config });
      expect(x.code).toBe(125);
      expect(x.stdout).toBe("");
      expect(x.stderr).toContain(says);
    } finally {
      r.cleanup();
    }
  });
});

describe("exposed beyond loopback (in a network namespace of the test's own)", () => {
  // The server binds 0.0.0.0 in a fresh network namespace that has loopback and
  // one veth interface (10.77.0.1) and no route anywhere: a client there that
  // connects to 10.77.0.1 is a peer that is not this machine's loopback.
  const CLIENT = `
const [host, port, head, body] = process.argv.slice(1);
const s = require("node:net").connect({ host, port: Number(port) });
let buf = "";
s.on("data", (d) => {
  buf += d.toString("latin1");
  const end = buf.indexOf("\\r\\n\\r\\n");
  if (end < 0) return;
  const len = /\\r\\ncontent-length: (\\d+)/i.exec(buf.slice(0, end + 2));
  if (!len || buf.length >= end + 4 + Number(len[1])) s.destroy();
});
s.on("close", () => { const h = buf.slice(0, buf.indexOf("\\r\\n\\r\\n")).split("\\r\\n"); console.log(JSON.stringify({ status: Number(h[0].split(" ")[1]), headers: h.slice(1), body: buf.slice(buf.indexOf("\\r\\n\\r\\n") + 4) })); });
s.write(head + (body || ""));
`;
  let ns: string;
  let x: Served;
  const inNs = (host: string, h: string, body = ""): { status: number; headers: string[]; body: string } =>
    JSON.parse(execFileSync("ip", ["netns", "exec", ns, process.execPath, "-e", CLIENT, host, "8377", h, body], { encoding: "utf8", timeout: 10_000 })) as { status: number; headers: string[]; body: string };
  const ip = (...a: string[]) => execFileSync("ip", a, { stdio: ["ignore", "ignore", "pipe"] });
  const ws = [["Upgrade", "websocket"], ["Connection", "Upgrade"], ["Sec-WebSocket-Version", "13"], ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="]] as [string, string][];

  beforeAll(async () => {
    ns = `vaksrv${process.pid % 100000}`;
    ip("netns", "add", ns);
    ip("-n", ns, "link", "set", "lo", "up");
    // A veth pair with both ends inside: an interface with an address that is not loopback.
    ip("-n", ns, "link", "add", "va", "type", "veth", "peer", "name", "vb");
    ip("-n", ns, "addr", "add", "10.77.0.1/24", "dev", "va");
    ip("-n", ns, "link", "set", "va", "up");
    ip("-n", ns, "link", "set", "vb", "up");
    x = await serve({ workspace: s.ws, wrapper: ["ip", "netns", "exec", ns], config: '[server]\nhost = "0.0.0.0"\nport = 8377\ntrusted_hosts = ["vak.test:8377"]\ntls_terminated_by_proxy = true\nterminal = true\n' });
  });
  afterAll(async () => {
    await x?.close();
    try {
      ip("netns", "del", ns);
    } catch {
      // gone already
    }
  });

  it("prints the trusted name, not a login URL, and answers the trusted name from a remote peer with the bearer", () => {
    expect(x.url).toBe("https://vak.test:8377/");
    const r = inNs("10.77.0.1", head("GET", "/api/sessions", [["Host", "vak.test:8377"], ["Authorization", `Bearer ${x.token}`]]));
    expect(r.status).toBe(200);
  });

  it("refuses the interface's own address as a Host: only the exact trusted names", () => {
    expect(inNs("10.77.0.1", head("GET", "/api/sessions", [["Host", "10.77.0.1:8377"], ["Authorization", `Bearer ${x.token}`]])).status).toBe(421);
  });

  it("refuses the login URL from a remote peer, even one that claims a loopback Host", () => {
    for (const h of ["vak.test:8377", "127.0.0.1:8377"]) {
      const r = inNs("10.77.0.1", head("GET", `/?token=${x.token}`, [["Host", h]]));
      expect(r.status, h).toBe(403);
      expect(r.headers.some((l) => /^set-cookie/i.test(l))).toBe(false);
    }
    // From this machine's loopback, on a loopback name, it works (0.0.0.0 covers loopback).
    expect(inNs("127.0.0.1", head("GET", `/?token=${x.token}`, [["Host", "127.0.0.1:8377"]])).status).toBe(303);
  });

  it("refuses the terminal to a remote peer, even one that claims a loopback Host, and serves it on loopback", () => {
    const create = JSON.stringify({ kind: "agent", model: script("ns", [{ text: "x" }]) });
    const created = inNs("127.0.0.1", head("POST", "/api/sessions", [["Host", "127.0.0.1:8377"], ["Authorization", `Bearer ${x.token}`], json, ["Content-Length", String(Buffer.byteLength(create))]]), create);
    const sid = (JSON.parse(created.body) as { id: string }).id;
    for (const h of ["vak.test:8377", "127.0.0.1:8377"]) {
      const far = inNs("10.77.0.1", head("GET", `/api/sessions/${sid}/terminal`, [["Host", h], ["Authorization", `Bearer ${x.token}`], ...ws]));
      expect(far.status, h).toBe(403);
    }
    expect(inNs("127.0.0.1", head("GET", `/api/sessions/${sid}/terminal`, [["Host", "127.0.0.1:8377"], ["Authorization", `Bearer ${x.token}`], ...ws])).status).toBe(101);
  });

  it("logs a remote browser in through the form only with the trusted https Origin, with a __Host- Secure cookie", () => {
    const body = JSON.stringify({ token: x.token });
    const form = (origin: string) => inNs("10.77.0.1", head("POST", "/api/login", [["Host", "vak.test:8377"], ["Origin", origin], json, ["Content-Length", String(body.length)]]), body);
    expect(form("http://vak.test:8377").status).toBe(403);
    expect(form("https://attacker.example").status).toBe(403);
    const ok = form("https://vak.test:8377");
    expect(ok.status).toBe(204);
    const cookie = ok.headers.find((l) => /^set-cookie/i.test(l))!;
    expect(cookie).toMatch(/__Host-vak_8377_[0-9a-f]{16}=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Secure/);
  });
});

describe("over HTTPS (tls_cert and tls_key)", () => {
  it("speaks only TLS, and its session cookie is __Host- and Secure", async () => {
    const r = scratch();
    const cert = join(r.root, "cert.pem");
    const key = join(r.root, "key.pem");
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
    const x = await serve({ workspace: r.ws, config: `[server]\ntls_cert = "${cert}"\ntls_key = "${key}"\n` });
    try {
      expect(x.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/$/);
      const { request } = await import("node:https");
      const get = (path: string) => new Promise<{ status: number; cookie?: string }>((res, rej) => {
        const q = request({ host: "127.0.0.1", port: x.port, path, ca: readFileSync(cert) }, (a) => {
          a.resume();
          res({ status: a.statusCode ?? 0, cookie: a.headers["set-cookie"]?.[0] });
        });
        q.on("error", rej);
        q.end();
      });
      const login = await get(`/?token=${x.token}`);
      expect(login.status).toBe(303);
      expect(login.cookie).toMatch(new RegExp(`^__Host-vak_${x.port}_[0-9a-f]{16}=[^;]+; Path=/; HttpOnly; SameSite=Strict; Secure$`));
      const plain = await rawRequest(head("GET", "/api/sessions", [["Host", `127.0.0.1:${x.port}`], ["Authorization", `Bearer ${x.token}`]]), { port: x.port, timeoutMs: 3000 }).catch((e: Error) => e);
      expect(plain instanceof Error || plain.status !== 200).toBe(true);
    } finally {
      await x.close();
      r.cleanup();
    }
  });
});

describe("the flags vak serve was given are the ceiling", () => {
  it("a server started with --mode read-only starts no writable session, and no mode switch makes one writable", async () => {
    const r = scratch();
    writeFileSync(join(r.ws, "f.txt"), "same\n");
    const x = await serve({ workspace: r.ws, args: ["--mode", "read-only"] });
    const call = (method: string, path: string, body?: unknown) => {
      const b = body === undefined ? undefined : JSON.stringify(body);
      return rawRequest(head(method, path, [["Host", `127.0.0.1:${x.port}`], ["Authorization", `Bearer ${x.token}`], ...(b ? ([json, ["Content-Length", String(Buffer.byteLength(b))]] as [string, string][]) : [])]), { port: x.port, body: b });
    };
    try {
      const model = script(`ro-${Date.now()}`, [{ text: "writing", tool_calls: [{ name: "write_file", args: { path: "f.txt", content: "changed" } }] }, { text: "done" }]);
      expect((await call("POST", "/api/sessions", { kind: "agent", mode: "workspace-write", model })).status).toBe(400);
      const ok = await call("POST", "/api/sessions", { kind: "agent", mode: "read-only", model });
      expect(ok.status).toBe(201);
      const id = (JSON.parse(ok.body) as { id: string }).id;
      const sw = await call("POST", `/api/sessions/${id}/mode`, { mode: "workspace-write" });
      expect(sw.status).toBe(403);
      expect(sw.body).toContain("--mode read-only");
      expect((await call("POST", `/api/sessions/${id}/messages`, { text: "write it" })).status).toBe(202);
      await new Promise((res) => setTimeout(res, 1500));
      expect(readFileSync(join(r.ws, "f.txt"), "utf8")).toBe("same\n");
    } finally {
      await x.close();
      r.cleanup();
    }
  });
});

describe("the live feed", () => {
  it("a WebSocket of ours sees sessions' events; what a client sends is ignored", async () => {
    const ws = new WebSocket(`ws://${host}/api/ws`, { headers: { Cookie: cookie, Origin: own() } });
    const got: string[] = [];
    ws.on("message", (d: Buffer) => got.push(d.toString()));
    await new Promise<void>((res, rej) => {
      ws.once("open", () => res());
      ws.once("error", rej);
    });
    ws.send(JSON.stringify({ type: "answer", nonce: "0".repeat(32) }));
    await req("POST", "/api/sessions", [bearer(), json], JSON.stringify({ kind: "agent", model: script("feed", [{ text: "hello from the feed" }]), prompt: "hi" }));
    for (let i = 0; i < 100 && !got.some((g) => g.includes("hello from the feed")); i++) await new Promise((r) => setTimeout(r, 50));
    ws.close();
    expect(got.some((g) => g.includes("hello from the feed"))).toBe(true);
  });
});

describe("a hostile page in the same browser", () => {
  // A page served by another server on this machine (same site: another port of
  // 127.0.0.1) and one on another site (attacker.test, which the browser is told
  // resolves to 127.0.0.1) try to drive the API of a browser that is logged in.
  const ATTACK = (target: string, session: string, card: { nonce: string; digest: string; generation: number }) => `<!doctype html><html><body>
<form id="f" method="POST" action="${target}api/sessions" enctype="text/plain" target="sink"><input name='{"kind":"agent","prompt":"pwn","x":"' value='"}'></form>
<iframe name="sink"></iframe><iframe id="frame" src="${target}"></iframe>
<script>
const results = {};
const done = (k, v) => { results[k] = v; document.title = Object.keys(results).length; };
const answer = JSON.stringify({ nonce: "${card.nonce}", digest: "${card.digest}", generation: ${card.generation}, answer: "allow" });
fetch("${target}api/sessions", { method: "POST", credentials: "include", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: '{"kind":"agent","prompt":"pwn"}' })
  .then((r) => done("create", "sent:" + r.type), (e) => done("create", "error:" + e.message));
fetch("${target}api/sessions/${session}/approvals", { method: "POST", credentials: "include", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: answer })
  .then((r) => done("approve", "sent:" + r.type), (e) => done("approve", "error:" + e.message));
fetch("${target}api/sessions/${session}/approvals", { method: "POST", credentials: "include", headers: { "Content-Type": "application/json" }, body: answer })
  .then((r) => done("approve-json", "read:" + r.status), (e) => done("approve-json", "error:" + e.message));
fetch("${target}api/sessions", { credentials: "include" }).then((r) => r.text()).then((t) => done("read", "read:" + t.slice(0, 50)), (e) => done("read", "error:" + e.message));
const ws = new WebSocket("${target.replace("http", "ws")}api/ws");
ws.onopen = () => done("ws", "open");
ws.onerror = () => done("ws", "error");
document.getElementById("f").submit();
done("form", "submitted");
</script></body></html>`;

  it("cannot drive the API by fetch, form post or WebSocket, nor frame it", async () => {
    const { createServer } = await import("node:http");
    const { launchChromium } = await import("../support/browser.js");
    const { id, card } = await sessionWaitingForApproval(script(`hostile-${Date.now()}`, [
      { text: "editing", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "hello", new_text: "PWNED" } }] },
      { text: "done" },
    ]));
    const before = await sessionsCount();
    const target = `http://127.0.0.1:${srv.port}/`;
    const evil = createServer((_q, r) => {
      r.writeHead(200, { "Content-Type": "text/html" });
      r.end(ATTACK(target, id, card));
    });
    await new Promise<void>((res) => evil.listen(0, "127.0.0.1", res));
    const evilPort = (evil.address() as { port: number }).port;
    const b = await launchChromium(["--host-resolver-rules=MAP attacker.test 127.0.0.1"]);
    const seen: string[] = [];
    try {
      const page = await b.context.newPage();
      // The token form (the login URL is rate-limited for this peer by the flood test above, as it should be).
      await page.goto(target);
      await page.fill("#token", srv.token);
      await page.click("text=Log in");
      await page.waitForSelector("text=New session");
      for (const origin of [`http://127.0.0.1:${evilPort}/`, `http://localhost:${evilPort}/`, `http://attacker.test:${evilPort}/`]) {
        const p = await b.context.newPage();
        p.on("console", (m) => seen.push(m.text()));
        await p.goto(origin);
        await p.waitForFunction("Number(document.title) >= 6", undefined, { timeout: 10_000 });
        const results = (await p.evaluate("results")) as Record<string, string>;
        // Requests may leave the browser (no-cors), but nothing they ask for happens and nothing comes back.
        expect(results.ws, origin).toBe("error");
        expect(results.read, origin).toMatch(/^error:/);
        expect(results["approve-json"], origin).toMatch(/^error:/);
        // The framed client never loads.
        const framed = p.frames().find((f) => f.url().startsWith(target));
        expect(framed === undefined || (await framed.evaluate<string>("document.body?.innerHTML ?? ''").catch(() => "")) === "", origin).toBe(true);
        await p.close();
      }
    } finally {
      await b.close();
      evil.close();
    }
    expect(await sessionsCount()).toBe(before);
    const pending = JSON.parse((await req("GET", `/api/sessions/${id}/approvals`, [bearer()])).body) as { approvals: { nonce: string }[] };
    expect(pending.approvals.map((a) => a.nonce)).toEqual([card.nonce]);
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("hello\n");
    await req("POST", `/api/sessions/${id}/approvals`, [bearer(), json], JSON.stringify({ ...card, answer: "deny" }));
  });
});
