import { spawn } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { fmt, MARGIN, own, Output, padded, type Sink } from "../../src/cli/output.js";
import { openJournal } from "../../src/journal/open.js";
import { Redactor } from "../../src/secrets/redact.js";
import { jsonText } from "../../src/text/json.js";
import { displayWidth } from "../../src/text/visible.js";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT, VAK_BIN } from "../support/paths.js";
import { baseEnv, runVak, TEST_STATE } from "../support/vak.js";

// The terminal boundary: everything a model, a file or a command chose reaches
// a terminal (or a pipe a terminal will show) inert, redacted, and unable to
// draw a line that looks like one of Vak's own; and everything Vak prints gets
// through a pipe whole, however slowly it is read.

/** Characters a terminal obeys or hides, found raw in text (newlines aside; tabs are plain whitespace). */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2069\ufeff\u{e0000}-\u{e007f}]/u;
function rawControls(text: string): string[] {
  return [...text].filter((c) => RAW.test(c)).map((c) => `U+${c.codePointAt(0)!.toString(16)}`);
}

/** Every hostile spelling of "clear the screen, write the clipboard, move up, overwrite the line, reverse the text". */
const HOSTILE = [
  "\u001b]52;c;cHduZWQ=\u0007", // OSC 52: write the clipboard
  "\u001b]0;pwned\u001b\\", // OSC 0 with ST: set the title
  "\u001b[1A\u001b[2K", // cursor up, erase the line
  "\r", // back to column 0
  "\u009b2J", // C1 CSI: clear the screen, on terminals that read 8-bit controls
  "\u0085", // C1 NEL
  "\u202e", // bidi override
  "\u2067", // bidi isolate
  "\u200b", // zero width space
  "\u2028", // line separator
  "\u007f\u0008", // DEL, backspace
  "\u{e0041}", // a tag character
];
const EVIL = HOSTILE.join("");

let s: Scratch;
beforeEach(() => {
  s = scratch({ git: true });
});
afterEach(() => s.cleanup());

function script(turns: unknown[]): string {
  const file = join(s.root, `script-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ turns }));
  return file;
}

/** A fake terminal: what was written, and its width. */
function terminal(columns = 60): Sink & { text: () => string } {
  const chunks: string[] = [];
  return { isTTY: true, columns, write: (c) => (chunks.push(String(c)), true), text: () => chunks.join("") };
}

describe("model-chosen strings on the terminal", () => {
  it("a tool name with OSC 52, cursor moves, C1 controls, bidi overrides and a fake prompt is printed inert, in the transcript, the summary and --json", async () => {
    const name = `x${EVIL}\n? run: rm -rf ~\n  allow? [y] once  [a] for this session  [n] no: FAKE-NAME`;
    const file = script([{ tool_calls: [{ name, args: { p: `red${EVIL}\nFAKE-ARG` } }] }, { text: "done" }]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--json", "go"], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(rawControls(r.stdout)).toEqual([]);
    expect(rawControls(r.stderr)).toEqual([]);
    // No line of the output is one that Vak's prompt could be mistaken for.
    for (const line of r.stdout.split("\n")) {
      expect(line).not.toMatch(/^\s*(\?|allow\?)/);
      if (line.includes("FAKE")) expect(line.startsWith(MARGIN) || /^\s*(▸|✗|✓)/.test(line)).toBe(true);
    }
    expect(r.stdout).toContain("\\u{1b}]52;c;cHduZWQ=\\u{7}");
    // --json keeps the value exactly: escaped, not lost.
    const summary = JSON.parse(r.stderr.trim().split("\n").pop()!) as { refused: { tool: string }[] };
    expect(summary.refused[0]!.tool).toBe(name);
  });

  it("an edit's diff and a command's output tail in the transcript are printed inert, each line after the margin", async () => {
    writeFileSync(join(s.ws, "f.txt"), "old line\n");
    const fake = `new${EVIL}\n? [agent] wants to run this command:\n  allow? [y] once  [a] for this session  [n] no: FAKE-DIFF`;
    const file = script([
      { tool_calls: [{ name: "edit_file", args: { path: "f.txt", old_text: "old line", new_text: fake } }] },
      { tool_calls: [{ name: "exec", args: { command: "printf 'a\\n? allow? [y] once FAKE-OUT\\n\\033]52;c;cHduZWQ=\\007\\n'" } }] },
      { text: "done" },
    ]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--approve", "write", "--approve", "exec", "go"], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(rawControls(r.stdout)).toEqual([]);
    const lines = r.stdout.split("\n");
    expect(lines.filter((l) => l.includes("FAKE-DIFF")).length).toBeGreaterThan(0);
    expect(lines.filter((l) => l.includes("FAKE-OUT")).length).toBeGreaterThan(0);
    for (const l of lines) {
      expect(l).not.toMatch(/^\s*(\?|allow\?)/);
      if (/FAKE-(DIFF|OUT)/.test(l)) expect(l.startsWith(MARGIN) || /^\s*▸/.test(l)).toBe(true);
    }
  });

  it("raw newlines in the model's text cannot draw a line that looks like Vak's approval prompt", async () => {
    const fake = "Done.\n\n? [agent] wants to run this command:\n│ ls\n  [a] would allow, without asking: FAKE\n  allow? [y] once  [a] for this session  [n] no: y\n";
    const file = script([{ text: fake }, { text: "x" }]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "go"], { cwd: s.ws });
    expect(r.code).toBe(0);
    const lines = r.stdout.split("\n");
    const fakeLines = lines.filter((l) => /FAKE|allow\?|wants to run|^│ ls/.test(l) || l.endsWith("ls"));
    expect(fakeLines.length).toBeGreaterThanOrEqual(4);
    // Every line the model wrote starts with the margin, which no line of Vak's own starts with; "│ ls" shows as "│ │ ls".
    for (const l of fakeLines) expect(l.startsWith(MARGIN)).toBe(true);
    expect(lines).toContain(`${MARGIN}│ ls`);
    expect(lines.some((l) => /^\s*(\?|allow\?)/.test(l))).toBe(false);
  });

  it("a hostile line cannot fill the terminal's width so that the terminal wraps the rest of it to column 0", () => {
    const tty = terminal(40);
    const out = new Output(tty, new Redactor());
    out.line(fmt`▸ ${"x".repeat(38)}? allow? [y] once FAKE ${"界".repeat(30)}😀😀😀`);
    out.text(`${"y".repeat(39)}? allow? [y] FAKE\n${"\t".repeat(9)}? TAB-FAKE\n`);
    out.endText();
    const lines = tty.text().split("\n").filter(Boolean);
    for (const l of lines) {
      expect(displayWidth(l)).toBeLessThanOrEqual(40);
      expect(l.startsWith("▸ ") || l.startsWith(MARGIN)).toBe(true);
    }
    expect(lines.filter((l) => l.includes("allow?")).every((l) => l.startsWith(MARGIN))).toBe(true);
  });

  it("whatever the hostile text and however it is cut into pieces, no line of it begins where Vak's lines begin", () => {
    const alphabet = ["\n", "?", "│", " ", "a", "界", "😀", "\t", "\u001b", "\r", "\u0085", "allow? ", "\u2028", "\u00ad"];
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 200; round++) {
      const hostile = Array.from({ length: 1 + rand(120) }, () => alphabet[rand(alphabet.length)]).join("");
      const tty = terminal(20 + rand(60));
      const out = new Output(tty, new Redactor());
      out.line(fmt`? [c] ${hostile} then ${padded(hostile, 10)}${own(" own")}`);
      // Streamed, in random pieces.
      let rest = hostile;
      while (rest) {
        const n = 1 + rand(rest.length);
        out.text(rest.slice(0, n));
        rest = rest.slice(n);
      }
      out.line(own("vak: end"));
      const lines = tty.text().split("\n");
      expect(rawControls(tty.text())).toEqual([]);
      for (const l of lines.slice(1, -2)) if (l !== "vak: end") expect(l.startsWith(MARGIN), JSON.stringify({ hostile, l })).toBe(true);
      expect(lines[0]!.startsWith("? [c] ")).toBe(true);
      for (const l of lines) expect(displayWidth(l)).toBeLessThanOrEqual(tty.columns!);
    }
  });

  it("a line of Vak's own that would start with the margin is a programming error, not output", () => {
    const out = new Output(terminal(), new Redactor());
    expect(() => out.line(own("│ looks like model text"))).toThrow(/margin/);
  });
});

describe("a model's streamed reply, redacted whole across lines", () => {
  const SECRET = "Wv3-known-secret-value-77";
  const shown = (t: string) => t.split("\n").map((l) => (l.startsWith(MARGIN) ? l.slice(MARGIN.length) : l)).join("");
  it("a known secret split by line breaks, in any pieces, never reaches the terminal; the lines around it do", () => {
    const spelled = [`${SECRET.slice(0, 8)}\n${SECRET.slice(8)}`, [...SECRET].join("\n"), `${SECRET.slice(0, 3)}\n\n${SECRET.slice(3, 12)}\n${SECRET.slice(12)}`];
    for (const s of spelled) {
      const reply = `first line\nsee: ${s} (end)\nlast line\n`;
      for (let i = 1; i < reply.length; i++) {
        const r = new Redactor();
        r.add(SECRET);
        const tty = terminal(200);
        const out = new Output(tty, r);
        out.text(reply.slice(0, i));
        out.text(reply.slice(i));
        out.endText();
        expect(shown(tty.text()), JSON.stringify({ s, i })).not.toContain(SECRET);
        expect(tty.text()).toContain("[REDACTED]");
        expect(tty.text()).toContain("first line");
        expect(tty.text()).toContain("(end)");
      }
    }
  });

  it("lines that cannot begin a known secret are shown as they end; one that may is held for the next line only", () => {
    const r = new Redactor();
    r.add(SECRET);
    const tty = terminal(200);
    const out = new Output(tty, r);
    out.text("ordinary line\n");
    expect(tty.text()).toContain("ordinary line");
    out.text("ends with Wv3-kn\n");
    expect(tty.text()).not.toContain("Wv3-kn");
    out.text("nothing more\n");
    expect(tty.text()).toContain("ends with Wv3-kn");
    expect(tty.text()).toContain("nothing more");
  });

  it("a run's own secrets (Output.also) count too", () => {
    const tty = terminal(200);
    const run = new Redactor();
    run.add(SECRET);
    const out = new Output(tty, new Redactor()).also(run);
    out.text(`x ${SECRET.slice(0, 10)}\n`);
    out.text(`${SECRET.slice(10)} y\n`);
    out.endText();
    expect(shown(tty.text())).not.toContain(SECRET);
  });
});

describe("JSON for machines carries no control a terminal obeys", () => {
  it("C1, bidi, zero-width and separators are escaped, and the value is unchanged", () => {
    const value = { path: `a${EVIL}b`, list: ["\u0080", "\u009f", "\u202a", "\ufeff", "\u2029"], "k\u009b": 1 };
    const text = jsonText(value);
    expect(rawControls(text)).toEqual([]);
    expect(JSON.parse(text)).toEqual(value);
    expect(jsonText("\u{e0041}")).toBe('"\\udb40\\udc41"');
  });
});

describe("vak journal shows what models chose, inert", () => {
  it("show, search, list and export (and their --json) print model-chosen paths and titles inert, and export keeps every value exact", async () => {
    const path = `evil${EVIL}\nFAKE-PATH qqsearchqq.txt`;
    const file = script([{ tool_calls: [{ name: "read_file", args: { path } }, { name: "list_dir", args: { path: `dir${EVIL}` } }] }, { text: "done" }]);
    const run = await runVak(["run", "--model", `scripted:${file}`, "--json", `title${EVIL}`], { cwd: s.ws });
    expect(run.code).toBe(0);
    const id = (JSON.parse(run.stderr.trim().split("\n").pop()!) as { session: string }).session;
    const outputs: Record<string, string> = {};
    for (const args of [["show", id], ["show", id, "--json"], ["search", "qqsearchqq"], ["search", "qqsearchqq", "--json"], ["list"], ["list", "--json"], ["export", id]]) {
      const r = await runVak(["journal", ...args], { cwd: s.ws });
      expect(r.code, args.join(" ")).toBe(0);
      expect(rawControls(r.stdout), args.join(" ")).toEqual([]);
      outputs[args.join(" ")] = r.stdout;
    }
    expect(outputs[`show ${id}`]).toContain("FAKE-PATH");
    expect(outputs["search qqsearchqq"]).toContain("FAKE-PATH");
    for (const l of outputs[`show ${id}`]!.split("\n")) expect(l).not.toMatch(/^\s*\?/);
    // Exact: the export's events are the journal's, value for value.
    const exported = outputs[`export ${id}`]!.trim().split("\n").map((l) => JSON.parse(l) as { kind: string; payload: unknown });
    const shown = JSON.parse(outputs[`show ${id} --json`]!) as { events: unknown[] };
    expect(exported).toEqual(shown.events);
    expect(JSON.stringify(exported)).toContain(JSON.stringify(path).slice(1, -1));
  });
});

describe("redaction at the one place every output passes", () => {
  it("a credential in a model-chosen path is redacted in the transcript, the end-of-run summary, --json refused[] and the journal", async () => {
    const key = `sk-proj-${"Q".repeat(12)}${Math.random().toString(36).slice(2, 12)}${"z".repeat(10)}`;
    const file = script([{ tool_calls: [{ name: "read_file", args: { path: `/etc/${key}/x` } }, { name: `tool-${key}`, args: {} }] }, { text: "done" }]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--json", "go"], { cwd: s.ws });
    // The read outside the grants is refused: vak run finishes with 3 (README's exit statuses).
    expect(r.code).toBe(3);
    expect(r.stdout).toContain("── done");
    expect(r.stdout).toContain("[REDACTED]");
    expect(r.stdout).not.toContain(key);
    expect(r.stderr).not.toContain(key);
    const summary = JSON.parse(r.stderr.trim().split("\n").pop()!) as { refused: { tool: string; message: string }[]; session: string };
    expect(summary.refused).toHaveLength(2);
    const shown = await runVak(["journal", "show", summary.session, "--json"], { cwd: s.ws });
    expect(shown.stdout).not.toContain(key);
  });
});

describe("every print goes through the output module", () => {
  it("no module of src/cli but output.ts touches process.stdout, process.stderr or console, or calls a stream's write()", () => {
    const dir = join(ROOT, "src/cli");
    const offenders: string[] = [];
    for (const f of readdirSync(dir).filter((x) => x.endsWith(".ts") && x !== "output.ts")) {
      const sf = ts.createSourceFile(f, readFileSync(join(dir, f), "utf8"), ts.ScriptTarget.Latest, true);
      const visit = (n: ts.Node): void => {
        if (ts.isPropertyAccessExpression(n)) {
          const on = n.expression.getText(sf);
          const name = n.name.text;
          if (on === "process" && (name === "stdout" || name === "stderr")) offenders.push(`${f}:${sf.getLineAndCharacterOfPosition(n.pos).line + 1}: process.${name}`);
          if (on === "console") offenders.push(`${f}: console.${name}`);
          // Called, not passed as an argument (`plan.grants.write`).
          if (name === "write" && ts.isCallExpression(n.parent) && n.parent.expression === n) offenders.push(`${f}: ${on}.write()`);
        }
        if (ts.isElementAccessExpression(n) && n.expression.getText(sf) === "process") offenders.push(`${f}: process[…]`);
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
    expect(offenders).toEqual([]);
  });
});

/** How many bytes `vak ARGS` prints on stdout, read as fast as it comes (and as bytes: a character split across two reads counts once). */
function bytesOf(args: string[], cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [VAK_BIN, ...args], { cwd, env: baseEnv(), stdio: ["ignore", "pipe", "ignore"] });
    let n = 0;
    child.stdout.on("data", (d: Buffer) => (n += d.length));
    child.on("error", reject);
    child.on("close", () => resolve(n));
  });
}

/** Runs `vak ARGS | { sleep; wc -c; }` in bash with pipefail: a real slow reader on a real pipe. */
function throughSlowPipe(args: string[], cwd: string, sleep = 1.5): Promise<{ code: number | null; bytes: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", `set -o pipefail; "$@" | { sleep ${sleep}; wc -c; }`, "bash", process.execPath, VAK_BIN, ...args], { cwd, env: baseEnv(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, bytes: Number(out.trim()), stderr: err }));
  });
}

describe("output through a pipe to a slow reader arrives whole", { timeout: 120_000 }, () => {
  let id: string;
  let expected: { export: number; show: number };
  beforeEach(async () => {
    // A session of about 2 MB, written straight into the journal vak reads.
    const journal = await openJournal({ path: join(TEST_STATE, "vak", "journal.db") });
    const session = journal.startSession({ kind: "agent", title: "a big session" });
    const appended: Promise<unknown>[] = [];
    for (let i = 0; i < 4000; i++) appended.push(session.append("message", { component: "agent" }, 1, { role: "assistant", provenance: "model", text: `line ${i} ${"w".repeat(400)} FINDME` }));
    await Promise.all(appended);
    await session.end("ok");
    id = session.id;
    await journal.close();
    expected = { export: await bytesOf(["journal", "export", id], s.ws), show: await bytesOf(["journal", "show", id], s.ws) };
    expect(expected.export).toBeGreaterThan(1_500_000);
  });

  it("vak journal export, show, show --json and search --json: every byte, exit 0", async () => {
    const exp = await throughSlowPipe(["journal", "export", id], s.ws);
    expect(exp).toMatchObject({ code: 0, bytes: expected.export });
    const show = await throughSlowPipe(["journal", "show", id], s.ws);
    expect(show).toMatchObject({ code: 0, bytes: expected.show });
    const json = await throughSlowPipe(["journal", "show", id, "--json"], s.ws, 1);
    expect(json.code).toBe(0);
    expect(json.bytes).toBeGreaterThan(1_500_000);
    const search = await throughSlowPipe(["journal", "search", "FINDME", "--json"], s.ws, 1);
    expect(search.code).toBe(0);
    expect(search.bytes).toBeGreaterThan(20_000);
  });

  it("vak run's transcript and its end-of-run summary, and vak exec's relayed output", async () => {
    const lines = Array.from({ length: 3000 }, (_, i) => `model line ${i} ${"m".repeat(200)}`).join("\n");
    const file = script([{ text: lines }, { text: "bye" }]);
    const whole = await runVak(["run", "--model", `scripted:${file}`, "go"], { cwd: s.ws });
    expect(whole.stdout).toContain("── done");
    const run = await throughSlowPipe(["run", "--model", `scripted:${file}`, "go"], s.ws);
    expect(run).toMatchObject({ code: 0, bytes: await bytesOf(["run", "--model", `scripted:${file}`, "go"], s.ws) });
    const exec = await throughSlowPipe(["exec", "--max-output", "10000000", "--", "/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"], s.ws);
    expect(exec).toMatchObject({ code: 0, bytes: 3_000_000 });
  });

  it("a reader that goes away early ends vak quietly, while it is still printing: no stack trace, no internal error", async () => {
    // An export is written at once; a run prints across many turns, so its writes meet the closed pipe while it runs.
    const turns = [...Array.from({ length: 8 }, (_, i) => ({ text: `${`line ${i} `.repeat(2000)}\n`, tool_calls: [{ name: "list_dir", args: {} }] })), { text: "end" }];
    const file = script(turns);
    for (const args of [["journal", "export", id], ["run", "--model", `scripted:${file}`, "go"]]) {
      const child = spawn(process.execPath, [VAK_BIN, ...args], { cwd: s.ws, env: baseEnv(), stdio: ["ignore", "pipe", "pipe"] });
      let err = "";
      child.stderr.on("data", (d: Buffer) => (err += d.toString()));
      child.stdout.once("data", () => child.stdout.destroy());
      const code = await new Promise<number | null>((r) => child.on("close", r));
      expect(err, args[0]).toBe("");
      expect(code, args[0]).toBe(0);
    }
  });
});
