import { ENV_NAME } from "./env.js";
import { VakError } from "./errors.js";

/**
 * The grammar of a secret given by reference, with no store, zod or resolver behind it, so that a profile's
 * `secrets` are checked where the file is read (profile.ts: an error names file, line and key) and a
 * `--secret` flag where the run starts (src/secrets/env-secrets.ts), by the same rules. A reference is
 * `secret:NAME` (Vak's store), `env:NAME` (the host's environment) or `cmd:NAME` (a command the user
 * configured); a grant is `NAME=REF`, or `NAME=REF@HOST,HOST` for a secret the egress gate holds.
 */
export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;

export type SecretRef = { kind: "secret" | "env" | "cmd"; name: string; text: string };

export function parseRef(text: string): SecretRef {
  const m = /^(secret|env|cmd):(.+)$/.exec(text);
  if (!m) throw new VakError("bad-input", `${text}: a secret reference is secret:NAME, env:NAME or cmd:NAME`);
  const kind = m[1] as SecretRef["kind"];
  const name = m[2]!;
  if (kind === "env" ? !ENV_NAME.test(name) : !SECRET_NAME.test(name)) throw new VakError("bad-input", `${text}: "${name}" is not a valid ${kind === "env" ? "environment variable" : "secret"} name`);
  return { kind, name, text };
}

/** Variables that describe the sandbox: a secret cannot take their place. */
const RESERVED = new Set(["PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "TMPDIR", "LD_PRELOAD", "LD_LIBRARY_PATH", "NODE_OPTIONS", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"]);

export function checkEnvRecipient(name: string): void {
  if (!ENV_NAME.test(name)) throw new VakError("bad-input", `${name}: not an environment variable name`);
  if (RESERVED.has(name)) throw new VakError("bad-input", `${name}: Vak sets this variable itself; give the secret another name`);
}

/** `NAME=REF` or `NAME=REF@HOST,HOST`, checked; `shown` is how a message names it (`--secret X=…`, or the value alone). */
export function parseSecretGrant(spec: string, shown: string = spec): { name: string; ref: SecretRef; hosts?: string[] | undefined } {
  const eq = spec.indexOf("=");
  if (eq <= 0) throw new VakError("bad-input", `${shown}: write it as NAME=REF (e.g. GITHUB_TOKEN=secret:github)`);
  const name = spec.slice(0, eq);
  checkEnvRecipient(name);
  const at = spec.indexOf("@", eq);
  const hosts = at < 0 ? undefined : spec.slice(at + 1).split(",").filter(Boolean);
  if (hosts && hosts.length === 0) throw new VakError("bad-input", `${shown}: name the hosts after @ (NAME=REF@api.example.com)`);
  return { name, ref: parseRef(spec.slice(eq + 1, at < 0 ? undefined : at)), hosts };
}
