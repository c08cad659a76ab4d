import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The toolchain and agent CLI presets against a hostile command: what the host holds for each tool (its
 * credentials, wherever the tool keeps them) must not reach the sandbox, and what the preset makes writable must
 * not be what the host's copy of the tool later runs. A home of the test's own, with fake credentials in it.
 */
let s: Scratch;
let home: string;
beforeEach(() => {
  s = scratch();
  home = join(s.root, "home");
  mkdirSync(home);
});
afterEach(() => s.cleanup());

const put = (rel: string, text: string) => {
  const p = join(home, rel);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(p, text);
  return p;
};
const vak = (args: string[], env: Record<string, string> = {}) => runVak(["exec", ...args], { cwd: s.ws, env: baseEnv({ HOME: home, ...env }) });

describe("a preset's writable state holds nothing the host's tool runs", () => {
  it("gemini: a session cannot plant or replace the ripgrep (~/.gemini/tmp/bin/rg) that the host's Gemini CLI runs for every search", async () => {
    // Gemini CLI 0.61: Storage.getGlobalBinDir() is ~/.gemini/tmp/bin; ripGrep.ts runs bin/rg when it exists
    // (downloading it there when not), in preference to any rg on PATH, for every search the model asks for.
    const mark = join(s.root, "PWNED");
    const evil = `#!/bin/sh\\ntouch ${mark}\\n`;
    const rg = put(".gemini/tmp/bin/rg", "#!/bin/sh\nexit 1\n");
    chmodSync(rg, 0o755);
    const tmp = join(home, ".gemini", "tmp");
    const r = await vak(["--profile", "gemini", "--", "sh", "-c",
      `(printf '${evil}' > ${tmp}/bin/rg 2>/dev/null && echo RG-REPLACED || echo rg-read-only); ` +
      `(rm -f ${tmp}/bin/rg 2>/dev/null; printf '${evil}' > ${tmp}/bin/rg.new 2>/dev/null && mv ${tmp}/bin/rg.new ${tmp}/bin/rg 2>/dev/null && echo RG-RENAMED-IN || echo no-rename); ` +
      `(mv ${tmp}/bin ${tmp}/old-bin 2>/dev/null && echo BIN-MOVED || echo bin-stays); ` +
      `(mkdir -p ${tmp}/x && printf '${evil}' > ${tmp}/x/rg && chmod +x ${tmp}/x/rg && mv ${tmp}/x ${tmp}/bin 2>/dev/null && echo BIN-REPLACED || echo no-bin-replaced); ` +
      `mkdir -p ${tmp}/ws/chats && echo '{}' > ${tmp}/ws/chats/session-1.json && echo chat-kept`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("chat-kept");
    for (const bad of ["RG-REPLACED", "RG-RENAMED-IN", "BIN-MOVED", "BIN-REPLACED"]) expect(r.stdout).not.toContain(bad);
    expect(r.stderr).toContain("protected path");
    // The host's Gemini CLI, later, searching: it runs tmp/bin/rg.
    try {
      execFileSync(rg, ["--json", "x", "."], { stdio: "ignore" });
    } catch {
      // the host's own rg here exits 1
    }
    expect(existsSync(mark)).toBe(false);
    expect(readFileSync(rg, "utf8")).toBe("#!/bin/sh\nexit 1\n");
  });

  it("gemini: a session cannot plant Gemini CLI's ripgrep where the host has none yet", async () => {
    const mark = join(s.root, "PWNED");
    mkdirSync(join(home, ".gemini"), { recursive: true });
    const bin = join(home, ".gemini", "tmp", "bin");
    const r = await vak(["--profile", "gemini", "--", "sh", "-c",
      `(mkdir -p ${bin} 2>/dev/null && printf '#!/bin/sh\\ntouch ${mark}\\n' > ${bin}/rg 2>/dev/null && chmod +x ${bin}/rg && echo RG-PLANTED || echo no-rg); echo done`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("done");
    expect(r.stdout).not.toContain("RG-PLANTED");
    expect(existsSync(join(bin, "rg"))).toBe(false);
  });
});

/** What the sandbox can find: every file under the home directory (and `also`), and its environment. */
const everything = (also: string[] = []) => `env; find ~ ${also.join(" ")} -type f 2>/dev/null | while read -r f; do echo "== $f"; cat "$f" 2>/dev/null; done; true`;
const leaked = (out: string, secrets: string[]) => secrets.filter((x) => out.includes(x));

describe("what the host holds for a tool does not reach the sandbox through its preset", () => {
  it("claude, codex, gemini: the settings each CLI reads from the host come without the tokens they hold (settings.json's env, config.toml's headers and MCP env, an extension's .env)", async () => {
    put(".claude/settings.json", JSON.stringify({ permissions: { allow: ["Bash(ls)"] }, env: { ANTHROPIC_AUTH_TOKEN: "claude-env-tok-1", GITHUB_PERSONAL_ACCESS_TOKEN: "claude-env-tok-2" }, apiKeyHelper: "echo claude-helper-tok-3" }));
    put(".codex/config.toml", [
      'model = "gpt-test"',
      "[model_providers.corp]",
      'base_url = "https://llm.corp.invalid/v1"',
      'http_headers = { "Authorization" = "Bearer codex-header-tok-4" }',
      'experimental_bearer_token = "codex-bearer-tok-5"',
      "[mcp_servers.gh]",
      'command = "npx"',
      'env = { GITHUB_TOKEN = "codex-mcp-tok-6" }',
      "",
    ].join("\n"));
    put(".gemini/settings.json", JSON.stringify({ mcpServers: { gh: { command: "npx", env: { GITHUB_PERSONAL_ACCESS_TOKEN: "gemini-mcp-tok-7" }, headers: { Authorization: "Bearer gemini-header-tok-8" } } } }));
    put(".gemini/extensions/ext/gemini-extension.json", JSON.stringify({ name: "ext", version: "1.0.0" }));
    put(".gemini/extensions/ext/.env", "EXT_API_KEY=gemini-ext-tok-9\n");
    const secrets = Array.from({ length: 9 }, (_, i) => `-tok-${i + 1}`);
    const r = await vak(["--profile", "claude", "--profile", "codex", "--profile", "gemini", "--", "sh", "-c", everything()]);
    expect(r.code, r.stderr).toBe(0);
    expect(leaked(r.stdout, secrets)).toEqual([]);
    // What is not a credential is still there for the CLI: its model, its MCP servers' commands, its permissions.
    for (const kept of ['model = "gpt-test"', 'command = "npx"', "Bash(ls)", '"command": "npx"', '"name":"ext"']) expect(r.stdout).toContain(kept);
  });

  it("codex, gemini: the copies keep what names a credential without being one (bearer_token_env_var, security.auth.selectedType), and lose the secret beside it", async () => {
    put(".codex/config.toml", [
      'model = "gpt-test"',
      "[mcp_servers.github]",
      'url = "https://api.githubcopilot.com/mcp/"',
      'bearer_token_env_var = "GITHUB_PAT"',
      "[model_providers.corp]",
      'base_url = "https://llm.corp.invalid/v1"',
      'env_key = "CORP_API_KEY"',
      'experimental_bearer_token = "codex-bearer-tok-1"',
      "",
    ].join("\n"));
    put(".gemini/settings.json", JSON.stringify({ security: { auth: { selectedType: "oauth-personal", apiKey: "gemini-auth-tok-2" } }, general: { vimMode: true } }, null, 2));
    const r = await vak(["--profile", "codex", "--profile", "gemini", "--", "sh", "-c", "cat ~/.codex/config.toml; echo ===; cat ~/.gemini/settings.json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(leaked(r.stdout, ["-tok-1", "-tok-2"])).toEqual([]);
    const [codex, gemini] = r.stdout.split("===\n");
    for (const kept of ['bearer_token_env_var = "GITHUB_PAT"', 'env_key = "CORP_API_KEY"', 'url = "https://api.githubcopilot.com/mcp/"']) expect(codex).toContain(kept);
    expect(JSON.parse(gemini!)).toEqual({ security: { auth: { selectedType: "oauth-personal" } }, general: { vimMode: true } });
  });

  it("claude: ~/.claude.json's MCP servers lose a key under a name without a credential's words (GH_PAT, OPENAI_KEY) and a token-shaped argument", async () => {
    put(".claude.json", JSON.stringify({
      numStartups: 2,
      mcpServers: { gh: { command: "gh-mcp", args: ["--token", "ghp_0123456789abcdefABCDEF0123"], env: { GH_PAT: "pat-value-1", OPENAI_KEY: "openai-value-2", LOG_LEVEL: "debug" } } },
    }));
    const r = await vak(["--profile", "claude", "--", "sh", "-c", "cat ~/.claude.json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(leaked(r.stdout, ["ghp_0123456789abcdefABCDEF0123", "pat-value-1", "openai-value-2"])).toEqual([]);
    expect(JSON.parse(r.stdout)).toMatchObject({ numStartups: 2, mcpServers: { gh: { command: "gh-mcp", env: { LOG_LEVEL: "debug" } } } });
  });

  it("npm: the global npmrc (nvm's Node's, NPM_CONFIG_PREFIX's), ~/.npmrc's client key and npm_config_key do not reach the sandbox", async () => {
    put(".nvm/versions/node/v22.0.0/etc/npmrc", "//r.invalid/:_authToken=nvm-global-tok-1\n");
    put(".nvm/versions/node/v22.0.0/bin/.keep", "");
    // One without a credential is shown as it is: nvm's directory is granted whole, where no copy can be written.
    put(".nvm/versions/node/v20.0.0/etc/npmrc", "fund=false\n");
    put("npm-prefix/etc/npmrc", "//r.invalid/:_authToken=prefix-global-tok-2\n");
    put(".npmrc", 'registry=https://r.invalid/\nkey="-----BEGIN PRIVATE KEY-----\\nclient-key-tok-3\\n-----END PRIVATE KEY-----"\n//r.invalid/:key=client-key-tok-4\n');
    const r = await vak(["--profile", "npm", "--", "sh", "-c", everything()], { NVM_DIR: join(home, ".nvm"), NPM_CONFIG_PREFIX: join(home, "npm-prefix"), npm_config_key: "env-client-key-tok-5" });
    expect(r.code, r.stderr).toBe(0);
    expect(leaked(r.stdout, ["-tok-1", "-tok-2", "-tok-3", "-tok-4", "-tok-5"])).toEqual([]);
    expect(r.stdout).toContain("registry=https://r.invalid/");
    expect(r.stdout).toContain(`== ${join(home, ".nvm/versions/node/v20.0.0/etc/npmrc")}\nfund=false\n`);
  });

  // The machine's own npm and pip read a global config under /usr (npm's PREFIX/etc/npmrc for a Node in /usr or
  // /usr/local, pip's sys.prefix/pip.conf), which the runtime set shows every sandbox as it is. The test puts one there
  // in a mount namespace of its own (a tmpfs over /usr/local/etc), so that the machine's is never touched.
  const usrLocalEtc = existsSync("/usr/local/etc") && spawnSync("unshare", ["-m", "--", "true"]).status === 0;
  it.skipIf(!usrLocalEtc)("npm: a token in the global npmrc under /usr/local (npm config set --global, with Node in /usr/local) does not reach the sandbox", async () => {
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const script = `mount -t tmpfs vak-test /usr/local/etc && printf '//r.invalid/:_authToken=usr-global-tok-1\\n' > /usr/local/etc/npmrc && exec "$@"`;
      const child = spawn("unshare", ["-m", "--propagation", "private", "--", "sh", "-c", script, "sh", process.execPath, VAK_BIN, "exec", "--profile", "npm", "--", "sh", "-c", "cat /usr/local/etc/npmrc; true"],
        { cwd: s.ws, env: baseEnv({ HOME: home }), stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      child.on("close", (code) => resolve({ code, out }));
    });
    expect(r.code, r.out).toBe(0);
    expect(r.out).not.toContain("usr-global-tok-1");
  });

  it("pip: a virtualenv's pip.conf, conda's .condarc, a password with an @ in pip.conf's index URL and a token in PIP_EXTRA_INDEX_URL's query do not reach the sandbox", async () => {
    put("venv/pip.conf", "[global]\nindex-url = https://u:venv-tok-1@pypi.invalid/simple\n");
    put("conda/.condarc", "channels:\n  - https://conda.invalid/t/conda-tok-2/main\n");
    put(".config/pip/pip.conf", "[global]\nindex-url = https://user:p@ss-tok-3@pypi.invalid/simple\n");
    const r = await vak(["--profile", "python", "--", "sh", "-c", everything()], {
      VIRTUAL_ENV: join(home, "venv"), CONDA_PREFIX: join(home, "conda"), PIP_EXTRA_INDEX_URL: "https://pypi.invalid/simple?token=query-tok-4",
    });
    expect(r.code, r.stderr).toBe(0);
    expect(leaked(r.stdout, ["-tok-1", "-tok-2", "-tok-3", "-tok-4"])).toEqual([]);
    expect(r.stdout).toContain("index-url = https://pypi.invalid/simple");
  });

  it("cargo: ~/.cargo/config.toml's [env] token, a registry URL's user:password and a proxy's (in the config, or CARGO_HTTP_PROXY without a scheme) do not reach the sandbox; its other settings do", async () => {
    put(".cargo/config.toml", [
      "[build]",
      'jobs = 2',
      "[env]",
      'SERVICE_TOKEN = "cargo-env-tok-1"',
      "[registries.corp]",
      'index = "sparse+https://u:cargo-index-tok-2@crates.invalid/"',
      "[http]",
      'proxy = "u:cargo-proxy-tok-3@proxy.invalid:3128"',
      "",
    ].join("\n"));
    const r = await vak(["--profile", "rust", "--", "sh", "-c", everything()], { CARGO_HTTP_PROXY: "u:cargo-env-proxy-tok-4@proxy.invalid:3128" });
    expect(r.code, r.stderr).toBe(0);
    expect(leaked(r.stdout, ["-tok-1", "-tok-2", "-tok-3", "-tok-4"])).toEqual([]);
    for (const kept of ["jobs = 2", 'index = "sparse+https://crates.invalid/"']) expect(r.stdout).toContain(kept);
  });
});

describe("a preset's login files stay out where another grant covers them", () => {
  it("run from the home directory (the workspace is HOME): Codex's auth.json, Claude Code's .credentials.json, Gemini CLI's oauth_creds.json, ~/.pypirc and ~/.netrc are not shown", async () => {
    const files: [string, string][] = [
      [".codex/auth.json", '{"tokens":{"access_token":"codex-login-tok-1"}}'],
      [".codex/.credentials.json", '{"gh":{"access_token":"codex-mcp-tok-2"}}'],
      [".claude/.credentials.json", '{"claudeAiOauth":{"accessToken":"claude-login-tok-3"}}'],
      [".gemini/oauth_creds.json", '{"access_token":"gemini-login-tok-4"}'],
      [".gemini/mcp-oauth-tokens.json", '[{"token":{"accessToken":"gemini-mcp-tok-5"}}]'],
      [".pypirc", "[pypi]\npassword = pypirc-tok-6\n"],
      [".netrc", "machine pypi.invalid login u password netrc-tok-7\n"],
    ];
    for (const [rel, text] of files) put(rel, text);
    const r = await runVak(["exec", "--profile", "codex", "--profile", "claude", "--profile", "gemini", "--profile", "python", "--profile", "git", "--", "sh", "-c",
      `for f in ${files.map(([rel]) => `~/${rel}`).join(" ")}; do cat "$f" 2>/dev/null; done; echo done`], { cwd: home, env: baseEnv({ HOME: home }) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("done");
    expect(leaked(r.stdout, Array.from({ length: 7 }, (_, i) => `-tok-${i + 1}`))).toEqual([]);
  });
});
