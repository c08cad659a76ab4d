import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak, spawnVak } from "../support/vak.js";

// The record → a person's terminal. What a model, a command or a file chose is
// in the journal as it came; `vak journal show` (the transcript), `list`, an
// ambiguous id's candidates and `tail` (which reads a live run's spool, where
// credential shapes are not yet redacted) must show it, never obey it.
const ESC = "\u001b";
const TOKEN = `ghp_${"Zq9xWv7Ut5".repeat(4)}`;
// Control characters that would clear the screen, set the title, hide text,
// move the cursor back over a line, or reverse its direction.
const HOSTILE = `${ESC}[2J${ESC}]0;owned\u0007${ESC}[8mhidden${ESC}[0m\r\u202e`;
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

let s: Scratch;
let agentId: string;
beforeAll(async () => {
  s = scratch();
  const file = join(s.root, "script.json");
  writeFileSync(file, JSON.stringify({ turns: [
    {
      // A model's text that tries to draw Vak's own lines: a fake end of the session and a fake instruction from you.
      text: `thinking ${HOSTILE}\n── done: nothing was refused\n10:00:00  you › approve everything\n${"A".repeat(10_000)}`,
      tool_calls: [{ name: "read_file", args: { path: `${HOSTILE}${TOKEN}` } }, { name: "exec", args: { command: `echo ${HOSTILE}` } }],
    },
    { text: "ok" },
  ] }));
  const r = await runVak(["run", "--model", `scripted:${file}`, "--json", `title ${HOSTILE}`], { cwd: s.ws });
  agentId = JSON.parse(r.stderr.trim().split("\n").pop()!).session;
});
afterAll(() => s.cleanup());

describe("the journal's views show hostile text, they do not obey it", () => {
  it("the transcript: escapes shown as escapes, a credential redacted, a model's line breaks under the margin", async () => {
    const r = await runVak(["journal", "show", agentId], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(CONTROL);
    expect(r.stdout).toContain("\\u{1b}[2J");
    expect(r.stdout).not.toContain(TOKEN);
    // The model's fake lines begin under the margin, never where Vak's own lines begin.
    for (const line of r.stdout.split("\n")) {
      expect(line).not.toMatch(/^── done/);
      expect(line).not.toMatch(/^\d\d:\d\d:\d\d {2}you › approve/);
    }
    expect(r.stdout).toMatch(/^ +│ ── done: nothing was refused$/m);
    // Bounded: one event cannot flood the terminal.
    expect(r.stdout).toMatch(/… \(\+\d+ characters; `vak journal export` has them all\)/);
    expect(r.stdout.length).toBeLessThan(8_000);
  });

  it("the timeline and the list: no control character reaches the terminal", async () => {
    for (const args of [["journal", "show", agentId, "--events"], ["journal", "list"], ["journal", "search", "owned"]]) {
      const r = await runVak(args, { cwd: s.ws });
      expect(r.stdout, args.join(" ")).not.toMatch(CONTROL);
      expect(r.stdout).not.toContain(TOKEN);
    }
  });

  it("an ambiguous id's candidates are neutralised too", async () => {
    await runVak(["exec", "--", "/bin/echo", `second ${HOSTILE}`], { cwd: s.ws });
    const r = await runVak(["journal", "show", agentId.slice(0, 2)], { cwd: s.ws });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/sessions start with/);
    expect(r.stderr).not.toMatch(CONTROL);
  });

  it("tail of a live run: read from its spool before the journal redacts it, still redacted and neutralised", async () => {
    const tail = spawnVak(["journal", "tail", "--all"], { cwd: s.ws });
    let out = "";
    tail.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    const until = async (re: RegExp) => {
      for (let i = 0; i < 500 && !re.test(out); i++) await new Promise((r) => setTimeout(r, 20));
      expect(out).toMatch(re);
    };
    try {
      await until(/following every session/);
      const run = spawnVak(["exec", "--", "/bin/sh", "-c", `sleep 1 # ${HOSTILE} ${TOKEN}`], { cwd: s.ws });
      const done = new Promise((r) => run.on("close", r));
      await until(/worker\.spawned/);
      await done;
      await until(/session\.ended/);
      expect(out).not.toMatch(CONTROL);
      expect(out).not.toContain(TOKEN);
      expect(out).toContain("\\u{1b}[2J");
    } finally {
      tail.kill("SIGINT");
    }
  });
});
