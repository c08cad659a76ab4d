import { execFileSync } from "node:child_process";
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { linkWhy, MAX_KEPT, scanState, scanStateSliced } from "../../src/policy/state-entries.js";
import { scratch, type Scratch } from "../support/fs.js";

/** What a host tool's state already holds (src/policy/state-entries.ts): why each link is refused, and the walk's bounds. */

describe("why a link in a host tool's state is refused (linkWhy)", () => {
  const writable = ["/w", "/h/.codex/sessions", "/w/deep"];
  const table: [string, { links: string[]; end: string; loop: boolean }, RegExp][] = [
    ["one out of every writable root", { links: ["/h/.codex/sessions/x"], end: "/h/.bashrc.d", loop: false }, /out of what this run can write/],
    ["one into its own state directory (latest -> 2026/…)", { links: ["/h/.codex/sessions/latest"], end: "/h/.codex/sessions/2026/07/r.jsonl", loop: false }, /into \/h\/\.codex\/sessions, which this run can write/],
    ["one into the workspace, the innermost root named", { links: ["/h/.codex/sessions/x"], end: "/w/deep/a", loop: false }, /into \/w\/deep, which/],
    ["one that ends outside through a link the workspace holds", { links: ["/h/.codex/sessions/x", "/w/relay"], end: "/etc/cron.d/x", loop: false }, /into \/w, which/],
    ["one that loops", { links: ["/h/.codex/sessions/x", "/h/.codex/sessions/x"], end: "/h/.codex/sessions/x", loop: true }, /loops/],
  ];
  it.each(table)("%s", (_, chain, why) => expect(linkWhy(chain, writable)).toMatch(why));
});

describe("the walk of a host tool's state (scanState)", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  it("finds each kind, never follows a link, and resolves .. as the kernel does", () => {
    const S = join(s.root, "S");
    mkdirSync(join(S, "a", "b"), { recursive: true });
    writeFileSync(join(S, "a", "plain"), "x");
    // A link to a directory holding a FIFO: reported as a link, the FIFO behind it not walked into.
    mkdirSync(join(s.outside, "d"));
    execFileSync("mkfifo", [join(s.outside, "d", "fifo")]);
    symlinkSync(join(s.outside, "d"), join(S, "a", "b", "to-dir"));
    // a/b/up -> ../../../ws: into the workspace, by ..
    symlinkSync("../../../ws", join(S, "a", "b", "up"));
    writeFileSync(join(s.outside, "f"), "x");
    linkSync(join(s.outside, "f"), join(S, "a", "hard"));
    execFileSync("mkfifo", [join(S, "fifo")]);
    const scan = scanState([S], [S, s.ws]);
    const got = scan.entries.map((e) => [e.path.slice(S.length + 1), e.kind]).sort();
    expect(got).toEqual([["a/b/to-dir", "symbolic link"], ["a/b/up", "symbolic link"], ["a/hard", "hard link"], ["fifo", "FIFO"]]);
    expect(scan.entries.find((e) => e.path.endsWith("/up"))?.why).toContain(`into ${s.ws},`);
    expect(scan.entries.find((e) => e.path.endsWith("/to-dir"))?.why).toMatch(/out of what this run can write/);
    expect(scan.stopped).toBeUndefined();
  });

  it("a state file: itself, not its directory", () => {
    const F = join(s.root, "history.jsonl");
    writeFileSync(F, "x");
    symlinkSync(s.outside, join(s.root, "beside"));
    expect(scanState([F], [F]).found).toBe(0);
    linkSync(F, join(s.outside, "other"));
    expect(scanState([F], [F]).entries.map((e) => e.kind)).toEqual(["hard link"]);
  });

  it("stops past its budget of entries or time, and says where", () => {
    const S = join(s.root, "S");
    mkdirSync(join(S, "d"), { recursive: true });
    for (let i = 0; i < 20; i++) writeFileSync(join(S, "d", `f${i}`), "x");
    // Counted an entry at a time, inside a directory too: it stops at the first past the budget, never listing the rest.
    const byCount = scanState([S], [S], { entries: 10, ms: 60_000 });
    expect(byCount.stopped?.at).toMatch(new RegExp(`^${join(S, "d")}/f\\d+$`));
    expect(byCount.stopped?.entries).toBe(11);
    expect(scanState([S], [S], { entries: 1e6, ms: -1 }).stopped).toMatchObject({ at: join(S, "d"), entries: 1 });
    expect(scanState([S], [S], { entries: 21, ms: 60_000 }).stopped).toBeUndefined();
  });

  it("keeps the first MAX_KEPT entries and counts the rest", () => {
    const S = join(s.root, "S");
    mkdirSync(S);
    for (let i = 0; i < MAX_KEPT + 5; i++) symlinkSync("x", join(S, `l${i}`));
    const scan = scanState([S], [S]);
    expect(scan.found).toBe(MAX_KEPT + 5);
    expect(scan.entries).toHaveLength(MAX_KEPT);
  });

  it("sliced, the walk gives the event loop turns while it reads a large state (the resident host serves others meanwhile), and finds the same", async () => {
    const S = join(s.root, "S");
    mkdirSync(join(S, "d"), { recursive: true });
    for (let i = 0; i < 1000; i++) writeFileSync(join(S, "d", `f${i}`), "x");
    symlinkSync(s.outside, join(S, "d", "out"));
    let turns = 0;
    const tick = setInterval(() => (turns += 1), 0);
    try {
      const sliced = await scanStateSliced([S], [S], undefined, 0);
      expect(turns).toBeGreaterThan(3);
      expect(sliced).toEqual(scanState([S], [S]));
      expect(sliced.entries.map((e) => e.kind)).toEqual(["symbolic link"]);
    } finally {
      clearInterval(tick);
    }
    // The budget holds across slices as in one piece.
    expect((await scanStateSliced([S], [S], { entries: 100, ms: 60_000 }, 0)).stopped?.entries).toBe(101);
  });
});
