import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// Bad input gets one line that says what to do, and exit status 125; nothing runs.
describe("vak exec refuses bad input with one clear line", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
    symlinkSync(s.outside, join(s.ws, "escape-link"));
  });
  afterAll(() => s.cleanup());

  const cases: [string, string[], RegExp][] = [
    ["an unknown flag", ["--allow-everything"], /unknown option '--allow-everything'/],
    ["a relative path that escapes the workspace", ["--allow-read", "../outside"], /resolves outside the workspace.*absolute path/],
    ["a relative symlink that leads outside", ["--allow-read", "escape-link"], /symbolic link to .*outside the workspace; grant .* explicitly/],
    ["a path that does not exist", ["--allow-write", "no/such/dir"], /no such file or directory; create it first/],
    ["a grant of the whole file system", ["--allow-read", "/"], /whole file system/],
    ["full access asked for through --mode", ["--mode", "full-access"], /pass --full-access/],
    ["a mode that does not exist", ["--mode", "yolo"], /yolo.*invalid|Allowed choices/i],
    ["a non-numeric limit", ["--timeout", "soon"], /--timeout.*'soon'.*not a duration/],
    ["a size whose unit means two things (MB: 1000² or 1024²)", ["--max-output", "50MB"], /--max-output.*ambiguous.*50M or 50MiB/],
    ["a size past what a limit can hold", ["--max-memory", "99999999999T"], /--max-memory.*too large/],
    ["a size of zero", ["--max-file-size", "0"], /--max-file-size.*more than zero/],
    ["a fraction of a byte", ["--max-file-size", "0.1K"], /whole number of bytes/],
    ["a size in a unit that does not exist", ["--max-memory", "5X"], /unknown unit 'X'/],
    ["a negative size", ["--max-output", "-5M"], /--max-output/],
    ["a CPU limit in fractions of a second", ["--max-cpu", "1500ms"], /--max-cpu.*whole number of seconds/],
    ["a duration in an upper-case unit (M is a size)", ["--timeout", "1M"], /--timeout.*not a duration/],
    ["a duration too long to hold", ["--timeout", "999999999999999d"], /--timeout.*too long/],
    ["a bad environment variable name", ["--allow-env", "A=B"], /environment variable name/],
    ["a network grant for every host", ["--allow-net", "*"], /would grant every host/],
    ["a wildcard over a top-level domain", ["--allow-net", "*.com"], /whole top-level domain/],
    ["a network grant in reduced mode", ["--sandbox", "reduced", "--allow-net", "example.com"], /reduced mode has no private network namespace/],
    ["the file system root as workspace", ["--workspace", "/"], /whole file system/],
  ];

  for (const [title, flags, message] of cases) {
    it(title, async () => {
      const r = await runVak(["exec", ...flags, "--", "/bin/sh", "-c", "echo RAN"], { cwd: s.ws });
      expect(r.code).toBe(125);
      expect(r.stdout).not.toContain("RAN");
      const lines = r.stderr.trim().split("\n");
      expect(lines.length, r.stderr).toBe(1);
      expect(lines[0]).toMatch(/^vak: /);
      expect(lines[0]).toMatch(message);
    });
  }

  it("no command at all", async () => {
    const r = await runVak(["exec"], { cwd: s.ws });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/missing required argument/);
  });

  it("--full-access runs without a sandbox, says so, and passes the environment", async () => {
    const r = await runVak(["exec", "--full-access", "--", "/bin/sh", "-c", "echo $FULL_ACCESS_VAR"], { cwd: s.ws, env: baseEnv({ FULL_ACCESS_VAR: "passed" }) });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe("passed");
    expect(r.stderr).toContain("WITHOUT a sandbox");
  });

  it("a command that is not executable exits 126", async () => {
    const r = await runVak(["exec", "--", "/etc/hostname"], { cwd: s.ws });
    expect(r.code).toBe(126);
  });
});
