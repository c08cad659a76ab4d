import { loadUserConfig } from "../policy/config.js";
import { VakError } from "../policy/errors.js";
import { checkEnvRecipient } from "./grant.js";
import { parseRef, resolveRefAsync } from "./store.js";

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
    const eq = spec.indexOf("=");
    if (eq <= 0) throw new VakError("bad-input", `--secret ${spec}: write it as NAME=REF (e.g. GITHUB_TOKEN=secret:github)`);
    const name = spec.slice(0, eq);
    checkEnvRecipient(name);
    const at = spec.indexOf("@", eq);
    const hosts = at < 0 ? undefined : spec.slice(at + 1).split(",").filter(Boolean);
    if (hosts && hosts.length === 0) throw new VakError("bad-input", `--secret ${spec}: name the hosts after @ (NAME=REF@api.example.com)`);
    const ref = parseRef(spec.slice(eq + 1, at < 0 ? undefined : at));
    // A cmd: reference's command runs without holding the thread (the resident host serves its other clients meanwhile).
    out.push({ name, ref: ref.text, value: await resolveRefAsync(ref, { commands, env: caller.env, cwd: caller.cwd }), ...(hosts ? { hosts } : {}) });
  }
  return out;
}
