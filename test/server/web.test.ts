import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { scratch, type Scratch } from "../support/fs.js";
import { serve, type Served } from "../support/serve.js";

// The web client in a real browser (Debian's chromium, driven by
// playwright-core) against a real `vak serve` with a scripted model: log in
// through the printed URL, start a session, approve an edit and see the file
// change, deny one, switch the mode mid-run and see the run cancelled.

let s: Scratch;
let srv: Served;
let browser: { context: BrowserContext; close(): Promise<void> };
let page: Page;
let n = 0;

const script = (turns: unknown[]) => {
  const p = join(s.root, `script-${++n}.json`);
  writeFileSync(p, JSON.stringify({ turns }));
  return `scripted:${p}`;
};

async function startSession(model: string, prompt: string): Promise<string> {
  await page.goto(`${srv.url}#/`);
  await page.fill("#new-model", model);
  await page.fill("#new-prompt", prompt);
  await page.click("text=Start session");
  await page.waitForURL(/#\/s\//);
  return /#\/s\/(.+)$/.exec(page.url())![1]!;
}

const events = async (id: string) => {
  const r = await fetch(`${srv.url}api/sessions/${id}/events?limit=500`, { headers: { Authorization: `Bearer ${srv.token}` } });
  return ((await r.json()) as { events: { kind: string; time: string; payload: Record<string, unknown> }[] }).events;
};

beforeAll(async () => {
  s = scratch();
  writeFileSync(join(s.ws, "a.txt"), "hello world\n");
  writeFileSync(join(s.ws, "b.txt"), "keep me\n");
  srv = await serve({ workspace: s.ws });
  browser = await launchChromium();
  page = await browser.context.newPage();
});
afterAll(async () => {
  await browser?.close();
  await srv?.close();
  s?.cleanup();
});

describe("the web client", () => {
  it("logs in through the printed URL: the token leaves the address bar, the cookie is out of script's reach", async () => {
    await page.goto(`${srv.url}?token=${srv.token}`);
    expect(page.url()).toBe(srv.url);
    await page.waitForSelector("text=New session");
    expect(await page.evaluate("document.cookie")).toBe("");
    const cookies = await browser.context.cookies(srv.url);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({ httpOnly: true, sameSite: "Strict" });
  });

  it("the printed login URL is the instance's own *.localhost name: another server on this machine's loopback never gets the cookie", async () => {
    // Another program's server on 127.0.0.1, at another port: cookies ignore ports, so it would get a 127.0.0.1 cookie.
    const seen: string[] = [];
    const other = createServer((req, res) => {
      // The page itself, not the browser's favicon fetch.
      if (req.url === "/") seen.push(req.headers.cookie ?? "");
      res.end("other");
    });
    await new Promise<void>((r) => other.listen({ port: 0, host: "127.0.0.1" }, r));
    const otherPort = (other.address() as AddressInfo).port;
    const b = await launchChromium();
    try {
      const p = await b.context.newPage();
      expect(srv.loginUrl).toMatch(/^http:\/\/vak-[0-9a-f]{16}\.localhost:\d+\/\?token=/);
      await p.goto(srv.loginUrl!);
      const home = srv.loginUrl!.replace(/\?token=.*$/, "");
      expect(p.url()).toBe(home);
      await p.waitForSelector("text=New session");
      expect(await b.context.cookies(home)).toHaveLength(1);
      for (const u of [`http://127.0.0.1:${otherPort}/`, `http://localhost:${otherPort}/`]) await p.goto(u);
      expect(seen).toHaveLength(2);
      for (const c of seen) expect(c).not.toContain("vak_");
      // The control: logged in on 127.0.0.1 instead, the same browser does hand the cookie to the other server.
      await p.goto(`${srv.url}?token=${srv.token}`);
      await p.goto(`http://127.0.0.1:${otherPort}/`);
      expect(seen[2]).toContain("vak_");
    } finally {
      await b.close();
      await new Promise<void>((r) => other.close(() => r()));
    }
  });

  it("without the cookie it shows how to log in, and the token form works", async () => {
    const other = await launchChromium();
    const p = await other.context.newPage();
    await p.goto(srv.url);
    await p.waitForSelector("text=not logged in");
    await p.fill("#token", srv.token);
    await p.click("text=Log in");
    await p.waitForSelector("text=New session");
    await other.close();
  });

  it("approves an edit from the browser and the file changes", async () => {
    const id = await startSession(script([
      { text: "Editing a.txt.", tool_calls: [{ name: "edit_file", args: { path: "a.txt", old_text: "hello", new_text: "goodbye" } }] },
      { text: "Edited." },
    ]), "change hello to goodbye");
    const card = page.locator(".approval");
    await card.waitFor();
    // The whole op: the path and both sides of the change.
    await expect.poll(() => card.textContent()).toContain("-hello world");
    expect(await card.textContent()).toContain("+goodbye world");
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("hello world\n");
    await card.getByRole("button", { name: "Allow once" }).click();
    await page.locator(".item.run", { hasText: "done" }).waitFor();
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("goodbye world\n");
    expect((await events(id)).some((e) => e.kind === "approval.answered" && e.payload.answer === "allow" && e.payload.by === "web")).toBe(true);
  });

  it("denies one from the keyboard, and the file stays as it was", async () => {
    const id = await startSession(script([
      { text: "Overwriting b.txt.", tool_calls: [{ name: "write_file", args: { path: "b.txt", content: "<script>alert(1)</script> \u001b[31mred" } }] },
      { text: "Oh well." },
    ]), "overwrite b.txt");
    const card = page.locator(".approval");
    await card.waitFor();
    // Hostile content is shown as text, with the escape made visible.
    expect(await card.textContent()).toContain("<script>alert(1)</script> ⟨ESC⟩[31mred");
    expect(await page.locator(".approval script").count()).toBe(0);
    await card.getByRole("button", { name: "Deny" }).focus();
    await page.keyboard.press("Enter");
    await page.locator(".item.result.refused").waitFor();
    expect(readFileSync(join(s.ws, "b.txt"), "utf8")).toBe("keep me\n");
    expect((await events(id)).some((e) => e.kind === "approval.answered" && e.payload.answer === "deny")).toBe(true);
  });

  it("switches the mode mid-run: the running command is stopped and the run cancelled before the new mode shows", async () => {
    const id = await startSession(script([
      { text: "A long build.", tool_calls: [{ name: "exec", args: { command: "sleep 60; echo finished > done.txt" } }] },
      { text: "Built." },
    ]), "build it");
    const card = page.locator(".approval");
    await card.waitFor();
    await card.getByRole("button", { name: "Allow once" }).click();
    await expect.poll(async () => (await events(id)).some((e) => e.kind === "worker.spawned")).toBe(true);
    expect(await page.getByTestId("mode").textContent()).toBe("workspace-write");
    // When did the page first show the new mode? (Compared with the record below.)
    await page.evaluate(`new MutationObserver(() => {
      if (window.shownAt === undefined && document.querySelector('[data-testid="mode"]')?.textContent === "read-only") window.shownAt = Date.now();
    }).observe(document.body, { subtree: true, childList: true, characterData: true })`);
    await page.selectOption("#mode-select", "read-only");
    await page.click("text=Switch");
    await page.getByTestId("mode").filter({ hasText: "read-only" }).waitFor();
    expect(await page.getByTestId("generation").textContent()).toBe("2");
    await page.locator(".item.run", { hasText: "cancelled" }).waitFor();
    const ev = await events(id);
    const at = (k: string) => ev.findIndex((e) => e.kind === k);
    expect(at("run.cancelled")).toBeGreaterThan(0);
    // The command's worker exited before the new generation was recorded (and so before the browser was told).
    const exited = ev.findIndex((e) => e.kind === "worker.exited" && e.payload.op === "exec");
    const reported = ev.findIndex((e) => e.kind === "policy.generation" && e.payload.generation === 2);
    expect(exited).toBeGreaterThan(0);
    expect(reported).toBeGreaterThan(exited);
    const shownAt = await page.evaluate<number | undefined>("window.shownAt");
    expect(shownAt).toBeGreaterThanOrEqual(Date.parse(ev[reported]!.time));
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("goodbye world\n");
    await new Promise((r) => setTimeout(r, 300));
    expect(() => readFileSync(join(s.ws, "done.txt"))).toThrow();
  });

  it("shows what the session can reach and every call, refusals marked, with the journal's verification", async () => {
    const id = await startSession(script([
      { text: "Looking outside.", tool_calls: [{ name: "read_file", args: { path: "/etc/shadow" } }] },
      { text: "Refused, fine." },
    ]), "read outside");
    await page.locator(".item.result.refused").waitFor();
    await page.click("text=What it can reach");
    await page.locator(".component h3", { hasText: "agent" }).waitFor();
    expect(await page.locator(".reach").textContent()).toContain(s.ws);
    expect(await page.locator(".reach").textContent()).toContain("none: no network at all");
    await page.click("text=Every call");
    await page.locator("tr.refusal").first().waitFor();
    expect(await page.locator("tr.refusal").first().textContent()).toContain("DENIED");
    await page.locator(".badge.ok", { hasText: "journal verifies" }).waitFor();
    expect(id).toMatch(/-/);
  });

  it("is usable in a narrow window", async () => {
    await page.setViewportSize({ width: 380, height: 800 });
    await page.goto(`${srv.url}#/`);
    await page.waitForSelector("text=New session");
    const overflow = await page.evaluate<number>("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    expect(overflow).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 1280, height: 900 });
  });
});
