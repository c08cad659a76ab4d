import { chmodSync, chownSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { narrowMode } from "../../src/audit/fix.js";
import { auditHome, type AuditHome } from "../support/audit.js";
import { runVak } from "../support/vak.js";

/**
 * `vak audit --fix` changes modes on the user's behalf: it must never be the
 * tool that widens a mode, follows a link to someone else's file, changes
 * what it cannot record, or prints what a file name smuggles in.
 */
const mode = (p: string) => statSync(p).mode & 0o7777;
const uid = process.getuid?.() ?? 0;
let h: AuditHome;
beforeEach(() => {
  h = auditHome();
});
afterEach(() => h.cleanup());

describe("vak audit --fix", () => {
  it("a link swapped in for an audited file is refused, not followed (the target keeps its mode)", async () => {
    const target = join(h.root, "victim");
    writeFileSync(target, "x", { mode: 0o666 });
    chmodSync(target, 0o666);
    const link = join(h.root, "config.toml");
    symlinkSync(target, link);
    await expect(narrowMode(link, 0o077, false, uid, () => undefined)).rejects.toThrow(/cannot be opened as a plain file \(ELOOP\)/);
    expect(mode(target)).toBe(0o666);
  });

  it("a directory link swapped in for an audited directory is refused", async () => {
    const target = join(h.root, "victim-dir");
    mkdirSync(target, { mode: 0o777 });
    chmodSync(target, 0o777);
    const link = join(h.root, "state");
    symlinkSync(target, link);
    await expect(narrowMode(link, 0o077, true, uid, () => undefined)).rejects.toThrow(/not changed/);
    expect(mode(target)).toBe(0o777);
  });

  it("never adds a bit: a 0440 secret store becomes 0400, not 0600", async () => {
    const store = h.write(join(h.config, "vak", "secrets.json"), '{"version":1,"secrets":{}}\n', 0o440);
    const r = await h.audit(["--fix"]);
    expect(mode(store)).toBe(0o400);
    expect(r.report.fixed).toEqual([{ id: "control.readable", path: store, from: "0440", to: "0400" }]);
  });

  it.runIf(uid === 0)("a file of another user is not changed, even by root", async () => {
    const f = join(h.root, "theirs");
    writeFileSync(f, "x", { mode: 0o666 });
    chmodSync(f, 0o666);
    chownSync(f, 65534, 65534);
    await expect(narrowMode(f, 0o077, false, uid, () => undefined)).rejects.toThrow(/belongs to uid 65534/);
    expect(mode(f)).toBe(0o666);
  });

  it("a change the journal cannot hold is not made", async () => {
    const cfg = h.write(join(h.config, "vak", "config.toml"), "", 0o644);
    const r = await runVak(["audit", "--fix"], { cwd: h.workspace, env: { ...h.env, VAK_JOURNAL: "/dev/null/journal.db" } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/journal/);
    expect(mode(cfg)).toBe(0o644);
  });

  it("the record is written before the change: a record that throws leaves the mode as it was", async () => {
    const f = join(h.root, "f");
    writeFileSync(f, "x", { mode: 0o644 });
    chmodSync(f, 0o644);
    await expect(narrowMode(f, 0o077, false, uid, () => { throw new Error("journal full"); })).rejects.toThrow(/journal full/);
    expect(mode(f)).toBe(0o644);
  });
});

describe("vak audit's report", () => {
  it("a directory name with terminal escapes is printed neutralised", async () => {
    const evil = join(h.root, "cfg\u001b]0;pwned\u0007\u001b[2J");
    mkdirSync(join(evil, "vak"), { recursive: true, mode: 0o700 });
    chmodSync(evil, 0o700);
    writeFileSync(join(evil, "vak", "config.toml"), "", { mode: 0o644 });
    const r = await runVak(["audit"], { cwd: h.workspace, env: { ...h.env, XDG_CONFIG_HOME: evil } });
    expect(r.stdout).toContain("control.readable");
    expect(r.stdout).not.toMatch(/[\u001b\u0007]/);
  });
});
