import { existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// Profiles in the user's config: [exec] for every run, [profiles.NAME] by
// name, with what flags and presets add, and --print-plan saying where each
// grant came from without running or recording anything.
describe("profiles in the user's config", () => {
  let s: Scratch;
  let config: string;
  let state: string;
  beforeAll(() => {
    s = scratch();
    config = join(s.root, "xdg-config");
    state = mkdtempSync(join(tmpdir(), "vak-profiles-state-"));
    mkdirSync(join(config, "vak"), { recursive: true });
    mkdirSync(join(s.root, "home"));
    writeFileSync(join(s.outside, "data.txt"), "outside data\n");
    mkdirSync(join(s.root, "extra"));
    writeFileSync(join(s.root, "extra", "x.txt"), "extra\n");
  });
  afterAll(() => s.cleanup());

  const write = (text: string) => writeFileSync(join(config, "vak", "config.toml"), text);
  const vak = (args: string[], env: Record<string, string> = {}) =>
    runVak(args, { cwd: s.ws, env: baseEnv({ XDG_CONFIG_HOME: config, XDG_STATE_HOME: state, HOME: join(s.root, "home"), ...env }) });

  it("[exec] applies to every run; --profile adds a profile and what it extends", async () => {
    write(`[exec]\nallow_read = ["${s.outside}"]\n\n[profiles.extra]\nextends = ["more"]\n\n[profiles.more]\nallow_read = ["${join(s.root, "extra")}"]\nset_env = { FROM_PROFILE = "yes" }\n`);
    const plain = await vak(["exec", "--", "sh", "-c", `cat ${s.outside}/data.txt; cat ${s.root}/extra/x.txt || echo no-extra; echo "env=$FROM_PROFILE"`]);
    expect(plain.stdout).toContain("outside data");
    expect(plain.stdout).toContain("no-extra");
    expect(plain.stdout).toContain("env=\n");
    const named = await vak(["exec", "--profile", "extra", "--", "sh", "-c", `cat ${s.root}/extra/x.txt; echo "env=$FROM_PROFILE"`]);
    expect(named.code, named.stderr).toBe(0);
    expect(named.stdout).toContain("extra\nenv=yes");
  });

  it("an unknown key or profile is refused with file, line and key, and nothing runs", async () => {
    write(`[exec]\nallow_read = []\n\n[profiles.web]\nallow_nett = ["example.com"]\n`);
    const r = await vak(["exec", "--", "sh", "-c", "echo RAN"]);
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain("RAN");
    expect(r.stderr.trim()).toMatch(/^vak: .*xdg-config\/vak\/config\.toml:5: profiles\.web\.allow_nett: unknown key; the keys are description, commands, extends/);
    write(`[exec]\nprofiles = ["gti"]\n`);
    const u = await vak(["exec", "--", "sh", "-c", "echo RAN"]);
    expect(u.code).toBe(125);
    expect(u.stderr).toMatch(/config\.toml:2: exec\.profiles: gti: no such profile; the profiles are .*git/);
    write("");
    const f = await vak(["exec", "--profile", "nope", "--", "true"]);
    expect(f.code).toBe(125);
    expect(f.stderr).toMatch(/--profile nope: no such profile; the profiles are .*cargo.*npm.*rust/);
  });

  it("a network rule in a profile that does not parse is refused with the file, line and key, not as a flag", async () => {
    write(`[profiles.web]\ndescription = "x"\nallow_net = ["api.example.com", "exa mple.com"]\n`);
    const r = await vak(["exec", "--profile", "web", "--", "sh", "-c", "echo RAN"]);
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain("RAN");
    expect(r.stderr.trim()).toMatch(/^vak: .*xdg-config\/vak\/config\.toml:3: profiles\.web\.allow_net: exa mple\.com: control characters or spaces in host$/);
    write(`[exec]\ndeny_net = ["*"]\n`);
    const d = await vak(["exec", "--", "true"]);
    expect(d.stderr.trim()).toMatch(/config\.toml:2: exec\.deny_net: \*: would grant every host/);
  });

  it("a request a profile's deny_net refuses is said with that profile's line, not as a --deny-net flag", async () => {
    write(`[profiles.web]\nallow_net = ["127.0.0.1:9"]\ndeny_net = ["127.0.0.1:9"]\n`);
    const r = await vak(["exec", "--profile", "web", "--", "curl", "-s", "http://127.0.0.1:9/"]);
    expect(r.stderr).toMatch(/vak: refused GET http:\/\/127\.0\.0\.1:9\/: 127\.0\.0\.1:9 is denied by deny_net 127\.0\.0\.1:9, from profile web \(.*config\.toml:3\)/);
  });

  it("--print-plan shows every grant with where it came from, runs nothing, records nothing, creates nothing", async () => {
    write(`[exec]\ntimeout = 600\nallow_read = ["${s.outside}"]\n\n[profiles.tool]\nstate_dirs = ["~/.tool/state"]\nallow_env = ["TOOL_*"]\n`);
    const before = existsSync(join(state, "vak")) ? readdirSync(join(state, "vak"), { recursive: true }).length : 0;
    const r = await vak(["exec", "--profile", "tool,git", "--allow-write", join(s.root, "extra"), "--print-plan", "--json", "--", "sh", "-c", "touch RAN"], { TOOL_MODE: "fast", TOOL_TOKEN: "t0k3n-should-not-pass" });
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(s.ws, "RAN"))).toBe(false);
    expect(existsSync(join(s.root, "home", ".tool"))).toBe(false);
    const after = existsSync(join(state, "vak")) ? readdirSync(join(state, "vak"), { recursive: true }).length : 0;
    expect(after).toBe(before);
    const plan = JSON.parse(r.stdout) as Record<string, unknown> & { read: { path: string; from: string }[]; write: { path: string; from: string }[]; limits: { name: string; value: number; from: string }[]; env: { passed: { name: string; from: string }[] }; create: string[]; skipped: { entry: string; why: string }[]; profiles: { name: string }[] };
    expect(plan.recorded).toBe(false);
    expect(plan.read).toContainEqual({ path: s.outside, from: expect.stringMatching(/^\[exec\] .*config\.toml:3$/) });
    expect(plan.write).toContainEqual({ path: join(s.root, "extra"), from: "--allow-write" });
    expect(plan.limits).toContainEqual({ name: "timeout", value: 600, from: expect.stringMatching(/^\[exec\] .*config\.toml:2$/) });
    expect(plan.env.passed.map((e) => e.name)).toEqual(expect.arrayContaining(["TOOL_MODE", "GIT_AUTHOR_NAME"]));
    expect(plan.env.passed.map((e) => e.name)).not.toContain("TOOL_TOKEN");
    expect(plan.skipped.map((x) => x.entry)).toContain("TOOL_TOKEN");
    expect(plan.create).toEqual([join(s.root, "home", ".tool", "state")]);
    expect(plan.profiles.map((p) => p.name)).toEqual(["tool", "git"]);
    // The same as text, for a person.
    const text = await vak(["exec", "--profile", "git", "--dry-run", "--", "git", "status"]);
    expect(text.stdout).toMatch(/^vak exec plan: nothing was run, and nothing is recorded in the journal/);
    expect(text.stdout).toMatch(/hidden \(--deny-read\)\n .*\.git-credentials +profile git \(preset presets\/git\.toml:\d+\)/);
  });

  it("--print-plan shows a secret as the reference it is resolved from, even under a credential's name, and never its value", async () => {
    write(`[exec]\nsecrets = ["DB_PASSWORD=cmd:db-pass"]\n`);
    const r = await vak(["exec", "--secret", "QA_TOKEN=env:QA_HOST_SECRET", "--secret", "QA=env:QA_HOST_SECRET", "--print-plan", "--", "true"], { QA_HOST_SECRET: "the-value-itself-42" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^ {2}QA_TOKEN=env:QA_HOST_SECRET +--secret$/m);
    expect(r.stdout).toMatch(/^ {2}QA=env:QA_HOST_SECRET +--secret$/m);
    expect(r.stdout).toMatch(/^ {2}DB_PASSWORD=cmd:db-pass +\[exec\] .*config\.toml:2$/m);
    expect(r.stdout + r.stderr).not.toContain("the-value-itself-42");
  });

  it("a bad secret in a config file is refused with file, line and key, before anything runs", async () => {
    for (const [spec, why] of [["X=bogus:Y", "bogus:Y: a secret reference is secret:NAME, env:NAME or cmd:NAME"], ["PATH=env:X", "PATH: Vak sets this variable itself"], ["X=env:A@", "name the hosts after @"]]) {
      write(`# mine\n\n[exec]\nsecrets = ["${spec}"]\n`);
      const r = await vak(["exec", "--", "sh", "-c", "touch RAN"]);
      expect(r.code).toBe(125);
      expect(r.stderr).toContain(`config.toml:4: exec.secrets: "${spec}": ${why}`);
      expect(existsSync(join(s.ws, "RAN"))).toBe(false);
    }
    write(`[profiles.p]\n\nsecrets = ["X=env:not a name"]\n`);
    const p = await vak(["exec", "--profile", "p", "--", "true"]);
    expect(p.stderr).toMatch(/config\.toml:3: profiles\.p\.secrets: "X=env:not a name": env:not a name: "not a name" is not a valid environment variable name/);
  });

  it("limits in config take the flags' forms (\"1K\", \"10m\") and extends takes one name as a string; a bad size is refused with file, line and key", async () => {
    write(`[exec]\nmax_output = "1K"\ntimeout = "10m"\n\n[profiles.mine]\nextends = "git"\nmax_memory = "512M"\n`);
    const plan = await vak(["exec", "--profile", "mine", "--print-plan", "--json", "--", "true"]);
    expect(plan.code, plan.stderr).toBe(0);
    const p = JSON.parse(plan.stdout) as { limits: { name: string; value: number }[]; profiles: { name: string }[] };
    expect(p.limits.map((l) => [l.name, l.value])).toEqual(expect.arrayContaining([["max_output", 1024], ["timeout", 600], ["max_memory", 512 * 1024 ** 2]]));
    expect(p.profiles.map((x) => x.name)).toEqual(["git", "mine"]);
    const big = await vak(["exec", "--", "sh", "-c", "head -c 4096 /dev/zero | tr '\\0' x"]);
    expect(big.code).toBe(125);
    expect(big.stdout.length).toBeLessThanOrEqual(1024);
    write(`[exec]\nmax_memory = "50MB"\n`);
    const bad = await vak(["exec", "--", "true"]);
    expect(bad.code).toBe(125);
    expect(bad.stderr).toMatch(/config\.toml:2: exec\.max_memory: "50MB": ambiguous/);
  });

  it("--allow-env PATH is refused, saying what PATH inside is and how to keep a directory on it", async () => {
    write("");
    const r = await vak(["exec", "--allow-env", "PATH", "--", "true"]);
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/--allow-env PATH: PATH inside is always the host's PATH less the directories the sandbox cannot see .*--allow-read DIR/);
    const home = await vak(["exec", "--allow-env", "HOME", "--", "true"]);
    expect(home.stderr).toMatch(/--allow-env HOME: HOME describes the sandbox/);
  });

  it("a PATH entry outside the grants that hides the host's program is named, with the grant that keeps it", async () => {
    write("");
    const bin = join(s.root, "mybin");
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, "sh"), "#!/bin/sh\necho mine\n", { mode: 0o755 });
    const r = await vak(["exec", "--", "sh", "-c", "true"], { PATH: `${bin}:/usr/bin:/bin` });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`vak: sh is ${bin}/sh on the host, but that directory is outside the sandbox, so /usr/bin/sh runs here instead: --allow-read ${bin}`);
    const missing = await vak(["exec", "--", "my-tool"], { PATH: `${bin}:/usr/bin:/bin` });
    expect(missing.code).toBe(127);
    writeFileSync(join(bin, "my-tool"), "#!/bin/sh\necho tool\n", { mode: 0o755 });
    const found = await vak(["exec", "--", "my-tool"], { PATH: `${bin}:/usr/bin:/bin` });
    expect(found.code).toBe(127);
    expect(found.stderr).toContain(`vak: my-tool: not found in the sandbox; on the host it is ${bin}/my-tool: --allow-read ${bin}`);
    const shell = await vak(["exec", "--", "sh", "-c", "my-tool"], { PATH: `${bin}:/usr/bin:/bin` });
    expect(shell.code).toBe(127);
    expect(shell.stderr).toContain(`vak: exit 127: a program was not found. These directories of your PATH are outside the sandbox: ${bin}; --allow-read DIR keeps one`);
    const granted = await vak(["exec", "--allow-read", bin, "--", "my-tool"], { PATH: `${bin}:/usr/bin:/bin` });
    expect(granted.stdout.trim()).toBe("tool");
  });

  it("write refusals name the directory, once, with a count of the rest", async () => {
    write("");
    const r = await vak(["exec", "--allow-read", join(s.root, "extra"), "--", "sh", "-c", `for i in 1 2 3 4; do touch ${s.root}/extra/f$i 2>/dev/null; done; true`]);
    expect(r.stderr).toContain(`vak: refused openat ${s.root}/extra/f1: ${s.root}/extra is granted read-only; grant the directory with --allow-write ${s.root}/extra`);
    expect(r.stderr).toContain(`vak: … and 3 more refused in ${s.root}/extra (the same reason)`);
  });

  it("a workload component takes a profile's grants with profiles = [...]", async () => {
    write(`[profiles.data]\nallow_read = ["${s.outside}"]\nallow_env = ["DATA_DIR"]\n`);
    writeFileSync(join(s.ws, "w.toml"), `version = 1\nname = "w"\n[harness]\nmodel = "scripted:x"\n[tools.reader]\nbuiltin = ["read_file"]\nprofiles = ["data", "git"]\n`);
    const r = await vak(["check", "w.toml", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { components: { component: string; read: string[]; env: string[] }[] };
    const reader = out.components.find((c) => c.component === "reader")!;
    expect(reader.read).toContain(s.outside);
    expect(reader.env).toEqual(expect.arrayContaining(["DATA_DIR", "GIT_AUTHOR_NAME"]));
    writeFileSync(join(s.ws, "w.toml"), `version = 1\nname = "w"\n[harness]\nmodel = "scripted:x"\n[tools.reader]\nbuiltin = ["read_file"]\nprofiles = ["nope"]\n`);
    const bad = await vak(["check", "w.toml"]);
    expect(bad.code).toBe(125);
    expect(bad.stderr).toMatch(/w\.toml:\d+: tools\.reader\.profiles: .*nope: no such profile/);
  });
});
