import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium } from "../support/browser.js";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, spawnVak } from "../support/vak.js";

// The browser's approval card against the terminal's prompt for the same
// request, in one `vak --serve` process: both must show the same screen (the
// headline, the whole op line for line with its diff against the file as it
// is now, the same paging and count of what is left, the scope of "for this
// session"), with hostile characters rendered the same exact way and secrets
// redacted in both.

let s: Scratch;
let vak: ChildProcess;
let out = "";
let base: string;
let token: string;
let browser: Awaited<ReturnType<typeof launchChromium>>;
let page: Page;
const TOKEN = `ghp_${"Q7".repeat(18)}`;

const until = async (what: string, cond: () => boolean | Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; the terminal shows:\n${out.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 30));
  }
};

/** The terminal's last prompt: its headline, the view's lines shown so far (margin lines), what it says is left, and the scope. */
function terminalPrompt(text: string) {
  // The question ends without a newline (the answer is typed after it): the next page starts on its line.
  const blocks = text.replace(/(allow\? \[y\][^\n]*?: )(?=│ )/g, "$1\n").split(/\n(?=\? )/);
  const last = blocks[blocks.length - 1]!;
  const lines = last.split("\n");
  const view = lines.filter((l) => l.startsWith("│ ")).map((l) => l.slice(2));
  return {
    headline: lines[0]!,
    view,
    more: lines.filter((l) => l.startsWith("… ")).at(-1),
    scope: lines.find((l) => l.startsWith("  [a] would allow, without asking: "))?.slice("  [a] would allow, without asking: ".length),
  };
}

async function card() {
  const c = page.locator(".approval");
  await c.waitFor();
  const view = (await c.locator("pre.view").innerText()).replace(/\n$/, "").split("\n");
  const more = (await c.locator("p.more").count()) ? await c.locator("p.more").innerText() : undefined;
  const scope = (await c.locator("p.scope").innerText()).replace(/^\[a\] would allow, without asking: /, "");
  return { c, view, more, scope, headline: await c.locator("h3").innerText() };
}

beforeAll(async () => {
  s = scratch();
  writeFileSync(join(s.ws, "f.txt"), Array.from({ length: 60 }, (_, i) => `line ${i + 1}`).join("\n") + "\n");
  const script = join(s.root, "script.json");
  writeFileSync(script, JSON.stringify({ turns: [
    { text: "editing", tool_calls: [{ name: "edit_file", args: { path: "f.txt", old_text: "line 30\n", new_text: `LINE 30 \u202e txt.exe \u001b[2J ${TOKEN}\n` } }] },
    { text: "writing", tool_calls: [{ name: "write_file", args: { path: "new.txt", content: Array.from({ length: 300 }, (_, i) => `row ${i + 1}`).join("\n") + "\n" } }] },
    { text: "all done" },
  ] }));
  const root = mkdtempSync(join(tmpdir(), "vak-approval-view-"));
  mkdirSync(join(root, "config", "vak"), { recursive: true });
  vak = spawnVak(["--serve", "--model", `scripted:${script}`], { cwd: s.ws, env: baseEnv({ XDG_STATE_HOME: join(root, "state"), XDG_CONFIG_HOME: join(root, "config") }) });
  vak.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  vak.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  await until("the login URL", () => /the browser client: http:\/\/vak-[0-9a-f]{16}\.localhost:(\d+)\/\?token=(\S+)/.test(out));
  const m = /the browser client: http:\/\/vak-[0-9a-f]{16}\.localhost:(\d+)\/\?token=(\S+)/.exec(out)!;
  base = `http://127.0.0.1:${m[1]!}/`;
  token = m[2]!;
  browser = await launchChromium();
  page = await browser.context.newPage();
  await page.goto(`${base}?token=${token}`);
  const list = (await (await fetch(`${base}api/sessions`, { headers: { Authorization: `Bearer ${token}` } })).json()) as { sessions: { id: string; live: boolean }[] };
  await page.goto(`${base}#/s/${list.sessions.find((x) => x.live)!.id}`);
});
afterAll(async () => {
  await browser?.close();
  if (vak && vak.exitCode === null) {
    vak.stdin!.end("/quit\n");
    await new Promise((r) => vak.once("exit", r));
  }
  s?.cleanup();
});

describe("the web approval card is the terminal's approval view", () => {
  it("an edit: the same headline, the diff against the file as it is now line for line (hostile characters as the same markers, the token redacted), the same scope", async () => {
    vak.stdin!.write("go\n");
    await until("the terminal prompt", () => out.includes("allow? [y]"));
    const t = terminalPrompt(out);
    const b = await card();
    expect(t.headline).toContain("wants to edit a file; the change, as a diff:");
    expect(b.headline).toContain("wants to edit a file; the change, as a diff:");
    // The diff against the file as it is now: its hunk header and context, not only the two strings of the op.
    expect(t.view).toContain("@@ -27,7 +27,7 @@");
    expect(t.view).toContain("-line 30");
    expect(t.view).toContain(" line 29");
    expect(t.view.find((l) => l.startsWith("+LINE 30"))).toBe("+LINE 30 ⟨U+202E⟩ txt.exe ⟨ESC⟩[2J [REDACTED]");
    expect(b.view).toEqual(t.view);
    expect(b.more).toBeUndefined();
    expect(t.more).toBeUndefined();
    expect(b.scope).toBe(t.scope);
    expect(b.scope).toContain("f.txt");
    expect(await b.c.innerText()).not.toContain(TOKEN);
    await b.c.getByRole("button", { name: "Allow once" }).click();
  });

  it("a long write: the same first page, the same count of what is left, the same next pages, until all of it is shown in both", async () => {
    await until("the second prompt", () => out.split("allow? [y]").length === 3);
    await page.locator(".approval", { hasText: "new.txt" }).waitFor();
    let t = terminalPrompt(out);
    let b = await card();
    expect(t.headline).toContain("wants to write a file; the change, as a diff:");
    expect(t.view).toHaveLength(40);
    expect(b.view).toEqual(t.view);
    // "… 262 more lines of it not shown yet (N characters)": the terminal adds its key, the browser its button.
    expect(t.more).toMatch(/^… 262 more lines of it not shown yet \(\d+ characters\): \[v\] shows the next 200$/);
    expect(b.more!.startsWith(t.more!.replace(/: \[v\].*$/, ""))).toBe(true);
    expect(b.more).toContain("show the next 200");
    for (const n of [240, 302]) {
      vak.stdin!.write("v\n");
      await b.c.getByRole("button", { name: /show the next/ }).click();
      await until(`the terminal's next page (${n})`, () => terminalPrompt(out).view.length === n);
      t = terminalPrompt(out);
      b = await card();
      expect(b.view).toEqual(t.view);
      expect(b.view).toHaveLength(n);
    }
    expect(t.view.at(-1)).toBe("+row 300");
    expect(b.more).toBeUndefined();
    expect(b.scope).toBe(t.scope);
    vak.stdin!.write("n\n");
    await until("the run to end", () => out.includes("── done"));
  });
});
