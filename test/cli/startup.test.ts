import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

// What `vak exec` loads on its way to the command is most of its cost: zod
// (~60 ms) and SQLite (~10 ms) stay off that path (the schemas are only types
// there, the record goes through the spool), and so do child_process and net
// (~3 ms with the streams they load: the launcher starts by posix_spawn). A
// module moved or an import added that pulls one in shows here, whatever the
// machine's speed.
describe("vak exec's start-up", () => {
  let s: Scratch;
  let dir: string;
  let hook: string;
  beforeAll(() => {
    s = scratch();
    dir = mkdtempSync(join(tmpdir(), "vak-startup-"));
    hook = join(dir, "hook.cjs");
    // What was loaded is read before process.stderr is touched: a pipe's stream loads net.
    writeFileSync(hook, `process.on("exit", () => { const loaded = JSON.stringify({
      zod: "__zod_globalConfig" in globalThis,
      sqlite: Object.keys(require.cache).some((k) => k.includes("better-sqlite3")),
      childProcess: process.moduleLoadList.includes("NativeModule child_process"),
      net: process.moduleLoadList.includes("NativeModule net"),
      configs: Object.keys(require.cache).some((k) => /[\\/]configs-[^\\/]*\\.cjs$/.test(k)),
    }); process.stderr.write("\\nloaded " + loaded + "\\n"); });\n`);
  });
  afterAll(() => {
    s.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it("loads neither zod, SQLite, child_process nor net", () => {
    const r = spawnSync(process.execPath, ["--require", hook, VAK_BIN, "exec", "--", "/bin/true"], { cwd: s.ws, env: baseEnv(), encoding: "utf8" });
    expect(r.status).toBe(0);
    const line = /loaded (\{.*\})/.exec(r.stderr)?.[1];
    expect(JSON.parse(line ?? "null")).toEqual({ zod: false, sqlite: false, childProcess: false, net: false, configs: false });
  });

  it("with the typical presets (git, node) loads no TOML parser either: the build compiled them (src/policy/presets-built.ts)", () => {
    const r = spawnSync(process.execPath, ["--require", hook, VAK_BIN, "exec", "--profile", "git", "--profile", "node", "--", "/bin/true"], { cwd: s.ws, env: baseEnv(), encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(/loaded (\{.*\})/.exec(r.stderr)?.[1] ?? "null")).toMatchObject({ zod: false, childProcess: false, configs: false });
  });

  it("the probe sees the TOML parser when there is a config of the user's to read", () => {
    const xdg = join(dir, "xdg");
    mkdirSync(join(xdg, "vak"), { recursive: true });
    writeFileSync(join(xdg, "vak", "config.toml"), "[exec]\ntimeout = 600\n");
    const r = spawnSync(process.execPath, ["--require", hook, VAK_BIN, "exec", "--profile", "git", "--", "/bin/true"], { cwd: s.ws, env: baseEnv({ XDG_CONFIG_HOME: xdg }), encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(/loaded (\{.*\})/.exec(r.stderr)?.[1] ?? "null")).toMatchObject({ configs: true });
  });

  it("the probe sees both when a command does load them (vak check reads a spec with zod; the journal is SQLite)", () => {
    writeFileSync(join(s.ws, "w.toml"), `name = "w"\n[harness]\nmodel = "scripted:x"\n`);
    const check = spawnSync(process.execPath, ["--require", hook, VAK_BIN, "check", "w.toml"], { cwd: s.ws, env: baseEnv(), encoding: "utf8" });
    expect(JSON.parse(/loaded (\{.*\})/.exec(check.stderr)?.[1] ?? "null")).toMatchObject({ zod: true });
    const list = spawnSync(process.execPath, ["--require", hook, VAK_BIN, "journal", "list", "--json"], { cwd: s.ws, env: baseEnv(), encoding: "utf8" });
    expect(JSON.parse(/loaded (\{.*\})/.exec(list.stderr)?.[1] ?? "null")).toMatchObject({ sqlite: true });
  });

  it("the probe sees child_process when a run does spawn through it (--full-access: no launcher)", () => {
    const r = spawnSync(process.execPath, ["--require", hook, VAK_BIN, "exec", "--full-access", "--", "/bin/true"], { cwd: s.ws, env: baseEnv(), encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(JSON.parse(/loaded (\{.*\})/.exec(r.stderr)?.[1] ?? "null")).toMatchObject({ childProcess: true });
  });
});
