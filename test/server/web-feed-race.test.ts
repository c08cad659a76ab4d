import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page, Route } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { scratch, type Scratch } from "../support/fs.js";
import { serve, type Served } from "../support/serve.js";

// The page loads a session's state (its transcript, its open approvals, its
// mode) over HTTP and follows it on the live feed, two sockets with no order
// between them. A live message the server sent after it answered a load can
// reach the page before that answer does; the page must not let the older
// answer overwrite it. Here the browser's own routing holds the server's
// answer until the later message has arrived, which is the order a loaded
// machine produced at random (web.test.ts waited 30 s for an approval card
// and for a refused result that had come and been overwritten).

let s: Scratch;
let srv: Served;
let browser: { context: BrowserContext; close(): Promise<void> };
let page: Page;
let n = 0;
const frames: string[] = [];

const script = (turns: unknown[]) => {
  const p = join(s.root, `script-${++n}.json`);
  writeFileSync(p, JSON.stringify({ turns }));
  return `scripted:${p}`;
};

const api = async (method: "GET" | "POST", path: string, body?: unknown) => {
  const r = await fetch(`${srv.url}api/${path}`, {
    method,
    headers: { Authorization: `Bearer ${srv.token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return (await r.json()) as Record<string, unknown>;
};

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 25));
  if (!ok()) throw new Error(`never saw ${what}`);
}

/** A session whose first run has ended (its next instruction edits a.txt and waits for approval), shown in the page. */
async function idleSession(): Promise<string> {
  const created = await api("POST", "sessions", {
    kind: "agent",
    model: script([{ text: "Ready." }, { text: "Editing a.txt.", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "hello", new_text: "goodbye" } }] }, { text: "Edited." }]),
    prompt: "wait",
  });
  const id = String(created.id);
  await until("the first run end", () => frames.some((f) => f.includes(`"session":"${id}"`) && f.includes('"state":"ended"')));
  return id;
}

/**
 * Holds the answer to the page's next request for `path` (taken from the
 * server before `trigger` runs) until a live frame matching `seen` reached
 * the page, then hands the page that older answer.
 */
async function holdAnswer(id: string, path: string, trigger: () => Promise<void>, seen: (f: string) => boolean): Promise<void> {
  const url = `${srv.url}api/sessions/${id}/${path}`;
  let done!: () => void;
  const fulfilled = new Promise<void>((r) => (done = r));
  const handler = async (route: Route) => {
    const answer = await route.fetch();
    const before = frames.length;
    await trigger();
    await until(`the live frame after ${path}`, () => frames.slice(before).some(seen));
    await route.fulfill({ response: answer });
    done();
  };
  await page.route(url, handler, { times: 1 });
  await page.goto(`${srv.url}#/s/${id}`);
  await fulfilled;
}

beforeAll(async () => {
  s = scratch();
  writeFileSync(join(s.ws, "a.txt"), "hello world\n");
  srv = await serve({ workspace: s.ws });
  browser = await launchChromium();
  page = await browser.context.newPage();
  page.on("websocket", (ws) => ws.on("framereceived", (f) => frames.push(String(f.payload))));
  await page.goto(`${srv.url}?token=${srv.token}`);
  await page.waitForSelector("text=New session");
});
afterAll(async () => {
  await browser?.close();
  await srv?.close();
  s?.cleanup();
});

describe("the page's load and the live feed, in either order", () => {
  it("an approval card sent while the page's load of the open approvals was on its way is still shown", async () => {
    const id = await idleSession();
    await page.goto(`${srv.url}#/`);
    await holdAnswer(id, "approvals", async () => void (await api("POST", `sessions/${id}/messages`, { text: "edit it" })),
      (f) => f.includes('"type":"approval"') && f.includes(`"session":"${id}"`));
    await page.locator(".approval").waitFor({ timeout: 10_000 });
    expect(await page.locator(".approval").textContent()).toContain("+goodbye world");
  });

  it("transcript items sent while the page's load of the transcript was on its way are still shown", async () => {
    const id = await idleSession();
    await page.goto(`${srv.url}#/`);
    await holdAnswer(id, "messages", async () => void (await api("POST", `sessions/${id}/messages`, { text: "edit it" })),
      (f) => f.includes('"type":"transcript"') && f.includes("Editing a.txt."));
    await page.locator(".item.model", { hasText: "Editing a.txt." }).waitFor({ timeout: 10_000 });
    await page.locator(".item.user", { hasText: "edit it" }).waitFor({ timeout: 10_000 });
  });

  it("an older answer never undoes a newer live message: a card closed while the load was on its way stays closed", async () => {
    const id = await idleSession();
    await api("POST", `sessions/${id}/messages`, { text: "edit it" });
    const isCard = (f: string) => f.includes('"type":"approval"') && f.includes(`"session":"${id}"`);
    await until("the card", () => frames.some(isCard));
    const { nonce, digest, generation } = (JSON.parse(frames.find(isCard)!) as { card: { nonce: string; digest: string; generation: number } }).card;
    await page.goto(`${srv.url}#/`);
    await holdAnswer(id, "approvals", async () => void (await api("POST", `sessions/${id}/approvals`, { nonce, digest, generation, answer: "deny" })),
      (f) => f.includes('"type":"approval-closed"') && f.includes(nonce));
    await page.locator(".item.result.refused").waitFor({ timeout: 10_000 });
    expect(await page.locator(".approval").count()).toBe(0);
  });
});
