import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak } from "../support/vak.js";

// The lines vak prints about what the sandbox refused, as they happen: one per
// kind of refusal and directory, naming the directory and the grant, with a
// count at the end.
let s: Scratch;
beforeAll(() => {
  s = scratch();
});
afterAll(() => s.cleanup());

const vakLines = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("vak: "));

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
