/**
 * The spellings a profile may use for a path: `~` and `~/…` for the home
 * directory, `${NAME}` and `${NAME:-fallback}` for a host variable (the
 * fallback may itself start with `~`). A variable that is unset or empty and
 * has no fallback makes the entry not apply (undefined, with the reason), so
 * that `${VIRTUAL_ENV}` grants nothing when no virtual environment is active.
 * Only profiles expand: a flag's path is taken as typed (the shell expanded it).
 * Vak's own names (`vak`) come before the host's: `${VAK_WORKSPACE}` is the
 * run's workspace, for a tool's state kept per workspace, never shared
 * between repositories (the rust preset's cargo home).
 */
export type Expanded = { ok: true; value: string } | { ok: false; why: string; unset?: string };

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

export function expandValue(raw: string, env: NodeJS.ProcessEnv, home: string, vak: Readonly<Record<string, string>> = {}): Expanded {
  // The spelling is checked, not what the variables hold: a value may contain "${" (it is never expanded again).
  if (raw.replace(VAR, "").includes("${")) return { ok: false, why: "a ${…} that is not ${NAME} or ${NAME:-fallback}" };
  let missing: string | undefined;
  const replaced = raw.replace(VAR, (_m, name: string, fallback: string | undefined) => {
    const v = Object.hasOwn(vak, name) ? vak[name] : env[name];
    if (v !== undefined && v !== "") return v;
    if (fallback !== undefined) return tilde(fallback, home);
    missing ??= name;
    return "";
  });
  if (missing) return { ok: false, why: `${missing} is not set`, unset: missing };
  return { ok: true, value: tilde(replaced, home) };
}

function tilde(p: string, home: string): string {
  if (p === "~") return home;
  if (p.startsWith("~/")) return `${home}${p.slice(1)}`;
  return p;
}
