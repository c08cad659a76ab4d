import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak, spawnVak } from "../support/vak.js";
import { MARGIN } from "../../src/cli/output.js";

let s: Scratch;
beforeEach(() => {
  s = scratch({ git: true });
});
afterEach(() => s.cleanup());

function script(turns: unknown[]): string {
  const file = join(s.root, "script.json");
  writeFileSync(file, JSON.stringify({ turns }));
  return file;
}

describe("vak run", () => {
  it("prints the transcript and a summary of what was refused, and journals it", async () => {
    const file = script([
      { text: "Writing the file.", tool_calls: [{ name: "write_file", args: { path: "hello.txt", content: "hi\n" } }] },
      { tool_calls: [{ name: "read_file", args: { path: join(s.outside, "nope") } }] },
      { text: "All done." },
    ]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--approve", "write", "--json", "write hello"], { cwd: s.ws });
    expect(r.code).toBe(3); // it finished, but an op was refused
    expect(readFileSync(join(s.ws, "hello.txt"), "utf8")).toBe("hi\n");
    expect(r.stdout).toContain("▸ write_file");
    expect(r.stdout).toContain("All done.");
    expect(r.stdout).toMatch(/── done: 3 model turns, 2 tool calls, 1 refused/);
    expect(r.stdout).toMatch(/✗ read_file: refused \(denied\)/);
    const summary = JSON.parse(r.stderr.trim().split("\n").pop()!);
    expect(summary).toMatchObject({ outcome: "done", refused: [{ tool: "read_file", code: "denied" }] });
    const shown = await runVak(["journal", "show", summary.session, "--events"], { cwd: s.ws });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/DENIED read/);
    expect(shown.stdout).toMatch(/tool\.result/);
  });

  it("a command's result shows its exit status and the end of its output (where a test run says what failed); an edit shows its diff", async () => {
    writeFileSync(join(s.ws, "calc.js"), "function add(a, b) {\n  return a - b;\n}\nmodule.exports = add;\n");
    const lines = Array.from({ length: 41 }, (_, i) => `test ${i + 1} ok`).join("; echo ");
    const file = script([
      { tool_calls: [{ name: "exec", args: { command: `echo ${lines}; echo 'FAILED: 3 tests failed'; exit 1` } }] },
      { tool_calls: [{ name: "edit_file", args: { path: "calc.js", old_text: "function add(a, b) {\n  return a - b;\n}", new_text: "function add(a, b) {\n  return a + b;\n}" } }] },
      { text: "fixed" },
    ]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--approve", "exec", "--approve", "write", "fix it"], { cwd: s.ws });
    expect(r.code).toBe(0);
    const out = r.stdout.split("\n");
    const status = out.findIndex((l) => /✗ exit 1 · 42 lines, the last 6:/.test(l));
    expect(status).toBeGreaterThan(-1);
    // The last six lines, each after the margin; the first ones are not shown.
    expect(out.slice(status + 1, status + 7)).toEqual([...[37, 38, 39, 40, 41].map((n) => `${MARGIN}test ${n} ok`), `${MARGIN}FAILED: 3 tests failed`]);
    expect(out.slice(status).some((l) => /test (1|36) ok$/.test(l))).toBe(false);
    // The edit: its path on the call line, then the lines it changes, marked, after the margin.
    const call = out.findIndex((l) => /▸ edit_file calc\.js$/.test(l));
    expect(call).toBeGreaterThan(-1);
    expect(out.slice(call + 1, call + 5)).toEqual([`${MARGIN} function add(a, b) {`, `${MARGIN}-  return a - b;`, `${MARGIN}+  return a + b;`, `${MARGIN} }`]);
    expect(readFileSync(join(s.ws, "calc.js"), "utf8")).toContain("return a + b;");
  });

  it("without a terminal or --approve, writes are refused, saying how to allow them", async () => {
    const file = script([{ tool_calls: [{ name: "write_file", args: { path: "hello.txt", content: "hi\n" } }] }, { text: "ok" }]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "write hello"], { cwd: s.ws });
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/✗ write_file: refused \(not-approved\).*--approve/);
    expect(existsSync(join(s.ws, "hello.txt"))).toBe(false);
  });

  it("refuses to start without a model, or with an approval kind it does not know", async () => {
    const none = await runVak(["run", "hello"], { cwd: s.ws });
    expect(none.code).toBe(125);
    expect(none.stderr).toMatch(/no model chosen/);
    const bad = await runVak(["run", "--model", `scripted:${script([{ text: "x" }])}`, "--approve", "everything", "x"], { cwd: s.ws });
    expect(bad.code).toBe(125);
    expect(bad.stderr).toMatch(/--approve everything/);
  });
});

describe("the terminal shows hostile text, it does not obey it", () => {
  it("escape sequences in commands, file contents and the model's text are shown escaped", async () => {
    writeFileSync(join(s.ws, "README.md"), "hidden: \u001b[8mINVISIBLE\u001b[0m title: \u001b]0;pwned\u0007 \u202eevil\n");
    const file = script([
      { text: "about to \u001b[2Kclean up", tool_calls: [{ name: "read_file", args: { path: "README.md" } }, { name: "exec", args: { command: "touch EVIL; rm -rf x # \r\u001b[2K? run: npm test" } }] },
      { text: "ok" },
    ]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "--approve", "exec", "x"], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/[\u001b\u0007\u202e\r]/);
    expect(r.stdout).toContain("\\u{1b}[8mINVISIBLE");
    expect(r.stdout).toContain("\\u{202e}evil");
  });
});

describe("vak (interactive)", () => {
  it("asks before a write, shows the mode line, and a mode change revokes", async () => {
    const file = script([{ tool_calls: [{ name: "write_file", args: { path: "a.txt", content: "a\n" } }] }, { text: "wrote it" }, { tool_calls: [{ name: "write_file", args: { path: "b.txt", content: "b\n" } }] }, { text: "tried" }]);
    const child = spawnVak(["--model", `scripted:${file}`], { cwd: s.ws });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    const closed = new Promise<number | null>((r) => child.on("close", r));
    const waitFor = async (text: string) => {
      for (let i = 0; i < 400 && !out.includes(text); i++) await new Promise((r) => setTimeout(r, 25));
      expect(out).toContain(text);
    };
    await waitFor("vak · workspace-write · generation 1");
    child.stdin?.write("write a\n");
    await waitFor("allow?");
    child.stdin?.write("y\n");
    await waitFor("wrote it");
    expect(readFileSync(join(s.ws, "a.txt"), "utf8")).toBe("a\n");
    child.stdin?.write("/mode read-only\n");
    await waitFor("mode is now read-only");
    await waitFor("vak · read-only · generation 2");
    child.stdin?.write("write b\n");
    await waitFor("tried");
    expect(out).toMatch(/✗ refused \(denied\).*read-only/);
    child.stdin?.write("/quit\n");
    expect(await closed).toBe(0);
    expect(existsSync(join(s.ws, "b.txt"))).toBe(false);
  });
});

describe("vak demo", () => {
  it("runs with no model configured and blocks every attempt it makes", async () => {
    const r = await runVak(["demo"], { cwd: s.ws });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/9 attempted, 9 blocked/);
    expect(r.stdout).not.toContain("NOT BLOCKED");
    expect(r.stdout).toMatch(/egress +denied (GET|CONNECT) \S*169\.254\.169\.254/);
  });
});
