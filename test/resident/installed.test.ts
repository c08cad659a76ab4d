import { appendFileSync, chmodSync, copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { upgradeError } from "../../src/cli/upgraded.js";
import { VakError } from "../../src/policy/errors.js";
import { Installed, stampChange, type Stamp, WATCHED, WATCHED_DIRS } from "../../src/resident/installed.js";
import { ROOT } from "../support/paths.js";

/**
 * What tells the resident host that Vak's installation is no longer the one it
 * started from (src/resident/installed.ts), and how an error of old code under a
 * new installation is said (src/cli/upgraded.ts). The host's own behaviour is in
 * test/attacks/resident-upgrade.test.ts.
 */

const base = mkdtempSync(join(tmpdir(), "vak-installed-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const st = (over: Partial<NonNullable<Stamp>> = {}): Stamp => ({ dev: 1, ino: 2, size: 3, mtimeMs: 4.5, ctimeMs: 6.5, ...over });

describe("stampChange: whether a path is still the one stamped", () => {
  it.each([
    ["unchanged", st(), st(), undefined],
    ["missing then and now", undefined, undefined, undefined],
    ["removed", st(), undefined, "was removed"],
    ["appeared", undefined, st(), "appeared"],
    ["another inode (renamed over)", st(), st({ ino: 9 }), "was replaced"],
    ["another device", st(), st({ dev: 9 }), "was replaced"],
    ["written in place, the same size (mtime)", st(), st({ mtimeMs: 4.6 }), "was written"],
    ["its mtime set back (ctime still moved)", st(), st({ ctimeMs: 7 }), "was written"],
    ["another size", st(), st({ size: 4 }), "was written"],
  ] as const)("%s", (_, before, now, expected) => {
    expect(stampChange(before, now)).toBe(expected);
  });
});

const tick = () => new Promise((r) => setTimeout(r, 20));

/** A directory laid out as an installation, every watched path there, a clock tick old (a few ms: a file's times move by it). */
async function layout(): Promise<string> {
  const root = mkdtempSync(join(base, "root-"));
  for (const d of WATCHED_DIRS) mkdirSync(join(root, d), { recursive: true });
  for (const p of WATCHED) {
    mkdirSync(join(root, p, ".."), { recursive: true });
    writeFileSync(join(root, p), p);
  }
  writeFileSync(join(root, "dist", "bin", "start-Ab_1.cjs"), "start");
  await tick();
  return root;
}

describe("Installed: the installation the host started from, and each way it is replaced", () => {
  it("an installation nobody touched, or whose files were only read, is the same one", async () => {
    const root = await layout();
    const i = Installed.at(root, Date.now());
    expect(i.changed()).toBeUndefined();
    // Something elsewhere in the package (a file in its root, a journal it never holds) is not its code.
    writeFileSync(join(root, "notes.txt"), "x");
    expect(i.changed()).toBeUndefined();
  });

  it.each([
    ["a chunk written over in place", (r: string) => appendFileSync(join(r, "dist/bin/start-Ab_1.cjs"), "more"), "dist/bin/start-Ab_1.cjs was written"],
    ["a chunk written over in place, the same size", (r: string) => writeFileSync(join(r, "dist/bin/start-Ab_1.cjs"), "START"), "dist/bin/start-Ab_1.cjs was written"],
    ["a new chunk in the host's bundle (a name not stamped)", (r: string) => writeFileSync(join(r, "dist/resident-host/exec-New.cjs"), "x"), "dist/resident-host was written"],
    ["the launcher relinked (a new inode)", (r: string) => (copyFileSync(join(r, "build/Release/vak-launcher"), join(r, "x")), renameSync(join(r, "x"), join(r, "build/Release/vak-launcher"))), "build/Release/vak-launcher was replaced"],
    ["the addon removed", (r: string) => rmSync(join(r, "build/Release/vak-resident.node")), "build/Release/vak-resident.node was removed"],
    ["dist/ removed (a build under way)", (r: string) => rmSync(join(r, "dist"), { recursive: true }), "dist/resident-host/host.cjs was removed"],
    ["package.json of another version", (r: string) => writeFileSync(join(r, "package.json"), "{}"), "package.json was written"],
    ["its mode changed", (r: string) => chmodSync(join(r, "build/Release/vak-client"), 0o700), "build/Release/vak-client was written"],
  ] as const)("%s", async (_, change, said) => {
    const root = await layout();
    const i = Installed.at(root, Date.now());
    // A build comes later than a clock tick after a host starts.
    await tick();
    change(root);
    expect(i.changed()).toBe(`${join(root, said.split(" ")[0]!)} ${said.split(" ").slice(1).join(" ")}`);
  });

  it("a path written after the process started, before the stamps were taken (a build while the host loaded its code), is a change already", async () => {
    const started = Date.now() - 60_000;
    const root = await layout();
    expect(Installed.at(root, started).changed()).toBe(`${join(root, "package.json")} was written after this host started`);
    expect(Installed.at(root, Date.now()).changed()).toBeUndefined();
  });

  it("a path missing when the host started that appears (a client built later) is a change too", async () => {
    const root = await layout();
    rmSync(join(root, "build/Release/vak-client"));
    const i = Installed.at(root, Date.now());
    expect(i.changed()).toBeUndefined();
    await tick();
    writeFileSync(join(root, "build/Release/vak-client"), "x");
    expect(i.changed()).toBe(`${join(root, "build/Release/vak-client")} appeared`);
  });
});

describe("upgradeError: an error of old code under a new installation is said as that", () => {
  /** What Node throws for a chunk of Vak's bundle that is gone: a real require, from a file under dist/. */
  const missing = (from: string) => {
    try {
      createRequire(from)("./chunk-Gone1234.cjs");
    } catch (e) {
      return e;
    }
    throw new Error("the require did not fail");
  };

  it("a chunk of Vak's own bundle that is gone", () => {
    const e = upgradeError(missing(join(ROOT, "dist", "resident-host", "exec-X.cjs")));
    expect(e).toBeInstanceOf(VakError);
    expect(e!.code).toBe("upgraded");
    expect(e!.message).toBe("Vak was upgraded or rebuilt while this ran (./chunk-Gone1234.cjs is gone), and this run could not go on with the old code: run it again");
  });

  it("...and with what changed, when the host knows", () => {
    expect(upgradeError(missing(join(ROOT, "dist", "bin", "start-X.cjs")), "/v/dist/bin was written")!.message).toContain("(/v/dist/bin was written; ./chunk-Gone1234.cjs is gone)");
  });

  it("any other error of code the installation no longer is, once the installation changed", () => {
    expect(upgradeError(new TypeError("x is not a function"), "/v/package.json was written")!.message).toContain("(/v/package.json was written)");
  });

  it("not: a module missing outside Vak's bundle, any error while the installation is unchanged, or a refusal of Vak's own", () => {
    expect(upgradeError(missing(join(base, "elsewhere.cjs")))).toBeUndefined();
    expect(upgradeError(new TypeError("x is not a function"))).toBeUndefined();
    expect(upgradeError(new VakError("bad-input", "no"), "/v/package.json was written")).toBeUndefined();
    expect(upgradeError("a string")).toBeUndefined();
  });
});
