import { loadUserConfig } from "../policy/config.js";
import { parseSecretGrant } from "../policy/secret-ref.js";
import { resolveRefAsync } from "./store.js";

/**
 * `--secret NAME=REF` flags (vak exec, vak mcp): each reference resolved on the
 * host now, for one variable of the command's environment; a missing one
 * stops the run before anything starts. `NAME=REF@HOST,HOST` (vak exec) is a
 * secret the egress gate holds: hosts is set, and NAME gets a placeholder.
 * env: and cmd: references are the caller's (its environment and cwd; the
 * resident host's client's), this process's by default.
 */
export async function envSecrets(specs: readonly string[], caller: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<{ name: string; ref: string; value: string; hosts?: string[] }[]> {
  if (specs.length === 0) return [];
  const commands = loadUserConfig().secret_commands;
  const out: { name: string; ref: string; value: string; hosts?: string[] }[] = [];
  // One at a time, in order: the first that fails stops the run, and no later command runs.
  for (const spec of specs) {
    // A profile's secrets were checked by this grammar where its file was read (profile.ts), naming the line.
    const { name, ref, hosts } = parseSecretGrant(spec, `--secret ${spec}`);
    // A cmd: reference's command runs without holding the thread (the resident host serves its other clients meanwhile).
    out.push({ name, ref: ref.text, value: await resolveRefAsync(ref, { commands, env: caller.env, cwd: caller.cwd }), ...(hosts ? { hosts } : {}) });
  }
  return out;
}
