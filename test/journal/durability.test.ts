import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";

describe("the journal loses nothing and fails closed", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "vak-durability-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  // kill -9 of a writer, on both backends: test/journal/many-hosts.test.ts.

  // A tiny tmpfs, mounted in a private mount namespace: the machine is untouched.
  const inPrivateMount = (script: string) =>
    execFileSync("unshare", ["--mount", "--propagation", "private", "sh", "-c", script], { encoding: "utf8", env: { ...process.env, NODE_EXTRA_CA_CERTS: "" } });

  it("a full disk stops vak exec with a clear error before the command runs", () => {
    const s = scratch();
    try {
      const state = join(dir, "state");
      mkdirSync(state);
      const out = inPrivateMount(
        `mount -t tmpfs -o size=64k vak-full ${state} && head -c 1000000 /dev/zero > ${state}/fill 2>/dev/null; ` +
          `cd ${s.ws} && XDG_STATE_HOME=${state} ${process.execPath} ${VAK_BIN} exec -- /bin/sh -c 'echo RAN > ran' 2>&1; echo "exit=$?"`,
      );
      expect(out).toContain("exit=125");
      expect(out).toMatch(/journal .* could not be written \(the disk is full\)|no space/i);
      expect(out).not.toContain("RAN");
    } finally {
      s.cleanup();
    }
  });

  it("a read-only journal stops vak journal and vak exec with a clear error", () => {
    const s = scratch();
    try {
      const state = join(dir, "state2");
      mkdirSync(join(state, "vak"), { recursive: true });
      execFileSync(process.execPath, [VAK_BIN, "journal", "list"], { env: { ...process.env, XDG_STATE_HOME: state } });
      const out = inPrivateMount(
        `mount --bind ${state} ${state} && mount -o remount,bind,ro ${state} && ` +
          `cd ${s.ws} && XDG_STATE_HOME=${state} ${process.execPath} ${VAK_BIN} exec -- /bin/sh -c 'echo RAN > ran' 2>&1; echo "exit=$?"; ` +
          `XDG_STATE_HOME=${state} ${process.execPath} ${VAK_BIN} journal verify 2>&1; echo "verify=$?"`,
      );
      expect(out).toContain("exit=125");
      expect(out).toMatch(/could not be written \((it is|the file system is) read-only\)/);
      expect(out).not.toContain("RAN");
      expect(out).toMatch(/verify=(0|125)/);
    } finally {
      s.cleanup();
    }
  });
});
