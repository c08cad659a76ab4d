import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT } from "../support/paths.js";
import { runVak } from "../support/vak.js";

// The CLI a person expects: a version, help, the agent started with a first
// message, and exit statuses that say what happened.
let s: Scratch;
beforeEach(() => {
  s = scratch();
});
afterEach(() => s.cleanup());

function script(turns: unknown[]): string {
  const file = join(s.root, `script-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ turns }));
  return file;
}

const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("version and help", () => {
  it("vak --version and -V print the package's version", async () => {
    for (const flag of ["--version", "-V"]) {
      const r = await runVak([flag], { cwd: s.ws });
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe(VERSION);
    }
  });

  it("vak help lists the commands; vak help CMD [SUB] is that command's help", async () => {
    const top = await runVak(["help"], { cwd: s.ws });
    expect(top.code).toBe(0);
    for (const c of ["exec", "run", "journal", "mcp", "completion", "doctor"]) expect(top.stdout).toMatch(new RegExp(`^  ${c}\\b`, "m"));
    expect(top.stdout).toContain("vak -- exec the tests");
    const exec = await runVak(["help", "exec"], { cwd: s.ws });
    expect(exec.stdout).toBe((await runVak(["exec", "--help"], { cwd: s.ws })).stdout);
    const list = await runVak(["help", "journal", "list"], { cwd: s.ws });
    expect(list.stdout).toMatch(/Usage: vak journal list/);
    expect(list.stdout).toContain("--since");
  });

  it("exec --help does not offer full access as a --mode (it is its own flag), and says what sizes and durations look like", async () => {
    const r = await runVak(["exec", "--help"], { cwd: s.ws });
    const mode = r.stdout.split("\n").findIndex((l) => l.includes("--mode <mode>"));
    const lines = r.stdout.split("\n");
    const next = lines.findIndex((l, i) => i > mode && /^  -/.test(l));
    const modeHelp = lines.slice(mode, next).join(" ");
    expect(modeHelp).toContain("read-only");
    expect(modeHelp).not.toContain("full-access");
    expect(r.stdout).toContain("--full-access");
    expect(r.stdout).toMatch(/--max-output <size>.*K, M, G = KiB, MiB, GiB/s);
    expect(r.stdout).toMatch(/--timeout <duration>.*10m/s);
    expect(r.stdout).toMatch(/Exit status:[\s\S]*124[\s\S]*125[\s\S]*152\/153 when --max-cpu or --max-file-size killed it/);
  });

  it("vak run --help documents its exit statuses", async () => {
    const r = await runVak(["run", "--help"], { cwd: s.ws });
    expect(r.stdout).toMatch(/Exit status:\n\s+0 .*\n\s+1 .*\n\s+3 .*refused/);
  });
});

describe("vak \"a message\": the interactive agent with a first message", () => {
  it("runs the message as the first instruction, then reads the next from the terminal", async () => {
    const file = script([{ text: "hello from the model" }, { text: "second answer" }]);
    const r = await runVak(["--model", `scripted:${file}`, "say hello"], { cwd: s.ws, input: "and again\n" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("say hello");
    expect(r.stdout).toContain("hello from the model");
    expect(r.stdout).toContain("second answer");
    const shown = await runVak(["journal", "show", "last"], { cwd: s.ws });
    expect(shown.stdout).toMatch(/you › say hello\n/);
    expect(shown.stdout).toMatch(/you › and again\n/);
  });

  it("words without quotes are one message", async () => {
    const file = script([{ text: "ok" }]);
    const r = await runVak(["--model", `scripted:${file}`, "fix", "the", "bug"], { cwd: s.ws });
    expect(r.code, r.stderr).toBe(0);
    expect((await runVak(["journal", "show", "last"], { cwd: s.ws })).stdout).toMatch(/you › fix the bug\n/);
  });

  it("a first word that is a command runs the command; after --, it is the message", async () => {
    const exec = await runVak(["exec", "--", "/bin/sh", "-c", "echo ran-as-exec"], { cwd: s.ws });
    expect(exec.stdout).toBe("ran-as-exec\n");
    const file = script([{ text: "ok" }]);
    const r = await runVak(["--model", `scripted:${file}`, "--", "exec", "the", "tests"], { cwd: s.ws });
    expect(r.code, r.stderr).toBe(0);
    expect((await runVak(["journal", "show", "last"], { cwd: s.ws })).stdout).toMatch(/you › exec the tests\n/);
  });

  it("a lone word that is nearly a command is refused as a typo, with the command and the way to send it anyway", async () => {
    const r = await runVak(["jurnal"], { cwd: s.ws });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/'jurnal' is not a command; did you mean `vak journal`\?.*`vak -- jurnal`/);
  });
});

describe("vak run's exit status", () => {
  it("0 when nothing was refused, 3 when an op was refused, 1 when it did not finish", async () => {
    const clean = await runVak(["run", "--model", `scripted:${script([{ tool_calls: [{ name: "list_dir", args: { path: "." } }] }, { text: "ok" }])}`, "x"], { cwd: s.ws });
    expect(clean.code).toBe(0);
    const missing = await runVak(["run", "--model", `scripted:${script([{ tool_calls: [{ name: "read_file", args: { path: "nope.txt" } }] }, { text: "ok" }])}`, "x"], { cwd: s.ws });
    expect(missing.code).toBe(0); // a file that is not there is the agent's business, not a refusal
    expect(missing.stdout).toMatch(/0 refused, 1 failed/);
    const denied = await runVak(["run", "--model", `scripted:${script([{ tool_calls: [{ name: "read_file", args: { path: join(s.outside, "x") } }] }, { text: "ok" }])}`, "x"], { cwd: s.ws });
    expect(denied.code).toBe(3);
    const unapproved = await runVak(["run", "--model", `scripted:${script([{ tool_calls: [{ name: "exec", args: { command: "true" } }] }, { text: "ok" }])}`, "x"], { cwd: s.ws });
    expect(unapproved.code).toBe(3);
    const turns = await runVak(["run", "--max-turns", "1", "--model", `scripted:${script([{ tool_calls: [{ name: "list_dir", args: { path: "." } }] }, { text: "ok" }])}`, "x"], { cwd: s.ws });
    expect(turns.code).toBe(1);
  });

  it("a task sub-agent's refusal counts for the session", async () => {
    const file = script([
      { tool_calls: [{ name: "task", args: { description: "look", prompt: "read it" } }] },
      { tool_calls: [{ name: "read_file", args: { path: join(s.outside, "x") } }] },
      { text: "the task is done" },
      { text: "all done" },
    ]);
    const r = await runVak(["run", "--model", `scripted:${file}`, "x"], { cwd: s.ws });
    expect(r.stdout).toMatch(/refused \(denied\)/);
    expect(r.code).toBe(3);
  });
});
