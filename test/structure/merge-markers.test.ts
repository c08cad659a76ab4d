import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/paths.js";

// A merge that was committed half-resolved leaves its markers in a file that
// still builds (a README, a comment, a test's text). Every tracked text file
// is read; a line that is exactly a marker fails the suite, with where it is.
const MARKER = /^(<{7} |={7}$|>{7} )/;

describe("the repository", () => {
  it("holds no unresolved merge markers", () => {
    const ls = spawnSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" });
    expect(ls.status, ls.stderr).toBe(0);
    const files = ls.stdout.split("\0").filter((f) => f && !/\.(png|jpg|node|gz|ico|woff2?)$/.test(f) && !f.startsWith("package-lock"));
    expect(files.length).toBeGreaterThan(100);
    const found: string[] = [];
    for (const f of files) {
      let text: string;
      try {
        text = readFileSync(join(ROOT, f), "utf8");
      } catch {
        continue; // listed but absent in this checkout (a deleted, uncommitted file)
      }
      text.split("\n").forEach((line, i) => {
        if (MARKER.test(line)) found.push(`${f}:${i + 1}: ${line.slice(0, 40)}`);
      });
    }
    expect(found).toEqual([]);
  });
});
