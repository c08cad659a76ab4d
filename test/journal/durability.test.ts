import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Journal } from "../../src/journal/journal.js";
import { scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";

describe("the journal loses nothing and fails closed", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "vak-durability-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("a writer killed with kill -9 mid-burst leaves a journal that verifies and holds every acknowledged event", async () => {
    const path = join(dir, "journal.db");
    const writer = spawn(process.execPath, [fileURLToPath(new URL("../support/journal-writer.mjs", import.meta.url)), path], { stdio: ["ignore", "pipe", "inherit"] });
    let acked = 0;
    let buf = "";
    await new Promise<void>((resolve) => {
      writer.stdout.on("data", (d: Buffer) => {
        buf += d.toString();
        const lines = buf.split("\n");
        buf = lines.pop()!;
        for (const l of lines) acked = Math.max(acked, Number(l.split(" ")[1]));
        if (acked >= 2000) {
          writer.kill("SIGKILL");
          resolve();
        }
      });
    });
    await new Promise((r) => writer.on("close", r));
    const j = Journal.open({ path });
    const v = j.verify();
    expect(v.ok).toBe(true);
    expect(v.events).toBeGreaterThanOrEqual(acked);
    j.close();
  });

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
