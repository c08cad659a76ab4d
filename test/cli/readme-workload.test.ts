import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SecretStore } from "../../src/secrets/store.js";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT } from "../support/paths.js";
import { runVak, TEST_STATE } from "../support/vak.js";

// The README's workload example, taken from the README itself (so the test
// breaks when the README changes), run as a reader would: `vak check`, then
// `vak run --spec` with the scripted provider in place of the spec's model.
const README = readFileSync(join(ROOT, "README.md"), "utf8");
const SPEC = /```toml\n(version = 1\nname = "triage"[\s\S]*?)```/.exec(README)?.[1];
// The example's tool, as a reader would write it: it answers with what it got.
const TOOL = `let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log("github tool got " + s + " token " + (process.env.GITHUB_TOKEN ? "set" : "missing")));\n`;
const TOKEN = `ghp_${"R3adme".repeat(6)}`;

let s: Scratch;
let env: Record<string, string>;
beforeEach(() => {
  s = scratch();
  mkdirSync(join(s.ws, "docs"));
  mkdirSync(join(s.ws, "tools"));
  writeFileSync(join(s.ws, "docs", "guide.md"), "# the guide\nissues go to triage\n");
  writeFileSync(join(s.ws, "tools", "github.js"), TOOL);
  writeFileSync(join(s.ws, "tools", "private.txt"), "not for the component\n");
  writeFileSync(join(s.ws, "triage.toml"), SPEC ?? "");
  const config = join(s.root, "config");
  new SecretStore(join(config, "vak", "secrets.json")).set("github", TOKEN);
  env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: s.root, XDG_STATE_HOME: TEST_STATE, XDG_CONFIG_HOME: config, LANG: "C.UTF-8" };
});
afterEach(() => s.cleanup());

function script(turns: unknown[]): string {
  const f = join(s.root, "script.json");
  writeFileSync(f, JSON.stringify({ turns }));
  return f;
}

describe("the README's workload example works as written", () => {
  it("the README has the example", () => {
    expect(SPEC).toMatch(/command = \["node", "tools\/github\.js"\]/);
  });

  it("vak check accepts it and shows the command's file, resolved against the spec's workspace", async () => {
    const r = await runVak(["check", "triage.toml", "--json"], { cwd: s.ws, env });
    expect(r.code, r.stderr).toBe(0);
    const github = JSON.parse(r.stdout).components.find((c: { component: string }) => c.component === "github");
    expect(github.command).toEqual(["node", join(s.ws, "tools", "github.js")]);
    expect(github.commandPaths).toEqual([join(s.ws, "tools", "github.js")]);
  });

  it("vak run --spec runs it end to end: the command tool, the docs tools and the store", async () => {
    const file = script([
      { tool_calls: [{ name: "github", args: { query: "is:open label:bug" } }, { name: "docs__read_file", args: { path: "docs/guide.md" } }, { name: "docs__store", args: { action: "put", store: "notes", key: "seen", value: "1" } }] },
      { text: "Triaged." },
    ]);
    const r = await runVak(["run", "--spec", "triage.toml", "--model", `scripted:${file}`, "--json", "triage the new issues"], { cwd: s.ws, env });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/github tool got \{"query":"is:open label:bug"\} token set/);
    expect(r.stdout).toContain("issues go to triage");
    expect(r.stdout).toMatch(/── done: 2 model turns, 3 tool calls, 0 refused/);
    expect(r.stdout).not.toContain(TOKEN);
  });

  it("the component's sandbox holds the command's file, not the folder around it, when only the file is named", async () => {
    // Without read = ["tools"], the command still runs (its file is bound read-only), and its neighbours are not there.
    writeFileSync(join(s.ws, "triage.toml"), SPEC!.replace('read = ["tools"]\n', ""));
    writeFileSync(join(s.ws, "tools", "github.js"), `const fs = require("fs"); let seen; try { seen = fs.readFileSync(__dirname + "/private.txt", "utf8"); } catch (e) { seen = e.code; } let w; try { fs.writeFileSync(__filename, "x"); w = "wrote"; } catch (e) { w = e.code; } console.log("neighbour " + seen.trim() + " self-write " + w);\n`);
    const file = script([{ tool_calls: [{ name: "github", args: { query: "x" } }] }, { text: "ok" }]);
    const r = await runVak(["run", "--spec", "triage.toml", "--model", `scripted:${file}`, "go"], { cwd: s.ws, env });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/neighbour ENOENT self-write E(ROFS|ACCES|PERM)/);
    expect(readFileSync(join(s.ws, "tools", "github.js"), "utf8")).toContain("neighbour");
  });

  it("vak check refuses a command whose file does not exist, with the file, line and field", async () => {
    writeFileSync(join(s.ws, "triage.toml"), SPEC!.replace("tools/github.js", "tools/githb.js"));
    const r = await runVak(["check", "triage.toml"], { cwd: s.ws, env });
    expect(r.code).toBe(125);
    expect(r.stderr.trim()).toMatch(/^vak: triage\.toml:15: tools\.github\.command\.1: tools\/githb\.js does not exist/);
    const run = await runVak(["run", "--spec", "triage.toml", "--model", `scripted:${script([{ text: "x" }])}`, "go"], { cwd: s.ws, env });
    expect(run.code).toBe(125);
  });

  it("vak check refuses a program that is not on PATH, and a program path that is not executable", async () => {
    writeFileSync(join(s.ws, "triage.toml"), SPEC!.replace('"node", ', '"no-such-program-vak", '));
    const r = await runVak(["check", "triage.toml"], { cwd: s.ws, env });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/triage\.toml:15: tools\.github\.command\.0: no-such-program-vak is not a program on your PATH/);
    writeFileSync(join(s.ws, "tools", "run.sh"), "#!/bin/sh\necho hi\n");
    chmodSync(join(s.ws, "tools", "run.sh"), 0o644);
    writeFileSync(join(s.ws, "triage.toml"), SPEC!.replace('["node", "tools/github.js"]', '["./tools/run.sh"]'));
    const x = await runVak(["check", "triage.toml"], { cwd: s.ws, env });
    expect(x.stderr).toMatch(/tools\.github\.command\.0: \.\/tools\/run\.sh is not executable/);
  });

  it("words that are not paths stay as they are", async () => {
    writeFileSync(join(s.ws, "triage.toml"), SPEC!.replace('["node", "tools/github.js"]', '["node", "tools/github.js", "--accept=application/json", "application/json"]'));
    const r = await runVak(["check", "triage.toml", "--json"], { cwd: s.ws, env });
    expect(r.code, r.stderr).toBe(0);
    const github = JSON.parse(r.stdout).components.find((c: { component: string }) => c.component === "github");
    expect(github.command.slice(2)).toEqual(["--accept=application/json", "application/json"]);
  });

  it("a relative command path that leads out of the workspace through a symlink is refused", async () => {
    writeFileSync(join(s.outside, "evil.js"), "console.log('outside')\n");
    rmSync(join(s.ws, "tools", "github.js"));
    symlinkSync(join(s.outside, "evil.js"), join(s.ws, "tools", "github.js"));
    const r = await runVak(["check", "triage.toml"], { cwd: s.ws, env });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/tools\.github\.command\.1: tools\/github\.js leads outside the workspace .*write the absolute path/);
  });
});
