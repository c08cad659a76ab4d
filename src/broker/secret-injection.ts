import type { HeaderSecret } from "../net/egress-gate.js";
import type { PlaceholderSecret } from "../net/placeholders.js";
import { unhandled } from "../protocol/unhandled.js";
import { describeRecipient, type InjectedSecret, placeholderFor } from "../secrets/grant.js";

/** A secret put into a command's environment, for its secret.used record. */
export interface EnvUse {
  name: string;
  recipient: string;
  component: string;
}

/**
 * Puts a component's secrets where their recipients say, for one command: an
 * env recipient's value into the command's environment (each such use is
 * returned, to be recorded); a header recipient's value to the egress gate,
 * which sets it on the way out and records each use, while the command sees
 * at most a placeholder; a placeholder recipient's placeholder into the
 * environment and its value to the gate, which replaces the one with the other
 * in request headers to its hosts (over HTTPS too) and records each use.
 * Changes env; returns what the gate needs.
 */
export function injectSecrets(env: Record<string, string>, secrets: readonly InjectedSecret[], component: string): { headers: HeaderSecret[]; placeholders: PlaceholderSecret[]; envUses: EnvUse[] } {
  const headers: HeaderSecret[] = [];
  const placeholders: PlaceholderSecret[] = [];
  const envUses: EnvUse[] = [];
  for (const sec of secrets) {
    const r = sec.recipient;
    switch (r.kind) {
      case "env":
        env[r.name] = sec.value;
        envUses.push({ name: sec.ref, recipient: describeRecipient(r), component });
        break;
      case "header":
        headers.push({ ref: sec.ref, header: r.header, value: sec.value, hosts: r.hosts, placeholder: placeholderFor(sec.ref) });
        if (r.placeholderEnv) env[r.placeholderEnv] = placeholderFor(sec.ref);
        break;
      case "placeholder": {
        const placeholder = placeholderFor(sec.ref);
        placeholders.push({ ref: sec.ref, placeholder, value: sec.value, hosts: r.hosts });
        env[r.name] = placeholder;
        break;
      }
      default:
        unhandled(r, "secret recipient");
    }
  }
  return { headers, placeholders, envUses };
}

/**
 * Why a component's commands would get a withheld value (a provider key of
 * the host's) in their environment, through an env grant or a secret, if they
 * would: the environment a command gets, with its secrets put in, is searched
 * for each value.
 */
export function withheldIn(planEnv: Readonly<Record<string, string>>, secrets: readonly InjectedSecret[], withheld: readonly string[], component: string): string | undefined {
  const values = withheld.filter((w) => w.length >= 8);
  if (!values.length) return undefined;
  const env = { ...planEnv };
  const { envUses } = injectSecrets(env, secrets, component);
  for (const [name, value] of Object.entries(env)) {
    if (!values.some((w) => value.includes(w))) continue;
    const secret = envUses.find((u) => u.recipient === `env ${name}`);
    return `${component}: ${secret ? `the secret ${secret.name} (for ${name})` : `the environment grant ${name}`} would give its commands the value of a model provider's key; the key stays with the host: grant another variable, or give the component its own key`;
  }
  return undefined;
}
