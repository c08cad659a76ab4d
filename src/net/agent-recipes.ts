/**
 * How third-party agent CLIs read their provider key and base URL, as data:
 * enough to run each inside `vak exec` with only its API host granted and its
 * key held by the gate (a placeholder inside). Presets (built-in profiles)
 * build on these; `execArgs` is the command line the README shows.
 *
 * Two ways, both tested (test/net/agent-recipes.test.ts with the providers'
 * SDKs, test/net/agent-clis.test.ts with the real CLIs at the versions below):
 * - terminated TLS: the CLI talks HTTPS to the real host through the gate,
 *   which is trusted inside (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, …) and puts
 *   the key in the header;
 * - an endpoint: the CLI's base URL is a plain-HTTP address on the relay, and
 *   the gate speaks TLS to the real host. For a CLI that trusts no added CA.
 */
export interface AgentRecipe {
  /** The command. */
  cli: string;
  /** The npm package it ships in, and the version these recipes were tested with (Vak installs nothing). */
  npm: string;
  tested: string;
  /** The variable it reads its key from; inside, it holds a placeholder. */
  keyEnv: string;
  /** The header the key travels in, as the provider's API expects it. */
  header: string;
  /** The variable Vak puts the endpoint's base URL in, and the real base URL. */
  baseUrlEnv: string;
  baseUrl: string;
  /** Arguments that point the CLI at the base URL when it reads no variable for it ("{url}" is replaced). */
  baseUrlArgs?: readonly string[];
  /** The API hosts to grant: nothing else. */
  hosts: readonly string[];
  /** A one-shot, non-interactive run ("{prompt}" is replaced). */
  oneShot: readonly string[];
  /** Files (relative to HOME) it needs to run headless with an API key. */
  homeFiles?: Readonly<Record<string, string>>;
  /** Variables that stop it calling home (telemetry, update checks): those calls would be refused anyway. */
  quietEnv?: Readonly<Record<string, string>>;
}

export const AGENT_RECIPES: Readonly<Record<"claude" | "codex" | "gemini", AgentRecipe>> = {
  claude: {
    cli: "claude", npm: "@anthropic-ai/claude-code", tested: "2.1.332", keyEnv: "ANTHROPIC_API_KEY", header: "x-api-key",
    baseUrlEnv: "ANTHROPIC_BASE_URL", baseUrl: "https://api.anthropic.com", hosts: ["api.anthropic.com"],
    oneShot: ["-p", "{prompt}"],
    quietEnv: { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_TELEMETRY: "1", DISABLE_AUTOUPDATER: "1", DISABLE_ERROR_REPORTING: "1" },
  },
  codex: {
    // `codex exec` reads CODEX_API_KEY (OPENAI_API_KEY is for the interactive login), and its base URL from its config.
    cli: "codex", npm: "@openai/codex", tested: "0.171.0", keyEnv: "CODEX_API_KEY", header: "Authorization: Bearer",
    baseUrlEnv: "OPENAI_BASE_URL", baseUrl: "https://api.openai.com/v1", baseUrlArgs: ["-c", 'openai_base_url="{url}"'], hosts: ["api.openai.com"],
    oneShot: ["exec", "--skip-git-repo-check", "{prompt}"],
  },
  gemini: {
    cli: "gemini", npm: "@google/gemini-cli", tested: "0.61.0", keyEnv: "GEMINI_API_KEY", header: "x-goog-api-key",
    baseUrlEnv: "GOOGLE_GEMINI_BASE_URL", baseUrl: "https://generativelanguage.googleapis.com", hosts: ["generativelanguage.googleapis.com"],
    oneShot: ["--skip-trust", "-p", "{prompt}"],
    homeFiles: { ".gemini/settings.json": JSON.stringify({ security: { auth: { selectedType: "gemini-api-key" } }, privacy: { usageStatisticsEnabled: false } }) },
  },
};

/** The `vak exec` flags for a recipe: its hosts granted, its key held by the gate, and with endpoint, its base URL on the relay. */
export function execArgs(r: AgentRecipe, keyRef: string, opts: { endpoint?: boolean } = {}): string[] {
  const hosts = r.hosts.join(",");
  const args = ["--allow-net", hosts, "--secret", `${r.keyEnv}=${keyRef}@${hosts}`];
  if (opts.endpoint) args.push("--endpoint", `${r.baseUrlEnv}=${r.baseUrl}`);
  return args;
}

/** The CLI's own arguments for a one-shot prompt (and, through an endpoint, the base URL where it reads no variable). */
export function cliArgs(r: AgentRecipe, prompt: string, opts: { endpointUrl?: string } = {}): string[] {
  const base = opts.endpointUrl && r.baseUrlArgs ? r.baseUrlArgs.map((a) => a.replace("{url}", opts.endpointUrl!)) : [];
  const shot = r.oneShot.map((a) => a.replace("{prompt}", prompt));
  // Options of a subcommand go after it (codex exec -c …).
  return shot[0] === "exec" ? [shot[0], ...base, ...shot.slice(1)] : [...base, ...shot];
}
