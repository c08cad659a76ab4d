import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The launcher starts on the host, unconfined, before any sandbox exists, with the command's environment.
 * A variable the dynamic loader reads (a profile's or a trusted repository's `set_env` of LD_PRELOAD naming a
 * library in the workspace, which any sandboxed run can rewrite) must act on the command only, never on the
 * launcher: else the library runs on the host. LD_DEBUG_OUTPUT shows which processes the loader read it for:
 * each writes a file there, and a host directory outside the view can only be written by a process on the host.
 */
describe("a loader variable set for the command never acts on the launcher on the host", () => {
  let s: Scratch;
  let config: string;
  let trace: string;
  beforeEach(() => {
    s = scratch();
    config = join(s.root, "xdg-config");
    trace = join(s.outside, "ld-trace");
    mkdirSync(trace);
    mkdirSync(join(config, "vak"), { recursive: true });
    mkdirSync(join(s.root, "home"));
    writeFileSync(join(config, "vak", "config.toml"), `[exec]\nset_env = { LD_DEBUG = "libs", LD_DEBUG_OUTPUT = "${trace}/ld", LD_BIND_NOW = "1" }\n`);
  });
  afterEach(() => s.cleanup());

  const vak = (args: string[]) => runVak(args, { cwd: s.ws, env: baseEnv({ XDG_CONFIG_HOME: config, HOME: join(s.root, "home") }) });

  it("set_env LD_DEBUG_OUTPUT (as LD_PRELOAD would) makes the launcher write nothing on the host, and the command still gets it", async () => {
    const r = await vak(["exec", "--", "sh", "-c", 'echo "LD_DEBUG=$LD_DEBUG LD_BIND_NOW=$LD_BIND_NOW"']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("LD_DEBUG=libs LD_BIND_NOW=1");
    expect(readdirSync(trace)).toEqual([]);
  });
});
