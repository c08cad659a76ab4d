import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { launchChromium } from "../support/browser.js";
import { scratch, type Scratch } from "../support/fs.js";
import { head, rawRequest, type RawResponse } from "../support/raw-http.js";
import { serve, type Served } from "../support/serve.js";

// A red-team pass on `vak serve` from the two sides that serve.test.ts does
// not take: what a sandboxed shell sends back through the web terminal (a
// flood, a start racing a revocation), and what hostile output does once the
// browser renders it. Each test is one attack, against the real server, a
// real sandbox and, where it renders, Debian's chromium.

let s: Scratch;
let srv: Served;
let host: string;
let cookie: string;
let scripts: string;

const json: [string, string] = ["Content-Type", "application/json"];

const script = (name: string, turns: unknown[]) => {
  const p = join(scripts, `${name}-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(p, JSON.stringify({ turns }));
  return `scripted:${p}`;
};

function req(x: Served, method: string, path: string, body?: unknown): Promise<RawResponse> {
  const b = body === undefined ? undefined : JSON.stringify(body);
  const hs: [string, string][] = [["Host", `127.0.0.1:${x.port}`], ["Authorization", `Bearer ${x.token}`]];
  if (b !== undefined) hs.push(json, ["Content-Length", String(Buffer.byteLength(b))]);
  return rawRequest(head(method, path, hs), { port: x.port, body: b, timeoutMs: 30_000 });
}

async function newSession(x: Served, turns: unknown[] = [{ text: "x" }], extra: Record<string, unknown> = {}): Promise<string> {
  const r = await req(x, "POST", "/api/sessions", { kind: "agent", model: script("s", turns), ...extra });
  expect(r.status, r.body).toBe(201);
  return (JSON.parse(r.body) as { id: string }).id;
}

/** The session's first approval card, once it is there (waited for up to 15 s). */
async function firstCard(x: Served, id: string): Promise<{ nonce: string; digest: string; generation: number }> {
  for (let t = 0; t < 300; t++) {
    const card = (JSON.parse((await req(x, "GET", `/api/sessions/${id}/approvals`)).body) as { approvals: { nonce: string; digest: string; generation: number }[] }).approvals[0];
    if (card) return card;
    await sleep(50);
  }
  throw new Error(`no approval card in session ${id}`);
}

/** A terminal WebSocket of ours (cookie and Origin), open. */
async function terminal(x: Served, c: string, id: string): Promise<WebSocket> {
  const h = `127.0.0.1:${x.port}`;
  const ws = new WebSocket(`ws://${h}/api/sessions/${id}/terminal`, { headers: { Cookie: c, Origin: `http://${h}` } });
  await new Promise<void>((res, rej) => {
    ws.once("open", () => res());
    ws.once("error", rej);
  });
  return ws;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resident memory of a process, in bytes. */
const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;

beforeAll(async () => {
  s = scratch({ git: true });
  scripts = join(s.root, "scripts");
  mkdirSync(scripts);
  writeFileSync(join(s.ws, "a.txt"), "hello\n");
  srv = await serve({ workspace: s.ws, config: "[server]\nterminal = true\n" });
  host = `127.0.0.1:${srv.port}`;
  const login = await rawRequest(head("GET", `/?token=${srv.token}`, [["Host", host]]), { port: srv.port });
  cookie = login.headers["set-cookie"]!.split(";")[0]!;
});
afterAll(async () => {
  await srv?.close();
  s?.cleanup();
});

describe("the web terminal, from the sandboxed shell's side", () => {
  it("a shell that floods output at a browser that stops reading is held back: the server takes no more than a bounded amount", async () => {
    const id = await newSession(srv);
    const ws = await terminal(srv, cookie, id);
    const before = rss(srv.proc.pid!);
    // The browser stops reading: nothing more leaves the server's socket once the kernel's buffers fill.
    (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    // As fast as the shell can: dd says each second how much it has written (to a file in the workspace, which the host reads).
    ws.send(Buffer.from("yes \"$(printf '%01023d' 0)\" | dd bs=64k iflag=fullblock status=progress 2>flood.progress\n"), { binary: true });
    const written = () => Math.max(0, ...[...readFileSync(join(s.ws, "flood.progress"), "utf8").matchAll(/(\d+) bytes/g)].map((m) => Number(m[1])));
    let peak = before;
    const watch = async (ms: number) => {
      for (let t = 0; t < ms; t += 250) {
        await sleep(250);
        peak = Math.max(peak, rss(srv.proc.pid!));
      }
    };
    // Once the sockets' buffers and the server's bound are full, the shell must wait: what it has written stops growing.
    await watch(8000);
    const settled = written();
    await watch(8000);
    const later = written();
    expect(settled).toBeGreaterThan(0);
    expect(later - settled).toBeLessThan(1024 * 1024);
    expect(peak - before).toBeLessThan(64 * 1024 * 1024);
    // The browser reads again: the shell goes on, and answers what is typed next.
    let tail = "";
    ws.on("message", (d: Buffer) => (tail = (tail + d.toString()).slice(-4096)));
    (ws as unknown as { _socket: { resume(): void } })._socket.resume();
    ws.send(Buffer.from("\x03"), { binary: true });
    await sleep(500);
    ws.send(Buffer.from("echo BACK-$((4+4))\n"), { binary: true });
    for (let i = 0; i < 200 && !tail.includes("BACK-8"); i++) await sleep(50);
    ws.terminate();
    expect(tail).toContain("BACK-8");
  }, 60_000);
});

describe("the web terminal racing a revocation", () => {
  it("a terminal opened as the mode switches to read-only never gets a shell that can write: the switch waits for it or it is refused", async () => {
    // A network grant gives each terminal an egress link, which the session's gate is started for: a start with awaits in it.
    const x = await serve({ workspace: s.ws, config: '[server]\nterminal = true\n[profiles.tok]\nsecrets = ["TOK=env:VAK_TEST_RACE_SECRET"]\n', args: ["--allow-net", "read:example.invalid", "--profile", "tok"], env: { VAK_TEST_RACE_SECRET: "race-secret-value-0123456789" } });
    try {
      const h = `127.0.0.1:${x.port}`;
      const c = (await rawRequest(head("GET", `/?token=${x.token}`, [["Host", h]]), { port: x.port })).headers["set-cookie"]!.split(";")[0]!;
      const wrote: string[] = [];
      for (let i = 0; i < 10; i++) {
        const id = await newSession(x);
        // The upgrade and the switch leave together; the switch is answered once the session reports read-only.
        const ws = new WebSocket(`ws://${h}/api/sessions/${id}/terminal`, { headers: { Cookie: c, Origin: `http://${h}` } });
        let screen = "";
        let closed = false;
        ws.on("message", (d: Buffer) => (screen += d.toString()));
        ws.on("close", () => (closed = true));
        ws.on("error", () => (closed = true));
        ws.on("unexpected-response", () => (closed = true));
        // The switch a few ms later each time, so that it lands at different points of the terminal's start.
        await sleep(i * 3);
        const opened = new Promise<void>((res) => ws.once("open", () => res()));
        const mode = await req(x, "POST", `/api/sessions/${id}/mode`, { mode: "read-only" });
        expect(mode.status, mode.body).toBe(200);
        expect((JSON.parse(mode.body) as { state: { mode: string } }).state.mode).toBe("read-only");
        await Promise.race([opened, sleep(2000)]);
        const file = `race-${i}.txt`;
        if (!closed && ws.readyState === ws.OPEN) ws.send(Buffer.from(`echo w > ${file}; echo END-$((${i}+100))\n`), { binary: true });
        for (let t = 0; t < 100 && !closed && !screen.includes(`END-${i + 100}`); t++) await sleep(50);
        ws.terminate();
        if (existsSync(join(s.ws, file))) wrote.push(file);
      }
      expect(wrote).toEqual([]);
    } finally {
      await x.close();
    }
  }, 120_000);
});

describe("an approved command racing a revocation", () => {
  it("a command whose sandbox was still being set up when the mode switched is stopped, not run to its end", async () => {
    // A grant that needs TLS at the gate: the session's first command waits for its CA before it starts.
    const x = await serve({ workspace: s.ws, args: ["--allow-net", "read:example.invalid"] });
    try {
      const late: string[] = [];
      for (let i = 0; i < 4; i++) {
        const file = `late-${i}.txt`;
        const id = await newSession(x, [{ text: "running", tool_calls: [{ name: "exec", args: { command: `sleep 15; echo late > ${file}` } }] }, { text: "done" }], { prompt: "go" });
        const card = await firstCard(x, id);
        const allowed = req(x, "POST", `/api/sessions/${id}/approvals`, { nonce: card.nonce, digest: card.digest, generation: card.generation, answer: "allow" });
        await sleep(i * 5);
        const t0 = Date.now();
        const mode = await req(x, "POST", `/api/sessions/${id}/mode`, { mode: "read-only" });
        const took = Date.now() - t0;
        expect((await allowed).status).toBe(200);
        expect(mode.status, mode.body).toBe(200);
        // The switch is answered once the old generation has stopped: that must not mean once the command has finished.
        expect(took, `switch ${i}`).toBeLessThan(10_000);
        await sleep(200);
        if (existsSync(join(s.ws, file))) late.push(file); // else stopped before it wrote
      }
      expect(late).toEqual([]);
    } finally {
      await x.close();
    }
  }, 180_000);
});

describe("hostile output rendered by the browser", () => {
  // Markup that runs script if it is ever parsed as HTML, an attribute breakout, a javascript: URL, CSS, SVG.
  const XSS = (n: string) => `<img src=x id=pwn-${n} onerror="window.__pwned='${n}'"><svg id=svg-${n} onload="window.__pwned='${n}'"></svg>"'><script>window.__pwned='${n}'</script><a id=a-${n} href="javascript:window.__pwned='${n}'">x</a><style>body{display:none}</style>`;

  it("model text, tool names, arguments, results, paths, a diff, a title and journal fields are text in every view: no element, script, style or link of theirs", async () => {
    writeFileSync(join(s.ws, "victim.txt"), `keep ${XSS("old")}\n`);
    const turns = [
      { text: `model says ${XSS("text")}`, tool_calls: [
        { name: "t<img src=x id=pwn-name onerror=window.__pwned=1>", args: { x: XSS("args") } },
        { name: "read_file", args: { path: `missing${XSS("path")}.txt` } },
        { name: "edit_file", args: { path: "victim.txt", old_text: "keep", new_text: `changed ${XSS("diff")}` } },
      ] },
      { text: `done ${XSS("end")}` },
    ];
    const r = await req(srv, "POST", "/api/sessions", { kind: "agent", model: script("xss", turns), prompt: `title ${XSS("title")}` });
    expect(r.status, r.body).toBe(201);
    const id = (JSON.parse(r.body) as { id: string }).id;
    const b = await launchChromium();
    try {
      const page = await b.context.newPage();
      const violations: string[] = [];
      const dialogs: string[] = [];
      page.on("dialog", (d) => (dialogs.push(d.message()), void d.dismiss()));
      page.on("console", (m) => /Content Security Policy/i.test(m.text()) && violations.push(m.text()));
      await page.goto(`http://${host}/?token=${srv.token}`);
      await page.waitForSelector("text=New session");
      await page.goto(`http://${host}/#/s/${id}`);
      const card = page.locator(".approval");
      await card.waitFor();
      await expect.poll(() => card.textContent()).toContain("changed <img src=x id=pwn-diff");
      await expect.poll(() => page.locator(".transcript").textContent()).toContain("model says <img src=x id=pwn-text");
      const check = async (where: string) => {
        // A string: the test's own types have no DOM.
        const found = await page.evaluate(`({
          pwned: window.__pwned ?? null,
          elements: [...document.querySelectorAll("[id^=pwn-], [id^=svg-], [id^=a-], svg, img, iframe, object, embed, body style, script:not([src])")].map((e) => e.outerHTML.slice(0, 80)),
          jsLinks: [...document.querySelectorAll("a[href]")].map((a) => a.getAttribute("href")).filter((h) => !/^(#|\\/terminal\\.html#)/.test(h)),
          hidden: getComputedStyle(document.body).display === "none",
        })`);
        expect(found, where).toEqual({ pwned: null, elements: [], jsLinks: [], hidden: false });
      };
      await check("the conversation and the card");
      await page.goto(`http://${host}/#/s/${id}/calls`);
      await page.locator(".calls tbody tr").first().waitFor();
      // Every event's detail open: the payloads too.
      for (const d of await page.locator(".calls details").all()) await d.evaluate("(e) => e.setAttribute('open', '')");
      await expect.poll(() => page.locator(".calls").textContent()).toContain("id=pwn-name");
      await check("every call");
      await page.goto(`http://${host}/#/s/${id}/reach`);
      await page.locator(".reach").waitFor();
      await check("what it can reach");
      await page.goto(`http://${host}/#/`);
      await expect.poll(() => page.locator(".sessions").textContent()).toContain("title <img src=x id=pwn-title");
      await check("the session list");
      expect(dialogs).toEqual([]);
      expect(violations).toEqual([]);
    } finally {
      await b.close();
      const cards = JSON.parse((await req(srv, "GET", `/api/sessions/${id}/approvals`)).body) as { approvals: { nonce: string; digest: string; generation: number }[] };
      for (const c of cards.approvals) await req(srv, "POST", `/api/sessions/${id}/approvals`, { nonce: c.nonce, digest: c.digest, generation: c.generation, answer: "deny" });
    }
    expect(readFileSync(join(s.ws, "victim.txt"), "utf8")).toBe(`keep ${XSS("old")}\n`);
  }, 90_000);
});

describe("a sandboxed command that can reach the server's port", () => {
  it("with a grant for loopback, the shell in the sandbox reaches vak serve but cannot read, answer its own approval, or log in", async () => {
    const x = await serve({ workspace: s.ws, config: "[server]\nterminal = true\n", args: ["--allow-net", "127.0.0.1:*"] });
    try {
      const h = `127.0.0.1:${x.port}`;
      const c = (await rawRequest(head("GET", `/?token=${x.token}`, [["Host", h]]), { port: x.port })).headers["set-cookie"]!.split(";")[0]!;
      // The session's agent waits for an answer to its own write; its shell knows the card's bindings (the worst case).
      const id = await newSession(x, [{ text: "writing", tool_calls: [{ name: "write_file", args: { path: "self.txt", content: "self-approved" } }] }, { text: "done" }], { prompt: "go" });
      const card = await firstCard(x, id);
      const answer = JSON.stringify({ nonce: card.nonce, digest: card.digest, generation: card.generation, answer: "allow" });
      const ws = await terminal(x, c, id);
      let screen = "";
      ws.on("message", (d: Buffer) => (screen += d.toString()));
      // Through the session's proxy (HTTP_PROXY), as any client in the sandbox would; each status on a line of its own.
      const curl = (tag: string, args: string) => `echo ${tag}=$(curl -s -o /dev/null -w '%{http_code}' ${args})`;
      const url = `http://${h}`;
      const cmds = [
        curl("REACH", `${url}/`),
        curl("LIST", `${url}/api/sessions`),
        curl("ANSWER", `-H 'Content-Type: application/json' -H 'Origin: ${url}' --data '${answer}' ${url}/api/sessions/${id}/approvals`),
        curl("LOGIN", `'${url}/?token=guess'`),
        curl("TERM", `-H 'Upgrade: websocket' -H 'Connection: Upgrade' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' -H 'Origin: ${url}' ${url}/api/sessions/${id}/terminal`),
        "echo END-$((7*6))",
      ];
      ws.send(Buffer.from(`${cmds.join("; ")}\n`), { binary: true });
      for (let t = 0; t < 300 && !screen.includes("END-42"); t++) await sleep(50);
      ws.terminate();
      const got = (tag: string) => new RegExp(`${tag}=(\\d{3})`).exec(screen)?.[1];
      // It does reach the server (the grant is honoured)...
      expect(got("REACH"), screen).toBe("200");
      // ...and gets nothing that needs the token: no list, no answer, no login, no terminal of its own.
      expect(got("LIST")).toBe("401");
      expect(got("ANSWER")).toBe("401");
      // The login URL takes a token only from the user's own loopback address: the gate's connections come from
      // 127.0.0.2 (src/net/loopback-source.ts), so the sandbox may not even try one.
      expect(got("LOGIN")).toBe("403");
      expect(got("TERM")).toBe("401");
      const still = JSON.parse((await req(x, "GET", `/api/sessions/${id}/approvals`)).body) as { approvals: { nonce: string }[] };
      expect(still.approvals.map((a) => a.nonce)).toEqual([card.nonce]);
      expect(() => readFileSync(join(s.ws, "self.txt"))).toThrow();
      await req(x, "POST", `/api/sessions/${id}/approvals`, { ...card, answer: "deny" });
    } finally {
      await x.close();
    }
  }, 90_000);
});

describe("a sandboxed command that can reach the server's port: the rate limiter", () => {
  // The failure limiter is keyed by (credential kind, peer). A sandboxed command granted loopback (127.0.0.1:*,
  // for a dev server) sends ten wrong tokens of each kind and more: were it seen from 127.0.0.1, the user's own
  // peer address, the user's bearer, login URL and login form would answer 429. The gate connects to loopback
  // from an address of the sandbox's own (src/net/loopback-source.ts), so only the sandbox's tries are limited.
  it("wrong tokens sent from the sandbox do not lock the user out of the bearer and the login URL", async () => {
    const x = await serve({ workspace: s.ws, config: "[server]\nterminal = true\n", args: ["--allow-net", "127.0.0.1:*"] });
    try {
      const h = `127.0.0.1:${x.port}`;
      const c = (await rawRequest(head("GET", `/?token=${x.token}`, [["Host", h]]), { port: x.port })).headers["set-cookie"]!.split(";")[0]!;
      const id = await newSession(x);
      const ws = await terminal(x, c, id);
      let screen = "";
      ws.on("message", (d: Buffer) => (screen += d.toString()));
      const url = `http://${h}`;
      ws.send(Buffer.from(`for i in $(seq 12); do curl -s -o /dev/null -H "Authorization: Bearer wrong-$i" ${url}/api/sessions; curl -s -o /dev/null "${url}/?token=wrong-$i"; done; echo END-$((5*5))\n`), { binary: true });
      for (let t = 0; t < 400 && !screen.includes("END-25"); t++) await sleep(50);
      ws.terminate();
      expect(screen).toContain("END-25");
      expect((await req(x, "GET", "/api/sessions")).status).toBe(200);
      expect((await rawRequest(head("GET", `/?token=${x.token}`, [["Host", h]]), { port: x.port })).status).toBe(303);
    } finally {
      await x.close();
    }
  }, 90_000);
});

describe("the web terminal's escapes in the browser", () => {
  it("a shell's OSC 52, title, OSC 8 links (javascript: and http) and window reports change nothing outside the page's terminal", async () => {
    const id = await newSession(srv);
    const b = await launchChromium();
    // Our pages may not read the clipboard (Permissions-Policy): a blank page of another local server reads it for the test.
    const { createServer } = await import("node:http");
    const blank = createServer((_q, r) => r.end("<!doctype html><title>blank</title>"));
    await new Promise<void>((r) => blank.listen(0, "127.0.0.1", r));
    const reader = `http://127.0.0.1:${(blank.address() as { port: number }).port}`;
    const clipboard = async () => {
      const p = await b.context.newPage();
      await p.goto(reader);
      const text = await p.evaluate<string>("navigator.clipboard.readText()");
      await p.close();
      return text;
    };
    try {
      const origin = `http://${host}`;
      await b.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
      await b.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: reader });
      const page = await b.context.newPage();
      const popups: string[] = [];
      b.context.on("page", (p) => p.url() !== "about:blank" && popups.push(p.url()));
      page.on("dialog", (d) => (popups.push(`dialog: ${d.message()}`), void d.dismiss()));
      await page.goto(`${origin}/?token=${srv.token}`);
      await page.waitForSelector("text=New session");
      await page.evaluate("navigator.clipboard.writeText('CLIPBOARD-BEFORE')");
      await page.goto(`${origin}/terminal.html#${id}`);
      await page.waitForSelector("text=sandbox");
      await page.locator(".xterm").click();
      // Each sequence printed by the shell; the links on lines of their own, to click.
      const seqs = [
        "printf '\\033]52;c;%s\\a' $(printf PWNED-CLIP | base64)",
        "printf '\\033]0;PWNED-TITLE\\a\\033]2;PWNED-TITLE\\a'",
        "printf '\\033[21t\\033[20t\\033[14t'",
        "printf '\\n\\033]8;;javascript:window.__pwned=1\\033\\\\JSLINK\\033]8;;\\033\\\\\\n'",
        `printf '\\033]8;;http://127.0.0.1:1/pwned\\033\\\\HTTPLINK\\033]8;;\\033\\\\\\n'`,
        "echo END-$((9*9))",
      ];
      await page.keyboard.type(`${seqs.join("; ")}\n`);
      await page.waitForSelector(".xterm-rows >> text=END-81");
      for (const text of ["JSLINK", "HTTPLINK"]) {
        // The row the link was printed on (its text alone), clicked where the link's cells are.
        const row = page.locator(".xterm-rows > div", { hasText: new RegExp(`^${text}\\s*$`) }).first();
        const box = (await row.boundingBox())!;
        await page.mouse.move(box.x + 12, box.y + box.height / 2);
        await sleep(200);
        await page.mouse.click(box.x + 12, box.y + box.height / 2);
      }
      await sleep(500);
      expect(await page.title()).toBe("vak terminal");
      expect(await page.evaluate("window.__pwned ?? null")).toBeNull();
      expect(await clipboard()).toBe("CLIPBOARD-BEFORE");
      expect(popups).toEqual([]);
      expect(page.url()).toBe(`${origin}/terminal.html#${id}`);
    } finally {
      await b.close();
      blank.close();
    }
  }, 90_000);
});

describe("approvals answered twice at once", () => {
  it("two answers to one card sent together: exactly one counts, and the other is void", async () => {
    const id = await newSession(srv, [{ text: "editing", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "hello", new_text: "TWICE" } }] }, { text: "done" }], { prompt: "go" });
    const card = await firstCard(srv, id);
    const b = { nonce: card.nonce, digest: card.digest, generation: card.generation };
    const answers = await Promise.all([req(srv, "POST", `/api/sessions/${id}/approvals`, { ...b, answer: "deny" }), req(srv, "POST", `/api/sessions/${id}/approvals`, { ...b, answer: "allow" }), req(srv, "POST", `/api/sessions/${id}/approvals`, { ...b, answer: "allow-session" })]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409]);
    await sleep(1000);
    // The first answer is the one that happened (deny was sent first on its own connection, but any order is fine): the file says which.
    const counted = answers.findIndex((a) => a.status === 200);
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe(counted === 0 ? "hello\n" : "TWICE\n");
    writeFileSync(join(s.ws, "a.txt"), "hello\n");
  }, 60_000);
});
