import { homedir } from "node:os";
import { join } from "node:path";

/** Where Vak keeps its own config, state and caches (XDG). None of it is ever
 *  reachable from a sandbox, whatever a grant says. */
export function vakDirs(env: NodeJS.ProcessEnv = process.env, home: string = homedir()) {
  const xdg = (name: string, fallback: string) => {
    const v = env[name];
    return v && v.startsWith("/") ? v : join(home, fallback);
  };
  return {
    config: join(xdg("XDG_CONFIG_HOME", ".config"), "vak"),
    state: join(xdg("XDG_STATE_HOME", ".local/state"), "vak"),
    data: join(xdg("XDG_DATA_HOME", ".local/share"), "vak"),
    cache: join(xdg("XDG_CACHE_HOME", ".cache"), "vak"),
    runtime: env.XDG_RUNTIME_DIR?.startsWith("/") ? join(env.XDG_RUNTIME_DIR, "vak") : undefined,
  };
}

export function vakStateDirs(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string[] {
  const d = vakDirs(env, home);
  return [d.config, d.state, d.data, d.cache, ...(d.runtime ? [d.runtime] : [])];
}
