import { VakError } from "../policy/errors.js";
import type { UserConfig } from "../policy/config.js";
import { AnthropicClient } from "./anthropic.js";
import { OpenAIChatClient } from "./openai.js";
import { BUILT_IN_PROVIDERS } from "./provider-keys.js";
import { ScriptedClient } from "./scripted.js";
import type { ModelClient } from "./types.js";

/**
 * Which model the host calls, and with which key. Only the user's config (the
 * trusted tier) and the host's environment decide: a repository's files are
 * never read for any of this, so they cannot move the base URL or the key.
 */
interface Provider {
  kind: "openai" | "anthropic";
  baseURL: string;
  keyEnv?: string | undefined;
}

const BUILT_IN: Readonly<Record<string, Provider>> = BUILT_IN_PROVIDERS;

export interface ResolvedModel {
  client: ModelClient;
  /** The key's value, for redaction everywhere; never for anything else. */
  key?: string | undefined;
  /** The environment variable it came from: no sandbox may be given it. */
  keyEnv?: string | undefined;
}

export function resolveModel(spec: string | undefined, config: UserConfig, env: NodeJS.ProcessEnv = process.env): ResolvedModel {
  const chosen = spec ?? config.model.default;
  if (!chosen)
    throw new VakError("bad-input", 'no model chosen: pass --model provider:model (e.g. openai:gpt-4.1, anthropic:claude-sonnet-4-5, ollama:llama3.1), or set [model] default in ~/.config/vak/config.toml');
  const colon = chosen.indexOf(":");
  if (colon <= 0 || colon === chosen.length - 1) throw new VakError("bad-input", `--model ${chosen}: write it as provider:model`);
  const name = chosen.slice(0, colon);
  const model = chosen.slice(colon + 1);
  if (name === "scripted") return { client: ScriptedClient.fromFile(model) };
  // Own properties only: "constructor" or "__proto__" is not a provider (the unknown is refused, not looked up on a prototype).
  const fromConfig = Object.hasOwn(config.providers, name) ? config.providers[name] : undefined;
  const p: Provider | undefined = fromConfig ? { kind: fromConfig.kind, baseURL: fromConfig.base_url, keyEnv: fromConfig.api_key_env } : Object.hasOwn(BUILT_IN, name) ? BUILT_IN[name] : undefined;
  if (!p)
    throw new VakError("bad-input", `unknown model provider "${name}"; the built-in ones are ${Object.keys(BUILT_IN).join(", ")}, or add [providers.${name}] to ~/.config/vak/config.toml`);
  const key = p.keyEnv ? env[p.keyEnv] : undefined;
  if (p.keyEnv && !key) throw new VakError("bad-input", `${name}: no API key; set ${p.keyEnv} in the environment vak runs in`);
  if (p.kind === "anthropic") {
    if (!key) throw new VakError("bad-input", `${name}: an Anthropic provider needs api_key_env`);
    return { client: new AnthropicClient({ provider: name, model, baseURL: p.baseURL, apiKey: key }), key, keyEnv: p.keyEnv };
  }
  return { client: new OpenAIChatClient({ provider: name, model, baseURL: p.baseURL, apiKey: key }), key, keyEnv: p.keyEnv };
}
