/**
 * The sandbox's environment is an allowlist. Nothing else from the host passes:
 * not API keys, not NODE_OPTIONS, not LD_PRELOAD, not SSH_AUTH_SOCK.
 */

/** A portable environment variable name. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Host variables that carry no authority and that programs expect. */
const SAFE_NAMES = new Set([
  "TERM", "COLORTERM", "TERM_PROGRAM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
  "LANG", "LANGUAGE", "LC_ALL", "TZ", "COLUMNS", "LINES",
]);
const SAFE_PREFIXES = ["LC_"];

/** Directories on the host PATH that are visible inside the view are kept, in order. */
export function sandboxPath(hostPath: string | undefined, visible: (dir: string) => boolean): string {
  const fallback = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];
  const dirs = (hostPath ?? "").split(":").filter((d) => d.startsWith("/") && visible(d));
  for (const d of fallback) if (!dirs.includes(d)) dirs.push(d);
  return dirs.join(":");
}

export interface EnvInput {
  host: NodeJS.ProcessEnv;
  allow: readonly string[];
  home: string;
  user: string;
  cwd: string;
  tmp: string;
  path: string;
  shell: string;
}

export function sandboxEnv(input: EnvInput): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(input.host)) {
    if (v === undefined) continue;
    if (SAFE_NAMES.has(k) || SAFE_PREFIXES.some((p) => k.startsWith(p))) env[k] = v;
  }
  for (const name of input.allow) {
    const v = input.host[name];
    if (v !== undefined) env[name] = v;
  }
  // Set last: these describe the sandbox, and --allow-env cannot point them at the host.
  Object.assign(env, {
    PATH: input.path,
    HOME: input.home,
    USER: input.user,
    LOGNAME: input.user,
    SHELL: input.shell,
    PWD: input.cwd,
    TMPDIR: input.tmp,
  });
  return env;
}
