import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// vak exec --explain hands the command's lookups (opens for reading, stat,
// access, readlink, execve) to the guard, which notes the ones that miss and
// lets them go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE). That must widen
// nothing: a write is never continued, the view is the same, what the
// command names is neutralised and bounded, and no file's content is shown.
describe("vak exec --explain", () => {
  let s: Scratch;
  let env: Record<string, string>;
  beforeAll(() => {
    s = scratch({ git: true });
    mkdirSync(join(s.outside, "conf"));
    writeFileSync(join(s.outside, "conf", "tool.json"), '{"token":"CONTENT-NEVER-SHOWN"}\n');
    mkdirSync(join(s.root, "home"));
    env = baseEnv({ HOME: join(s.root, "home") });
  });
  afterAll(() => s.cleanup());
  const vak = (args: string[]) => runVak(args, { cwd: s.ws, env });

  it("a file looked up in the home directory is granted as that file (with the preset that shows it), never the whole home", async () => {
    const home = join(s.root, "home");
    writeFileSync(join(home, ".gitconfig"), "[user]\n\tname = Someone\n");
    const r = await vak(["exec", "--explain", "--", "sh", "-c", "git config --global user.name; true"]);
    expect(r.stderr).toContain(`vak:   not in the view: ${home} (.gitconfig), by `);
    expect(r.stderr).toContain(`: --allow-read ${join(home, ".gitconfig")}, or --profile git`);
    expect(r.stderr).not.toContain(`--allow-read ${home}\n`);
  });

  it("names the paths outside the view the command looked for, by the call, with the grant; grants nothing and shows no content", async () => {
    const r = await vak(["exec", "--explain", "--", "sh", "-c", `cat ${s.outside}/conf/tool.json; test -e ${s.outside}/conf || echo no-conf; python3 -c "import os; os.access('${s.outside}', os.R_OK)"; true`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("no-conf\n");
    expect(r.stderr).toMatch(/vak: --explain: what the command tried to reach and could not \(nothing was granted\):/);
    expect(r.stderr).toContain(`vak:   not in the view: ${s.outside}/conf (tool.json), by open, stat: --allow-read ${s.outside}/conf`);
    expect(r.stderr).toContain(`vak:   not in the view: ${s.outside}, by stat: --allow-read ${s.outside}`);
    expect(r.stderr).not.toContain("CONTENT-NEVER-SHOWN");
    // What is in the view and simply missing (a typo in the workspace) is not a grant to suggest.
    const typo = await vak(["exec", "--explain", "--", "sh", "-c", "cat no-such-file 2>/dev/null; true"]);
    expect(typo.stderr).not.toContain("not in the view");
    // Without --explain, no summary.
    const plain = await vak(["exec", "--", "sh", "-c", `cat ${s.outside}/conf/tool.json 2>/dev/null; true`]);
    expect(plain.stderr).not.toContain("--explain");
  });

  it("a write is never continued: the guard still refuses protected paths, writes outside the grants and truncation, with --explain on", async () => {
    const hook = join(s.ws, ".git", "hooks", "pre-commit");
    const r = await vak(["exec", "--explain", "--", "python3", "-c", [
      "import os",
      "def tryit(f):",
      "    try: f(); print('WROTE')",
      "    except OSError as e: print('refused', e.errno)",
      `tryit(lambda: os.close(os.open(${JSON.stringify(hook)}, os.O_WRONLY | os.O_CREAT, 0o755)))`,
      `tryit(lambda: os.close(os.open('.git/config', os.O_RDONLY | os.O_TRUNC)))`,
      `tryit(lambda: os.close(os.open('.git/config', os.O_RDWR)))`,
      `tryit(lambda: os.close(os.open(${JSON.stringify(join(s.outside, "new"))}, os.O_WRONLY | os.O_CREAT)))`,
    ].join("\n")]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain("WROTE");
    expect(r.stdout.trim().split("\n")).toHaveLength(4);
    expect(existsSync(hook)).toBe(false);
    expect(readFileSync(join(s.ws, ".git", "config"), "utf8")).toContain("[core]");
    expect(existsSync(join(s.outside, "new"))).toBe(false);
  });

  it("a flood of distinct lookups leaves a bounded summary, and names with terminal escapes are neutralised", async () => {
    const evil = join(s.outside, "evil\u001b]0;pwned\u0007\u001b[2J");
    mkdirSync(evil);
    writeFileSync(join(evil, "f"), "x");
    for (let i = 0; i < 40; i++) {
      mkdirSync(join(s.outside, `d${i}`), { recursive: true });
      writeFileSync(join(s.outside, `d${i}`, "f"), "x");
    }
    // 40 directories on the host, and 2,400 lookups of names the host has not either (past the guard's bound).
    const script = `test -e '${evil}/f'; for i in $(seq 0 39); do test -e ${s.outside}/d$i/f; done; for i in $(seq 0 39); do for j in $(seq 0 60); do test -e ${s.outside}/d$i/g$j; done; done; true`;
    const r = await vak(["exec", "--explain", "--", "sh", "-c", script]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stderr.split("\n").filter((l) => l.startsWith("vak:   not in the view") || l.includes("more paths outside the view"));
    expect(lines.length).toBeLessThanOrEqual(21);
    expect(r.stderr).toContain("the sandbox stopped reporting lookups that missed after its bound");
    expect(r.stderr).toContain("not in the view: " + join(s.outside, "evil\\u{1b}]0;pwned\\u{7}\\u{1b}[2J") + " (f), by stat");
    expect(r.stderr).toMatch(/… and \d+ more paths outside the view in other directories/);
    expect(r.stderr).not.toContain("\u001b");
    expect(r.stderr).not.toContain("\u0007");
  });
});
