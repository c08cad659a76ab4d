import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compose, describeSource, type ComposeInput } from "../../src/policy/compose.js";
import { expandValue } from "../../src/policy/expand.js";
import { allPresets, loadPreset, presetNames } from "../../src/policy/presets.js";
import { KNOWN_KEY_ENV } from "../../src/model/provider-keys.js";
import { parseProfilesFile, USER_CONFIG_SECTIONS } from "../../src/policy/profiles-file.js";
import { UserConfigSchema } from "../../src/policy/config.js";
import { stripCredentials } from "../../src/policy/strip-credentials.js";
import { tomlWhere } from "../../src/policy/toml-where.js";

describe("a config file's profile tables are checked, naming the file, the line and the key", () => {
  const bad: [string, string, RegExp][] = [
    ["an unknown key", `[exec]\nallow_read = ["a"]\nalow_write = ["b"]\n`, /cfg\.toml:3: exec\.alow_write: unknown key; the keys are/],
    ["an unknown key in a profile", `[profiles.web]\ndescription = "x"\n\nallow_nett = ["x"]\n`, /cfg\.toml:4: profiles\.web\.allow_nett: unknown key/],
    ["an unknown section", `[exec]\n\n[execs]\nallow_read = ["a"]\n`, /cfg\.toml:3: execs: unknown section/],
    ["full access as a default", `[exec]\nmode = "full-access"\n`, /cfg\.toml:2: exec\.mode: full access is never a default/],
    ["a list that is a string", `[exec]\nallow_read = "~/x"\n`, /cfg\.toml:2: exec\.allow_read: must be a list of strings/],
    ["extends in [exec]", `[exec]\nextends = ["git"]\n`, /cfg\.toml:2: exec\.extends: `extends` belongs in a \[profiles\.NAME\] table/],
    ["profiles in a profile", `[profiles.a]\nprofiles = ["git"]\n`, /cfg\.toml:2: profiles\.a\.profiles: a profile adds to others with `extends`/],
    ["PATH passed by name", `[exec]\nallow_env = ["PATH"]\n`, /cfg\.toml:2: exec\.allow_env: "PATH": PATH inside is always the host's PATH less the directories/],
    ["HOME set", `[profiles.a]\nset_env = { HOME = "/x" }\n`, /cfg\.toml:2: profiles\.a\.set_env\.HOME: HOME describes the sandbox/],
    ["the proxy set", `[profiles.a]\nset_env = { HTTPS_PROXY = "http://evil" }\n`, /set_env\.HTTPS_PROXY: HTTPS_PROXY is Vak's/],
    ["a file in /proc", `[profiles.a]\nfiles = { "/proc/self/x" = "y" }\n`, /files\.\/proc\/self\/x: \/proc, \/dev and \/sys are the kernel's/],
    ["a relative file path", `[profiles.a]\nfiles = { "etc/x" = "y" }\n`, /must be an absolute path/],
    ["a limit that is neither a number nor a duration", `[exec]\ntimeout = true\n`, /cfg\.toml:2: exec\.timeout: must be a positive whole number of seconds, or a string such as "10m"/],
    ["a size that means two things", `[exec]\n\nmax_memory = "50MB"\n`, /cfg\.toml:3: exec\.max_memory: "50MB": ambiguous \(MB means 1000\^n to some tools and 1024\^n to others\): write 50M or 50MiB/],
    ["a size with an unknown unit", `[profiles.a]\nmax_output = "1Q"\n`, /cfg\.toml:2: profiles\.a\.max_output: "1Q": unknown unit 'Q'; sizes take K, M, G or T/],
    ["a duration in upper case", `[exec]\ntimeout = "10M"\n`, /cfg\.toml:2: exec\.timeout: "10M": not a duration: write seconds, or parts with ms, s, m, h or d/],
    ["CPU time that is not whole seconds", `[exec]\nmax_cpu = "1.5s"\n`, /cfg\.toml:2: exec\.max_cpu: "1.5s": not a whole number of seconds/],
    ["a count as a string", `[exec]\nmax_procs = "64"\n`, /cfg\.toml:2: exec\.max_procs: must be a positive whole number$/],
    ["extends that is not a name", `[profiles.a]\nextends = "a b"\n`, /cfg\.toml:2: profiles\.a\.extends: "a b": not a name/],
    ["a secret without a reference", `[exec]\nsecrets = ["TOKEN"]\n`, /exec\.secrets: "TOKEN": write it as NAME=REF/],
    ["a bad profile name", `[profiles."a b"]\n`, /cfg\.toml:1: profiles\.a b: not a profile name/],
    ["not TOML", `[exec\nallow_read = 1\n`, /cfg\.toml:1: not valid TOML/],
  ];
  for (const [title, text, message] of bad) it(title, () => expect(() => parseProfilesFile("/x/cfg.toml", text, "user")).toThrow(message));

  it("limits take the flags' forms: 50M and 1G for sizes, 10m and 1h30m for durations; extends takes one name as a string", () => {
    const f = parseProfilesFile("/x/cfg.toml", `[exec]\nmax_memory = "50M"\nmax_output = "1G"\ntimeout = "10m"\nmax_cpu = "1h30m"\nmax_file_size = 1048576\n\n[profiles.a]\nextends = "git"\ntimeout = "1.5s"\n`, "user");
    expect(f.exec?.body.limits).toEqual({ max_memory: 50 * 1024 ** 2, max_output: 1024 ** 3, timeout: 600, max_cpu: 5400, max_file_size: 1048576 });
    expect(f.profiles.get("a")?.body.extends).toEqual(["git"]);
    expect(f.profiles.get("a")?.body.limits.timeout).toBe(1.5);
  });

  it("in a repository config, a section of the user's config is kept to be named as ignored, and one Vak does not know is an error", () => {
    const f = parseProfilesFile("/r/.vak/config.toml", `[providers.x]\nkind = "openai"\n[mcp_servers.y]\ncommand = "z"\n`, "project");
    expect(f.other).toEqual([{ key: "providers", line: 1 }]);
    expect(() => parseProfilesFile("/r/.vak/config.toml", `[exec]\ndeny_read = ["a"]\n[future]\nx = 1\n`, "project")).toThrow(/config\.toml:3: future: unknown section; a repository config holds \[exec\], \[profiles\.NAME\] and \[mcp_servers\]/);
  });

  it("the sections it knows are the sections of the user's config schema", () => {
    expect([...USER_CONFIG_SECTIONS].sort()).toEqual(Object.keys(UserConfigSchema.shape).sort());
  });

  it("lines are found through dotted keys, quoted names and multi-line strings", () => {
    const where = tomlWhere(`a = 1\n[profiles."my tools"]\ndescription = """\nx = 1\n"""\nallow_read = [\n "x",\n]\nlimits.timeout = 3\n`);
    expect(where(["profiles", "my tools", "allow_read"])).toBe(6);
    expect(where(["profiles", "my tools", "x"])).toBe(2); // inside the string: not a key, so the table's line
    expect(where(["profiles", "my tools", "limits", "timeout"])).toBe(9);
    expect(where(["profiles"])).toBe(2);
  });
});

describe("expansions in a profile's paths", () => {
  const env = { HOME_X: "/h", EMPTY: "" };
  const cases: [string, string | RegExp][] = [
    ["~/.gitconfig", "/home/u/.gitconfig"],
    ["${HOME_X}/a", "/h/a"],
    ["${UNSET:-~/.cargo}/bin", "/home/u/.cargo/bin"],
    ["${EMPTY:-/fallback}", "/fallback"],
    ["${UNSET}", /UNSET is not set/],
    ["${EMPTY}/x", /EMPTY is not set/],
    ["${lower-case}", /not \$\{NAME\}/],
  ];
  for (const [raw, want] of cases)
    it(raw, () => {
      const e = expandValue(raw, env, "/home/u");
      if (typeof want === "string") expect(e).toEqual({ ok: true, value: want });
      else expect(e.ok ? "" : e.why).toMatch(want);
    });
});

describe("Vak's own names in a profile's paths", () => {
  it("${VAK_WORKSPACE} is the run's workspace, whatever the host's environment says", () => {
    expect(expandValue("~/.cache/x${VAK_WORKSPACE}", { VAK_WORKSPACE: "/elsewhere" }, "/home/u", { VAK_WORKSPACE: "/work/repo" })).toEqual({ ok: true, value: "/home/u/.cache/x/work/repo" });
  });
});

describe("composing a run's grants", () => {
  let dir: string;
  let ws: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "vak-compose-"));
    ws = join(dir, "ws");
    for (const d of ["ws", "a", "b", "repo/.vak", "outside"]) mkdirSync(join(dir, d), { recursive: true });
    symlinkSync(join(dir, "outside"), join(dir, "repo", "out-link"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const input = (over: Partial<ComposeInput>, userText = ""): ComposeInput => ({
    flags: { lists: {}, limits: {}, profiles: [] }, user: userText ? parseProfilesFile("/cfg.toml", userText, "user") : undefined, execDefaults: true,
    workspace: ws, env: { FLAG_A: "1", PIP_INDEX_URL: "https://pypi.example/simple", PIP_PASSWORD: "hunter2", PIP_EXTRA: "https://u:p@example/x", PIP_NO_CACHE: "1" }, home: dir,
    preset: (n) => loadPreset(n), presetNames: () => presetNames(), ...over,
  });

  it("flags, named profiles and [exec] add up; each entry says where it came from", () => {
    const c = compose(input({ flags: { lists: { allow_read: [join(dir, "a")] }, limits: {}, profiles: ["mine"] } }, `[exec]\nallow_read = ["~/b"]\n[profiles.mine]\nallow_write = ["~/a"]\n`));
    expect(c.lists.allow_read.map((g) => [g.value, describeSource(g.source)])).toEqual([[join(dir, "a"), "--allow-read"], [join(dir, "b"), "[exec] /cfg.toml:2"]]);
    expect(c.lists.allow_write.map((g) => describeSource(g.source))).toEqual(["profile mine (/cfg.toml:4)"]);
  });

  it("a flag's scalar beats a profile's, a named profile's beats [exec]'s, and among profiles the narrowest wins", () => {
    const text = `[exec]\ntimeout = 100\nmode = "read-only"\n[profiles.p]\ntimeout = 50\n[profiles.q]\ntimeout = 20\nmode = "workspace-write"\n`;
    expect(compose(input({}, text)).limits.timeout?.value).toBe(100);
    expect(compose(input({}, text)).mode).toBe("read-only");
    const named = compose(input({ flags: { lists: {}, limits: {}, profiles: ["p", "q"] } }, text));
    expect(named.limits.timeout?.value).toBe(20);
    expect(named.mode).toBe("workspace-write");
    expect(compose(input({ flags: { lists: {}, limits: { timeout: 500 }, profiles: ["q"] } }, text)).limits.timeout?.value).toBe(500);
  });

  it("extends is followed (the base first), and a cycle or an unknown profile is an error naming the line", () => {
    const c = compose(input({ flags: { lists: {}, limits: {}, profiles: ["top"] } }, `[profiles.top]\nextends = ["mid"]\n[profiles.mid]\nextends = ["git"]\n`));
    expect(c.applied.map((p) => p.name)).toEqual(["git", "mid", "top"]);
    expect(() => compose(input({ flags: { lists: {}, limits: {}, profiles: ["a"] } }, `[profiles.a]\nextends = ["b"]\n[profiles.b]\nextends = ["a"]\n`))).toThrow(/\/cfg\.toml:4: profiles\.b\.extends: extends itself: a → b → a/);
    expect(() => compose(input({ flags: { lists: {}, limits: {}, profiles: ["a"] } }, `[profiles.a]\n\nextends = ["nope"]\n`))).toThrow(/\/cfg\.toml:3: profiles\.a\.extends: nope: no such profile; the profiles are a, cargo, claude/);
    expect(() => compose(input({ flags: { lists: {}, limits: {}, profiles: ["nope"] } }))).toThrow(/--profile nope: no such profile/);
    expect(() => compose(input({}, `[exec]\nprofiles = ["nope"]\n`))).toThrow(/\/cfg\.toml:2: exec\.profiles: nope: no such profile/);
  });

  it("a profile's path that does not exist, or whose variable is not set, is skipped and said; state directories are to be created", () => {
    const c = compose(input({}, `[exec]\nallow_read = ["~/missing", "\${UNSET_VAR}/x", "~/a"]\nstate_dirs = ["~/state/new"]\n`));
    expect(c.lists.allow_read.map((g) => g.value)).toEqual([join(dir, "a")]);
    expect(c.skipped.map((s) => s.why)).toEqual(["does not exist", "UNSET_VAR is not set"]);
    expect(c.create).toEqual([{ path: join(dir, "state/new"), kind: "dir" }]);
    expect(c.lists.allow_write.map((g) => g.value)).toEqual([join(dir, "state/new")]);
    // Kept as state too: a host tool's state, where the sandbox makes no link (decide()'s noLinks).
    expect(c.lists.state_dirs.map((g) => g.value)).toEqual([join(dir, "state/new")]);
  });

  it("an untrusted repository config's state directories are ignored and said: they grant writes", () => {
    const repo = join(dir, "repo");
    const file = parseProfilesFile(join(repo, ".vak/config.toml"), `[exec]\nstate_dirs = ["~/state/new"]\n`, "project");
    const c = compose(input({ project: { file, root: repo, trusted: false } }));
    expect(c.lists.state_dirs).toEqual([]);
    expect(c.lists.allow_write).toEqual([]);
    expect(c.ignored.join("\n")).toMatch(/line 2: state_dirs/);
  });

  it("a variable pattern passes what the host has, but not what looks like a credential", () => {
    const c = compose(input({}, `[exec]\nallow_env = ["PIP_*"]\n`));
    expect(c.lists.allow_env.map((g) => g.value)).toEqual(["PIP_INDEX_URL", "PIP_NO_CACHE"]);
    expect(c.skipped.map((s) => s.value).sort()).toEqual(["PIP_EXTRA", "PIP_PASSWORD"]);
  });

  it("an untrusted repository config only narrows; trusted, it adds and its relative paths stay in the repository", () => {
    const repo = join(dir, "repo");
    const text = `[exec]\nallow_read = ["${join(dir, "a")}"]\ndeny_read = ["secrets"]\ntimeout = 5\nmode = "read-only"\nset_env = { X = "1" }\nprofiles = ["git"]\n[profiles.git]\nallow_read = ["/"]\n[providers.x]\nkind = "openai"\n`;
    const file = parseProfilesFile(join(repo, ".vak/config.toml"), text, "project");
    const untrusted = compose(input({ project: { file, root: repo, trusted: false }, flags: { lists: {}, limits: { timeout: 60 }, profiles: [] } }));
    expect(untrusted.lists.allow_read).toEqual([]);
    expect(untrusted.lists.deny_read.map((g) => g.value)).toEqual([join(repo, "secrets")]);
    expect(untrusted.mode).toBe("read-only");
    expect(untrusted.limits.timeout?.value).toBe(5);
    expect(untrusted.setEnv.size).toBe(0);
    expect(untrusted.applied.map((p) => p.name)).toEqual([]);
    expect(untrusted.ignored[0]).toMatch(/is not trusted: only its deny rules, read-only mode and limits apply; ignored until you review and trust it with `vak trust`:$/);
    expect(untrusted.ignored.slice(1)).toEqual(["  line 2: allow_read", "  line 6: set_env", "  line 7: profiles = [git]", "  line 8: [profiles.git]", "  line 10: [providers], which only your own config can say"]);

    const trusted = compose(input({ project: { file, root: repo, trusted: true } }));
    expect(trusted.lists.allow_read.map((g) => g.value)).toContain(join(dir, "a"));
    expect(trusted.setEnv.get("X")?.value).toBe("1");
    // It cannot shadow a preset: its [profiles.git] is ignored, the preset applies.
    expect(trusted.applied.find((p) => p.name === "git")?.origin).toBe("preset");
    expect(trusted.ignored.join("\n")).toMatch(/\[profiles\.git\] ignored: a preset has that name/);

    const escape = parseProfilesFile(join(repo, ".vak/config.toml"), `[exec]\nallow_read = ["../outside", "out-link"]\n`, "project");
    const e = compose(input({ project: { file: escape, root: repo, trusted: true } }));
    expect(e.lists.allow_read).toEqual([]);
    expect(e.skipped.map((s) => s.why)).toEqual([`outside the repository (${join(dir, "outside")})`, `a link out of the repository (${join(dir, "outside")})`]);
  });
});

describe("credentials are stripped from the files a profile shows that way", () => {
  const cases: [string, string, string][] = [
    ["an npm token", "registry=https://r.example/\n//r.example/:_authToken=npm_abcdefabcdef\n", "registry=https://r.example/\n# (a credential was here; vak removed it: the sandbox never sees it)\n"],
    ["npm's basic auth", "_auth = dXNlcjpwYXNz\n//r/:_password=cGFzcw==\nemail=me@example.com\n", "# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\nemail=me@example.com\n"],
    ["userinfo in an index URL", "[global]\nindex-url = https://user:s3cret@pypi.example/simple\n", "[global]\nindex-url = https://pypi.example/simple\n"],
    ["a token in a URL", "extra-index-url=https://ghp_token@pkgs.example/x\n", "extra-index-url=https://pkgs.example/x\n"],
    ["a password key", "password: hunter2\nusername: me\n", "# (a credential was here; vak removed it: the sandbox never sees it)\nusername: me\n"],
    // npm's ini reader unquotes a key (as JSON), ends a line at a bare \r, and expands ${VAR?} in a key: each still names a token there.
    ["an npm token under a quoted key", `registry=https://r.example/\n"//r.example/:_authToken"=npm_abc\n'//r.example/:_password'=cGFzcw==\n`, "registry=https://r.example/\n# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\n"],
    ["an npm token under a key with JSON escapes", `"//r.example/:_a\\u0075th\\u0054oken"=npm_abc\n`, "# (a credential was here; vak removed it: the sandbox never sees it)\n"],
    ["an npm token after a bare carriage return", "fund=false\r//r.example/:_authToken=npm_abc\n", "# (a credential was here; vak removed it: the sandbox never sees it)\n"],
    ["an npm token under a key split by an empty variable", "//r.example/:_a${X?}u${Y?}th${X?}To${Y?}ken=npm_abc\n", "# (a credential was here; vak removed it: the sandbox never sees it)\n"],
    // The whole password, though it holds an @: the client takes userinfo to the last @ of the authority.
    ["a password with an @ in an index URL", "index-url = https://u:p@ss@pypi.example/simple\n", "index-url = https://pypi.example/simple\n"],
    ["npm's client key, top-level and for a registry", 'key="-----BEGIN PRIVATE KEY-----\\nMII\\n-----END PRIVATE KEY-----"\n//r/:key=MII\ncafile=/etc/ca.pem\n', "# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\ncafile=/etc/ca.pem\n"],
    ["a TOML inline table's keys (a provider's headers, an MCP server's env)", 'model = "m"\nhttp_headers = { "Authorization" = "Bearer abcdefgh" }\nenv = { GITHUB_TOKEN = "x" }\nenv_key = "CORP_API_KEY"\n', 'model = "m"\n# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\nenv_key = "CORP_API_KEY"\n'],
    ["an env variable named _KEY or _PAT, a token's shape, a proxy's user", 'OPENAI_KEY = "x"\nGH_PAT = "y"\nargs = ["ghp_0123456789abcdefABCDEF"]\nproxy = "u:pw@proxy:3128"\njobs = 2\n', "# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\n# (a credential was here; vak removed it: the sandbox never sees it)\njobs = 2\n"],
  ];
  for (const [title, input, want] of cases) it(title, () => expect(stripCredentials(input).text).toBe(want));
  it("keeps lines numbered as on the host", () => expect(stripCredentials("a=1\n_authToken=x\nb=2").removed).toEqual(["line 2"]));
  it("a JSON file loses the keys that name a credential, and stays JSON", () => {
    const s = stripCredentials(JSON.stringify({ numStartups: 3, primaryApiKey: "sk-ant-x", oauthAccount: { accessToken: "t", email: "e" }, mcp: [{ url: "https://u:p@h/x" }] }));
    expect(JSON.parse(s.text)).toEqual({ numStartups: 3, mcp: [{ url: "https://h/x" }] });
    expect(s.removed).toEqual(["key primaryApiKey", "key oauthAccount", "key mcp[0].url"]);
  });
  it("Codex's config.toml keeps the names of variables and the kind of login, and still loses the secrets beside them", () => {
    const R = "# (a credential was here; vak removed it: the sandbox never sees it)";
    const input = [
      'preferred_auth_method = "apikey"',
      "[mcp_servers.gh]",
      'url = "https://api.githubcopilot.com/mcp/"',
      'bearer_token_env_var = "GITHUB_PAT"',
      "[mcp_servers.inline]",
      'linear = { url = "https://mcp.linear.app/mcp", bearer_token_env_var = "LINEAR_TOKEN" }',
      "[model_providers.corp]",
      'env_key = "CORP_API_KEY"',
      'experimental_bearer_token = "corp-secret-1"',
      'bearer_token_env_var = "ghp_0123456789abcdefABCDEF"',
      'leaky = { bearer_token_env_var = "X", token = "corp-secret-2" }',
      "[mcp_servers.env]",
      'env = { MY_ENV_KEY = "corp-secret-3" }',
      "",
    ].join("\n");
    const out = stripCredentials(input).text.split("\n");
    expect(out.slice(0, 8)).toEqual(input.split("\n").slice(0, 8));
    expect(out.slice(8, 11)).toEqual([R, R, R]);
    expect(out[12]).toBe(R);
    expect(out.join("\n")).not.toMatch(/corp-secret|ghp_/);
  });
  it("Gemini CLI's settings.json keeps security.auth's kind of login and switches, and still loses a secret put there", () => {
    const settings = { security: { auth: { selectedType: "oauth-personal", enforcedType: "oauth-personal", useExternal: false }, folderTrust: { enabled: true } }, selectedAuthType: "gemini-api-key", mcpServers: { x: { command: "x" } } };
    expect(JSON.parse(stripCredentials(JSON.stringify(settings)).text)).toEqual(settings);
    const s = stripCredentials(JSON.stringify({ security: { auth: { selectedType: "oauth-personal", apiKey: "gemini-secret-1", token: { type: "bearer", value: "gemini-secret-2" } } } }));
    expect(JSON.parse(s.text)).toEqual({ security: { auth: { selectedType: "oauth-personal", token: { type: "bearer" } } } });
    expect(s.removed).toEqual(["key security.auth.apiKey", "key security.auth.token.value"]);
  });
  it("a JSON file loses a key named like an env variable's credential (GH_PAT) and a token-shaped string in a list, and keeps the rest", () => {
    const s = stripCredentials(JSON.stringify({ mcpServers: { gh: { args: ["--token", "ghp_0123456789abcdefABCDEF"], env: { GH_PAT: "p", LOG_LEVEL: "debug" }, headers: { "X-Trace": "Bearer abcdefgh" } } } }));
    expect(JSON.parse(s.text)).toEqual({ mcpServers: { gh: { args: ["--token", "(vak removed a credential here: the sandbox never sees it)"], env: { LOG_LEVEL: "debug" }, headers: {} } } });
  });
});

describe("the presets that ship with Vak", () => {
  it("each parses, and says what it is for", () => {
    const all = allPresets();
    expect(all.map((p) => p.name)).toEqual(expect.arrayContaining(["git", "node", "npm", "python", "pip", "rust", "cargo", "codex", "claude", "gemini"]));
    for (const p of all) {
      expect(p.body.description, p.name).toBeTruthy();
      expect(p.body.commands.length, p.name).toBeGreaterThan(0);
    }
  });

  it("none passes a credential by a pattern or grants a credential store", () => {
    for (const p of allPresets()) {
      for (const e of p.body.lists.allow_env) expect(e, p.name).not.toMatch(/TOKEN|PASSWORD|SECRET/);
      for (const r of [...p.body.lists.allow_read, ...p.body.lists.allow_write]) expect(r, p.name).not.toMatch(/credentials|creds|\.git-credentials|\.netrc|\.pypirc|auth\.json/);
    }
  });

  it("none passes a model provider's key by name or pattern: the key comes with --secret, a placeholder inside", () => {
    const matches = (pattern: string, name: string) => (pattern.endsWith("*") ? name.startsWith(pattern.slice(0, -1)) : pattern === name);
    for (const p of allPresets())
      for (const e of p.body.lists.allow_env)
        for (const key of KNOWN_KEY_ENV) expect(matches(e, key), `${p.name}: allow_env ${e} passes ${key}`).toBe(false);
    expect(KNOWN_KEY_ENV).toEqual(expect.arrayContaining(["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"]));
  });

  it("none makes writable what the host later runs or installs from: a toolchain's home, cache or install directory, a CLI's shadow git repositories", () => {
    const hostTools = /(^|[/{:-])(\.cargo|CARGO_HOME|\.rustup|RUSTUP_HOME|\.npm|\.nvm|NVM_DIR|\.pyenv|PYENV_ROOT|\.cache\/pip|PIP_CACHE_DIR|VIRTUAL_ENV|\.local|\.gemini\/history)([/}]|$)/;
    for (const p of allPresets())
      for (const w of [...p.body.lists.allow_write, ...p.body.lists.state_dirs, ...p.body.lists.state_files]) expect(w, p.name).not.toMatch(hostTools);
  });

  it("a file in the presets directory that is not a preset is not loaded as one", () => {
    const d = mkdtempSync(join(tmpdir(), "vak-presets-"));
    writeFileSync(join(d, "ok.toml"), `description = "x"\ncommands = ["x"]\n`);
    writeFileSync(join(d, "bad.toml"), `allow_reed = []\n`);
    expect(loadPreset("ok", d)?.body.description).toBe("x");
    expect(() => loadPreset("bad", d)).toThrow(/presets\/bad\.toml:1: allow_reed: unknown key/);
    expect(loadPreset("../etc/passwd", d)).toBeUndefined();
    rmSync(d, { recursive: true, force: true });
  });
});
