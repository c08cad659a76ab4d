/**
 * The model providers Vak knows without a config, and which environment
 * variables hold provider keys: the built-in ones' and every configured
 * provider's api_key_env. Imports nothing (not the SDKs, not zod), so that
 * `vak exec` can check an --allow-env against it cheaply.
 */
export interface BuiltInProvider {
  kind: "openai" | "anthropic";
  baseURL: string;
  keyEnv?: string | undefined;
}

export const BUILT_IN_PROVIDERS: Readonly<Record<string, BuiltInProvider>> = {
  openai: { kind: "openai", baseURL: "https://api.openai.com/v1", keyEnv: "OPENAI_API_KEY" },
  anthropic: { kind: "anthropic", baseURL: "https://api.anthropic.com", keyEnv: "ANTHROPIC_API_KEY" },
  ollama: { kind: "openai", baseURL: "http://127.0.0.1:11434/v1" },
};

/**
 * Variables the agent CLIs read a provider's key from (Codex, Gemini CLI):
 * keys too, whichever program reads them, so --allow-env and a preset's
 * allow_env pass them no more than OPENAI_API_KEY.
 */
export const AGENT_CLI_KEY_ENV: readonly string[] = ["CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"];

/** Every variable known to hold a provider's key without a config: the built-in providers' and the agent CLIs'. */
export const KNOWN_KEY_ENV: readonly string[] = [
  ...Object.values(BUILT_IN_PROVIDERS).flatMap((p) => (p.keyEnv ? [p.keyEnv] : [])),
  ...AGENT_CLI_KEY_ENV,
];

/** Provider keys the host holds: the variables that name them, and the values set in the environment. */
export interface ProviderKeys {
  vars: readonly string[];
  values: readonly string[];
}

/** Values shorter than this are not compared (they would match ordinary text); no real provider key is this short. */
const MIN_KEY = 8;

export function providerKeys(config: { providers: Readonly<Record<string, { api_key_env?: string | undefined }>> }, env: NodeJS.ProcessEnv): ProviderKeys {
  const vars = new Set<string>();
  for (const v of KNOWN_KEY_ENV) vars.add(v);
  for (const p of Object.values(config.providers)) if (p.api_key_env) vars.add(p.api_key_env);
  const values = [...vars].map((v) => env[v]).filter((v): v is string => typeof v === "string" && v.length >= MIN_KEY);
  return { vars: [...vars].sort(), values: [...new Set(values)] };
}

/** Why handing this variable (and its value) to a sandboxed component would give it a provider key, if it would. */
export function providerKeyProblem(name: string, value: string | undefined, keys: ProviderKeys): string | undefined {
  if (keys.vars.includes(name)) return `${name} is the environment variable of a model provider's key`;
  if (value !== undefined && keys.values.some((k) => k.length >= MIN_KEY && value.includes(k))) return `${name} holds the value of a model provider's key`;
  return undefined;
}
