import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// The trust tiers of a repository's .vak/config.toml, attacked as a hostile repository (or a stranger on the same
// machine) meets a user: what `vak trust` shows against what it then grants, what is reviewed against what is
// recorded, whose .vak counts at all, and what an untrusted file may still do to an agent session.
describe("red team: a repository config's trust tiers", () => {
  let s: Scratch;
  let env: Record<string, string>;
  let trustFile: string;
  beforeAll(() => {
    s = scratch();
    const state = mkdtempSync(join(tmpdir(), "vak-rt-config-state-"));
    mkdirSync(join(s.root, "home"));
    mkdirSync(join(s.root, "xdg-config"));
    mkdirSync(join(s.ws, ".git"));
    env = baseEnv({ HOME: join(s.root, "home"), XDG_CONFIG_HOME: join(s.root, "xdg-config"), XDG_STATE_HOME: state });
    trustFile = join(state, "vak", "trust.json");
  });
  afterAll(() => s.cleanup());

  const vak = (args: string[], opts: { cwd?: string; input?: string; extra?: Record<string, string> } = {}) =>
    runVak(args, { cwd: opts.cwd ?? s.ws, env: { ...env, ...opts.extra }, input: opts.input ?? "" });
  const writeConfig = (text: string, repo = s.ws) => {
    mkdirSync(join(repo, ".vak"), { recursive: true });
    writeFileSync(join(repo, ".vak", "config.toml"), text);
  };
  const recorded = () => (existsSync(trustFile) ? readFileSync(trustFile, "utf8") : "");

  it("vak trust shows an allow_env pattern that matches nothing in this shell: trusted, it passes what a later run's host has", async () => {
    writeConfig('[exec]\nallow_env = ["DB_*"]\n');
    try {
      // Reviewed in a shell with no DB_* variable: the grant must still be on the screen.
      const shown = await vak(["trust"]);
      expect(shown.code).toBe(125);
      const grant = shown.stdout.slice(shown.stdout.indexOf("Trusted, it would grant:"));
      expect(grant).not.toMatch(/\[exec\], line 1\):\n {4}nothing/);
      expect(grant).toContain("pass variables DB_*: every one the host has when a run starts");
      expect((await vak(["trust", "--yes"])).code).toBe(0);
      // Then CI, with the database's variables: the pattern passes the name, never what looks like its password.
      const r = await vak(["exec", "--", "sh", "-c", 'echo "host=$DB_HOST pass=$DB_PASS pwd=$MYSQL_PWD"'], { extra: { DB_HOST: "db.local", DB_PASS: "hunter2-db", MYSQL_PWD: "hunter2-my" } });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe("host=db.local pass= pwd=\n");
    } finally {
      await vak(["trust", "--revoke"]);
      rmSync(join(s.ws, ".vak"), { recursive: true, force: true });
    }
  });

  it("a trusted pattern does not pass a credential by its short name (DB_PASS, MYSQL_PWD, STRIPE_KEY, AWS_ACCESS_KEY_ID, GH_PAT)", async () => {
    writeConfig('[exec]\nallow_env = ["DB_*", "MYSQL_*", "STRIPE_*", "AWS_*", "GH_*"]\n');
    const secrets = { DB_PASS: "s-db-pass", MYSQL_PWD: "s-mysql-pwd", STRIPE_KEY: "s-stripe-key", AWS_ACCESS_KEY_ID: "s-aws-akid", GH_PAT: "s-gh-pat" };
    try {
      expect((await vak(["trust", "--yes"])).code).toBe(0);
      const r = await vak(["exec", "--", "sh", "-c", "env"], { extra: { ...secrets, DB_HOST: "db.local", AWS_REGION: "eu-west-1" } });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("DB_HOST=db.local");
      expect(r.stdout).toContain("AWS_REGION=eu-west-1");
      for (const v of Object.values(secrets)) expect(r.stdout).not.toContain(v);
      // By name, the user's own choice, each still passes.
      const named = await vak(["exec", "--allow-env", "DB_PASS", "--", "sh", "-c", "echo $DB_PASS"], { extra: secrets });
      expect(named.stdout).toBe("s-db-pass\n");
    } finally {
      await vak(["trust", "--revoke"]);
      rmSync(join(s.ws, ".vak"), { recursive: true, force: true });
    }
  });

  it("vak trust --yes after a headless review: a file changed in between is refused, not trusted unseen", async () => {
    writeConfig('[exec]\ndeny_read = ["secretdir"]\n');
    try {
      const shown = await vak(["trust"]);
      expect(shown.code).toBe(125);
      const told = /run `(vak trust --yes --sha256 ([0-9a-f]{64}))`/.exec(shown.stderr);
      expect(told, shown.stderr).not.toBeNull();
      expect(shown.stdout).toContain(`(sha256 ${told![2]}), exactly:`);
      // Between the review and the --yes, the repository changes (a pull, a checkout).
      writeConfig(`[exec]\nallow_read = ["${s.outside}"]\n`);
      const r = await vak(["trust", "--yes", "--sha256", told![2]!]);
      expect(r.code).toBe(125);
      expect(r.stderr).toMatch(/config\.toml is not the content you reviewed: its sha256 is now [0-9a-f]{64}, not [0-9a-f]{64}; nothing was trusted/);
      expect(recorded()).not.toContain("config.toml");
      // What was reviewed, unchanged, is trusted by the same command.
      writeConfig('[exec]\ndeny_read = ["secretdir"]\n');
      expect((await vak(["trust", "--yes", "--sha256", told![2]!])).code).toBe(0);
      expect(recorded()).toContain(told![2]);
    } finally {
      await vak(["trust", "--revoke"]);
      rmSync(join(s.ws, ".vak"), { recursive: true, force: true });
    }
  });

  it("an untrusted config's [exec] limit does not stop every agent session here (vak run), blamed on the user's flags", async () => {
    writeConfig('[exec]\ntimeout = 60\nmax_procs = 50\ndeny_read = ["secretdir"]\n');
    mkdirSync(join(s.ws, "secretdir"), { recursive: true });
    writeFileSync(join(s.ws, "secretdir", "s"), "REPO-SECRET\n");
    const script = join(s.root, "limits-script.json");
    writeFileSync(script, JSON.stringify({ turns: [{ tool_calls: [{ name: "exec", args: { command: "cat secretdir/s; echo ran" } }] }, { text: "done" }] }));
    try {
      const r = await vak(["run", "--model", `scripted:${script}`, "--approve", "exec", "go"]);
      expect(r.stderr).not.toMatch(/apply to `vak exec` only/);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).toContain("ran");
      // Its deny rule still holds in the session.
      expect(r.stdout + r.stderr).not.toContain("REPO-SECRET");
    } finally {
      rmSync(join(s.ws, ".vak"), { recursive: true, force: true });
      rmSync(join(s.ws, "secretdir"), { recursive: true, force: true });
    }
  });

  it("trusting a repository config does not lift its [exec] deny rules from an agent session (vak run read what it could not while untrusted)", async () => {
    writeConfig('[exec]\ndeny_read = ["secretdir"]\n');
    mkdirSync(join(s.ws, "secretdir"), { recursive: true });
    writeFileSync(join(s.ws, "secretdir", "s"), "REPO-SECRET\n");
    const script = join(s.root, "deny-script.json");
    writeFileSync(script, JSON.stringify({ turns: [{ tool_calls: [{ name: "exec", args: { command: "cat secretdir/s; echo ran" } }] }, { text: "done" }] }));
    const session = () => vak(["run", "--model", `scripted:${script}`, "--approve", "exec", "go"]);
    try {
      const untrusted = await session();
      expect(untrusted.code, untrusted.stderr).toBe(0);
      expect(untrusted.stdout + untrusted.stderr).toContain("ran");
      expect(untrusted.stdout + untrusted.stderr).not.toContain("REPO-SECRET");
      expect((await vak(["trust", "--yes"])).code).toBe(0);
      const trusted = await session();
      expect(trusted.code, trusted.stderr).toBe(0);
      expect(trusted.stdout + trusted.stderr).toContain("ran");
      expect(trusted.stdout + trusted.stderr).not.toContain("REPO-SECRET");
    } finally {
      await vak(["trust", "--revoke"]);
      rmSync(join(s.ws, ".vak"), { recursive: true, force: true });
      rmSync(join(s.ws, "secretdir"), { recursive: true, force: true });
    }
  });

  it("a repository config of thousands of profiles that extend one another: vak trust answers in seconds (it ran for minutes)", async () => {
    // Each run is killed at 40 s: before, the chain took more than two minutes, and the wide one as long.
    const trust = () => runVak(["trust"], { cwd: s.ws, env, input: "", wrapper: ["timeout", "-s", "KILL", "40"] });
    // A chain 7000 deep, within the size limit.
    const chain = ['[profiles.p0]\nallow_read = ["/tmp"]'];
    for (let i = 1; i < 7000; i++) chain.push(`[profiles.p${i}]\nextends = "p${i - 1}"`);
    writeConfig(chain.join("\n") + "\n");
    try {
      const deep = await trust();
      expect(deep.code, deep.stderr).toBe(125);
      expect(deep.stderr).toMatch(/config\.toml:\d+: profiles\.p\d+\.extends: extends nests deeper than 32 profiles: p\d+ → p\d+ → p\d+ → … → p\d+/);
      // Wide instead of deep: 16 layers of 40 profiles, each extending the whole next layer.
      const wide: string[] = [];
      for (let l = 0; l < 16; l++)
        for (let i = 0; i < 40; i++)
          wide.push(`[profiles.l${l}p${i}]`, l < 15 ? `extends = [${Array.from({ length: 40 }, (_, j) => `"l${l + 1}p${j}"`).join(",")}]` : 'allow_read = ["/tmp"]');
      writeConfig(wide.join("\n") + "\n");
      const broad = await trust();
      expect(broad.code, broad.stderr).toBe(125);
      expect(broad.stderr).toMatch(/not a terminal, so nothing was trusted/);
      expect(broad.stdout).toContain("--profile l0p0 (line 1):");
    } finally {
      rmSync(join(s.ws, ".vak"), { recursive: true, force: true });
    }
  }, 120_000);

  it("a home directory reached through a link (/home a link to /data/home): no config above it applies, in it or below it", async () => {
    const homes = join(s.root, "data", "homes");
    mkdirSync(join(homes, "alice", "proj"), { recursive: true });
    symlinkSync(homes, join(s.root, "homes-link"));
    const home = join(s.root, "homes-link", "alice");
    // The directory that holds everyone's home: no repository of alice's.
    writeConfig('[exec]\nfuture_key = 1\ndeny_read = ["."]\n', homes);
    try {
      for (const cwd of [join(home, "proj"), home]) {
        const r = await runVak(["exec", "--", "sh", "-c", "echo ran"], { cwd, env: { ...env, HOME: home }, input: "" });
        expect(r.stderr, cwd).not.toContain(".vak");
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toBe("ran\n");
      }
    } finally {
      rmSync(join(homes, ".vak"), { recursive: true, force: true });
    }
  });

  // git's CVE-2022-24765: a .git that another user made in a shared directory above the work (C:\.git, /tmp/.git).
  it.skipIf(process.getuid?.() !== 0)("a .vak another user planted in a shared directory above the workspace (/tmp/.vak) is not this user's repository config", async () => {
    const shared = join(s.root, "shared");
    mkdirSync(join(shared, "mine", "work"), { recursive: true });
    chmodSync(shared, 0o1777);
    // A stranger (uid 65534) writes what refuses every run below it, and what would narrow them as they chose.
    writeConfig('[exec]\nfuture_key = 1\ndeny_read = ["."]\n', shared);
    chownSync(join(shared, ".vak"), 65534, 65534);
    chownSync(join(shared, ".vak", "config.toml"), 65534, 65534);
    try {
      const r = await vak(["exec", "--", "sh", "-c", "echo ran"], { cwd: join(shared, "mine", "work") });
      expect(r.stderr).not.toContain(".vak");
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe("ran\n");
      expect((await vak(["trust"], { cwd: join(shared, "mine", "work") })).stderr).toMatch(/no \.vak\/config\.toml in/);
      // A config its directory's own owner made is that owner's repository's, whoever runs vak there (a checkout
      // of another uid in CI): it still applies, and so it is still refused when it cannot be read.
      const theirs = join(s.root, "theirs");
      mkdirSync(join(theirs, "sub"), { recursive: true });
      writeConfig('[exec]\nfuture_key = 1\n', theirs);
      for (const p of [theirs, join(theirs, ".vak"), join(theirs, ".vak", "config.toml")]) chownSync(p, 65534, 65534);
      const t = await vak(["exec", "--", "sh", "-c", "echo ran"], { cwd: join(theirs, "sub") });
      expect(t.code).toBe(125);
      expect(t.stderr).toMatch(/theirs\/\.vak\/config\.toml:2: exec\.future_key: unknown key/);
    } finally {
      rmSync(join(shared, ".vak"), { recursive: true, force: true });
    }
  });
});
