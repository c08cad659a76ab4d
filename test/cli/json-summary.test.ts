import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv, runVak } from "../support/vak.js";

/** Every line as a terminal or a line reader would split it: on \n, \r\n and a bare \r. */
const lines = (s: string) => s.split(/\r\n|\n|\r/);
const summaryLine = (s: string) => lines(s).filter((l) => l.includes('"exit"'));

// --json's summary must start on a line of its own, whatever the command's
// last output was: a progress bar's bare \r, a line without its newline, on
// stderr, or on stdout when both go to one place (2>&1).
describe("the --json summary starts on a line of its own", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
  });
  afterAll(() => s.cleanup());

  const endings: [string, string][] = [
    ["a progress bar's bare \\r", `printf 'progress 50%%\\r' >&2`],
    ["a last line without its newline", `printf 'no newline at the end' >&2`],
    ["a refusal vak prints after it", `printf 'half a line' >&2; echo x > /proc/1/x 2>/dev/null; echo y > /etc/passwd 2>/dev/null; printf 'still half' >&2`],
  ];

  for (const relayed of [false, true]) {
    const flags = relayed ? ["--max-output", "100000"] : [];
    for (const [what, script] of endings) {
      it(`after ${what}${relayed ? " (output relayed by vak)" : ""}`, async () => {
        const r = await runVak(["exec", "--json", ...flags, "--", "/bin/sh", "-c", script], { cwd: s.ws });
        const found = summaryLine(r.stderr);
        expect(found).toHaveLength(1);
        expect(() => JSON.parse(found[0]!)).not.toThrow();
        expect(found[0]!.startsWith("{")).toBe(true);
        // vak's own refusal lines start on their own line too.
        for (const l of lines(r.stderr).filter((x) => x.includes("vak: refused"))) expect(l.startsWith("vak: refused")).toBe(true);
      });
    }
  }

  it("when stdout and stderr are one pipe (2>&1), after stdout's unfinished line", () => {
    for (const flags of [[], ["--max-output", "100000"]]) {
      const out = execFileSync("/bin/sh", ["-c", `"$0" "$1" exec --json ${flags.join(" ")} -- /bin/sh -c "printf 'stdout, no newline'" 2>&1; true`, process.execPath, VAK_BIN], { cwd: s.ws, env: baseEnv(), encoding: "utf8" });
      const found = summaryLine(out);
      expect(found).toHaveLength(1);
      expect(found[0]!.startsWith("{")).toBe(true);
    }
  });

  it("in a file, after a partial line, and with no blank line after a whole one", () => {
    const file = join(s.root, "err.log");
    for (const [script, blank] of [[`printf 'partial' >&2`, false], [`echo whole >&2`, false]] as const) {
      execFileSync("/bin/sh", ["-c", `"$0" "$1" exec --json -- /bin/sh -c "${script}" 2>"$2"; true`, process.execPath, VAK_BIN, file], { cwd: s.ws, env: baseEnv() });
      const text = readFileSync(file, "utf8");
      const found = summaryLine(text);
      expect(found).toHaveLength(1);
      expect(found[0]!.startsWith("{")).toBe(true);
      expect(text.includes("\n\n")).toBe(blank);
    }
  });
});
