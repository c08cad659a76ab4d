import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv, runVak } from "../support/vak.js";

// The lines vak prints about what the sandbox refused, as they happen: one per
// kind of refusal and directory, naming the directory and the grant, with a
// count at the end; each on a line of its own, and never after an empty line
// of vak's making.
let s: Scratch;
beforeAll(() => {
  s = scratch();
});
afterAll(() => s.cleanup());

const vakLines = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("vak: "));

/** vak exec through a shell, both streams into one pipe (`2>&1 | cat`), as a user would read it. */
const piped = (script: string, flags: string[] = []) =>
  execFileSync("/bin/sh", ["-c", `"$0" "$1" exec ${flags.join(" ")} -- /bin/sh -c "$2" 2>&1 | cat`, process.execPath, VAK_BIN, script], { cwd: s.ws, env: baseEnv(), encoding: "utf8", timeout: 30_000 });

describe("refusals are grouped by directory", () => {
  it("writes refused in one directory, each a reason that names its own path, give one line: the directory, its first path and the grant; a count with the next names at the end", async () => {
    // /etc is in the view (some of its files are), and not granted: each refusal's reason names the path itself.
    const r = await runVak(["exec", "--", "sh", "-c", "for f in a b c d e; do touch /etc/vak-test-$f 2>/dev/null; done; true"], { cwd: s.ws });
    expect(r.code, r.stderr).toBe(0);
    const refused = vakLines(r.stderr).filter((l) => l.startsWith("vak: refused"));
    expect(refused).toEqual(["vak: refused openat /etc/vak-test-a: /etc/vak-test-a is outside every grant; it is in none of the granted paths (--allow-write /etc if it is a host directory you mean to share)"]);
    expect(vakLines(r.stderr)).toContain("vak: … and 4 more refused in /etc (the same reason): vak-test-b, vak-test-c, vak-test-d, …");
  });

  it("another directory is a line of its own; past a dozen, only a count", async () => {
    const dirs = Array.from({ length: 15 }, (_, i) => join(s.outside, `d${i}`));
    for (const d of dirs) mkdirSync(d, { recursive: true });
    const r = await runVak(["exec", "--allow-read", dirs.join(","), "--", "sh", "-c", `for d in ${dirs.join(" ")}; do touch $d/x $d/y 2>/dev/null; done; true`], { cwd: s.ws });
    const refused = vakLines(r.stderr).filter((l) => l.startsWith("vak: refused"));
    expect(refused).toHaveLength(12);
    refused.forEach((l, i) => expect(l).toMatch(new RegExp(`^vak: refused openat ${dirs[i]}/x: .*--allow-write ${dirs[i]}$`)));
    expect(vakLines(r.stderr)).toContain(`vak: … and 1 more refused in ${dirs[0]} (the same reason): y`);
    expect(vakLines(r.stderr)).toContain("vak: … and 6 more refusals of other kinds (all of them are in the journal)");
  });
});

describe("vak's lines start a line of their own, and add no empty line", () => {
  it("with both streams in one pipe (2>&1 | cat): after whole lines, none; after a half line, one newline", () => {
    const out = piped("echo one; touch /etc/vak-test-x 2>/dev/null; echo two; sleep 0.5; touch /vak-test-y 2>/dev/null; printf half; sleep 0.5; touch /etc/ssl/vak-test-z 2>/dev/null; echo three");
    expect(out).not.toContain("\n\n");
    expect(out.startsWith("one\n")).toBe(true);
    for (const l of out.split("\n").filter((x) => x.includes("vak: "))) expect(l.startsWith("vak: ")).toBe(true);
    expect(out).toMatch(/half\nvak: /);
  });

  it("the --json summary in one pipe, after a whole line: no empty line before it", () => {
    const out = piped("echo whole", ["--json"]);
    expect(out).toMatch(/^whole\n\{"exit":0,/);
  });

  it("on stderr alone (a pipe), refusals as they happen between the command's lines", async () => {
    const r = await runVak(["exec", "--", "sh", "-c", "echo first >&2; touch /etc/vak-test-z 2>/dev/null; sleep 0.5; echo second >&2"], { cwd: s.ws });
    expect(r.stderr).not.toContain("\n\n");
    expect(r.stderr).toMatch(/^first\nvak: refused openat [^\n]*\nsecond\n$/);
  });

  it("a command writing into a pipe whose reader went away still ends (yes 2>&1 | head -1)", () => {
    const started = Date.now();
    const out = execFileSync("/bin/sh", ["-c", `"$0" "$1" exec -- yes 2>&1 | head -1`, process.execPath, VAK_BIN], { cwd: s.ws, env: baseEnv(), encoding: "utf8", timeout: 20_000 });
    expect(out).toBe("y\n");
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
