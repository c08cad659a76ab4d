import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentFake, PONG, type AgentFake } from "../support/agent-fakes.js";
import { AGENT_CLIS, AGENT_CLIS_REAL, agentCliInstalled, requireAgentClis } from "../support/agent-clis.js";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// The agent CLIs' presets, with the real CLIs from npm (Codex 0.171, Claude
// Code 2.1, Gemini CLI 0.61) against a loopback server that speaks each
// provider's wire format. .ci/run installs them into .cache/agent-clis
// (about 900 MB, so not as devDependencies); where they are not installed,
// these tests are skipped, and say so (under .ci/run, which sets
// VAK_AGENT_CLIS_REQUIRED, a missing one fails instead).
const WHERE = AGENT_CLIS;
const installed = agentCliInstalled;
const CLIS = AGENT_CLIS_REAL;
requireAgentClis(["codex", "claude", "gemini"]);
const bin = (cli: string) => join(CLIS, "node_modules/.bin", cli);
const KEY = "test-key-0123456789abcdef";

// The model asks the CLI's own shell tool to run this: it must run (the CLI's nested sandbox is off and
// Vak's holds it), write in the workspace, and fail to change the CLI's configuration on the host.
const COMMAND = (config: string) => `echo made-by-the-agent > agent-was-here.txt; (echo '# tampered' >> "${config}") 2>/dev/null && echo CONFIG-CHANGED || echo config-is-read-only`;

/** Whether this process may make a network namespace (root), to run a CLI on the host with nothing reachable. */
const netnsOfOwn = spawnSync("unshare", ["--net", "--", "true"]).status === 0;

/** Session files under dir (Codex's rollouts), links not followed. */
const rollouts = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && e.name.endsWith(".jsonl")).map((e) => join(e.parentPath, e.name)) : [];

/** Runs the host's own codex, unsandboxed, in a new network namespace (only its own loopback), until done() or 60 s. */
async function hostCodex(args: string[], env: Record<string, string>, done: () => boolean): Promise<void> {
  const child = spawn("unshare", ["--net", "--", bin("codex"), ...args], { detached: true, stdio: "ignore", env: baseEnv(env) });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  for (let i = 0; i < 300 && child.exitCode === null && !done(); i++) await new Promise((r) => setTimeout(r, 200));
  // Its own process group: the npm wrapper and the native binary it started, and nothing else.
  try {
    process.kill(-child.pid!, "SIGKILL");
  } catch {
    // gone already
  }
  await exited;
}

describe.skipIf(!installed("codex") || !installed("claude"))(`the agent CLI presets, with the real CLIs (from ${WHERE})`, () => {
  let s: Scratch;
  let home: string;
  let fake: AgentFake;
  beforeAll(() => {
    s = scratch();
    home = join(s.root, "home");
    mkdirSync(home);
  });
  afterAll(async () => {
    await fake?.close();
    s.cleanup();
  });

  const vak = (args: string[], env: Record<string, string>) =>
    runVak(["exec", "--allow-read", CLIS, "--allow-net", `127.0.0.1:${fake.port}`, ...args], { cwd: s.ws, env: baseEnv({ HOME: home, ...env }) });

  it("codex: runs a command for the model with its own sandbox off, its config read-only, its session kept, nothing sent home", async () => {
    const config = join(home, ".codex", "config.toml");
    mkdirSync(join(home, ".codex"), { recursive: true });
    writeFileSync(config, 'model = "gpt-test"\n');
    fake = await agentFake({ command: COMMAND(config) });
    // The key is a provider's: on the record as a secret (the preset does not pass it by name).
    const r = await vak(
      ["--profile", "codex", "--secret", "CODEX_API_KEY=env:CODEX_API_KEY", "--", bin("codex"), "exec", "--skip-git-repo-check", "-c", `openai_base_url="${fake.url}/v1"`, "say pong"],
      { CODEX_API_KEY: KEY },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain("sandbox: danger-full-access");
    expect(readFileSync(join(s.ws, "agent-was-here.txt"), "utf8")).toBe("made-by-the-agent\n");
    expect(r.stdout).toContain("config-is-read-only");
    expect(readFileSync(config, "utf8")).toBe('model = "gpt-test"\n');
    expect(fake.seen.some((x) => x.headers.authorization === `Bearer ${KEY}`)).toBe(true);
    const sessions = join(home, ".codex", "sessions");
    expect(readdirSync(sessions, { recursive: true }).some((f) => String(f).endsWith(".jsonl"))).toBe(true);
    // Telemetry, update checks and plugins off: nothing tried a host outside the grants.
    expect(r.stderr).not.toMatch(/refused CONNECT/);
    await fake.close();
  }, 180_000);

  it.skipIf(!netnsOfOwn)("codex: a session cannot leave a link in ~/.codex/sessions through which the host's next Codex writes its session where the session chose", async () => {
    // Codex 0.171 on the host: create_dir_all(sessions/YYYY/MM/DD), then its rollout opened O_RDWR|O_CREAT|O_APPEND.
    const victim = join(s.root, "victim");
    mkdirSync(victim);
    // The session's own rollout is in today's directory already: it moves that aside and leaves a link in its place.
    fake = await agentFake({ command: `d=${home}/.codex/sessions/$(date +%Y/%m/%d); mv $d $d.kept; ln -s ${victim} $d && echo LINK-PLANTED || echo no-link` });
    const r = await vak(
      ["--profile", "codex", "--secret", "CODEX_API_KEY=env:CODEX_API_KEY", "--", bin("codex"), "exec", "--skip-git-repo-check", "-c", `openai_base_url="${fake.url}/v1"`, "plant it"],
      { CODEX_API_KEY: KEY },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.stringify(fake.seen.map((x) => x.body.input))).toContain("no-link");
    await fake.close();
    // Later, the user's own Codex on the host: in a network namespace of its own (nothing can leave), its provider
    // unreachable. It writes its session before it asks the provider; it is stopped once it has.
    const sessions = join(home, ".codex", "sessions");
    const before = rollouts(sessions).length;
    await hostCodex(["exec", "--skip-git-repo-check", "-c", 'openai_base_url="http://127.0.0.1:9/v1"', "hello"], { HOME: home, CODEX_API_KEY: KEY },
      () => rollouts(sessions).length > before || readdirSync(victim).length > 0);
    expect(readdirSync(victim)).toEqual([]);
    expect(rollouts(sessions).length).toBe(before + 1);
  }, 180_000);

  it("claude: runs a command for the model, its settings read-only, its ~/.claude.json a copy without credentials", async () => {
    const settings = join(home, ".claude", "settings.json");
    mkdirSync(join(home, ".claude"), { recursive: true });
    writeFileSync(settings, JSON.stringify({ sandbox: { enabled: true } }) + "\n");
    writeFileSync(join(home, ".claude.json"), JSON.stringify({ numStartups: 1, primaryApiKey: "sk-ant-api03-in-the-file", hasCompletedOnboarding: true }));
    fake = await agentFake({ command: `${COMMAND(settings)}; grep -c sk-ant-api03-in-the-file ~/.claude.json || echo no-key-in-the-copy` });
    // The key is a provider's: on the record as a secret (the preset cannot pass it by --allow-env).
    const r = await vak(["--profile", "claude", "--secret", "ANTHROPIC_API_KEY=env:ANTHROPIC_API_KEY", "--", bin("claude"), "-p", "say pong", "--allowedTools", "Bash"], { ANTHROPIC_API_KEY: KEY, ANTHROPIC_BASE_URL: fake.url });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(s.ws, "agent-was-here.txt"), "utf8")).toBe("made-by-the-agent\n");
    const results = JSON.stringify(fake.seen.map((x) => x.body.messages));
    expect(results).toContain("config-is-read-only");
    expect(results).toContain("no-key-in-the-copy");
    expect(readFileSync(settings, "utf8")).toBe(JSON.stringify({ sandbox: { enabled: true } }) + "\n");
    expect(fake.seen.some((x) => x.headers["x-api-key"] === KEY)).toBe(true);
    // Telemetry, error reports and update checks off: no host outside the preset's grants was tried (2.1.332 tries
    // none at all). With an API key, Claude Code 1.0.128 also asked api.anthropic.com, at exit: its metrics exporter's opt-out check (GET
    // /api/claude_code/organizations/metrics_enabled, fixed URL, x-api-key; `claude -p --debug` logs "Failed to
    // check metrics opt-out status"), which no variable turns off (README, "Third-party agent CLIs"). It is the
    // preset's own grant, refused here only because no name resolves on this machine; any other host is a failure.
    const tried = [...r.stderr.matchAll(/refused CONNECT ([^\s:]+:\d+)/g)].map((m) => m[1]);
    expect(tried.filter((h) => h !== "api.anthropic.com:443")).toEqual([]);
    await fake.close();
  }, 180_000);

  it.skipIf(!installed("gemini"))("gemini: answers with the key given as a secret, its own sandbox and telemetry off", async () => {
    fake = await agentFake();
    const r = await vak(["--profile", "gemini", "--secret", "GEMINI_API_KEY=env:GEMINI_API_KEY", "--", bin("gemini"), "--skip-trust", "-p", "say pong"], { GEMINI_API_KEY: KEY, GOOGLE_GEMINI_BASE_URL: fake.url });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(PONG);
    expect(fake.seen.some((x) => x.headers["x-goog-api-key"] === KEY)).toBe(true);
    expect(r.stderr).not.toMatch(/refused CONNECT/);
    // The preset's system defaults use 0.61's names: a deprecated one is a warning on every run that the user cannot act on.
    expect(r.stderr).not.toMatch(/deprecated settings/);
    await fake.close();
  }, 180_000);

  it("without the preset, the CLI is told which variables it lacks and where it lives", async () => {
    fake = await agentFake();
    const r = await runVak(["exec", "--", "codex", "--version"], { cwd: s.ws, env: baseEnv({ HOME: home, CODEX_API_KEY: KEY, OPENAI_BASE_URL: "http://127.0.0.1:9/v1", PATH: `${join(CLIS, "node_modules/.bin")}:/usr/bin:/bin` }) });
    expect(r.code).toBe(127);
    expect(r.stderr).toMatch(/codex: not found in the sandbox; on the host it is .*node_modules\/\.bin\/codex.*--allow-read/);
    expect(r.stderr).toMatch(/codex may read OPENAI_BASE_URL\b.*not passed.*--profile codex/);
    expect(r.stderr).not.toContain(KEY);
    await fake.close();
  });
});
