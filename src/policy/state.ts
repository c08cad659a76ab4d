import { lstatSync, mkdirSync, realpathSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";

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

/**
 * Vak's own directories, as written and as they resolve: a HOME or XDG path
 * through a symlink (/home -> /var/home) must not let a grant of the real
 * path reach them, so both spellings are held back.
 */
export function vakStateDirs(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string[] {
  const d = vakDirs(env, home);
  const dirs = [d.config, d.state, d.data, d.cache, ...(d.runtime ? [d.runtime] : [])];
  return [...new Set([...dirs, ...dirs.map(resolveExisting)])];
}

/** realpath of the longest existing prefix, with the rest appended. */
export function resolveExisting(path: string): string {
  const rest: string[] = [];
  let cur = path;
  for (;;) {
    // A missing prefix is passed over without an exception (one costs more than the lstat): Vak's state
    // directories are mostly absent, and this runs for each on every `vak exec`.
    if (present(cur))
      try {
        return join(realpathSync.native(cur), ...rest.reverse());
      } catch {
        // a dangling link, or a directory that cannot be searched: go up, as for a missing one
      }
    const up = dirname(cur);
    if (up === cur) return path;
    rest.push(basename(cur));
    cur = up;
  }
}

function present(path: string): boolean {
  try {
    return lstatSync(path, { throwIfNoEntry: false }) !== undefined;
  } catch {
    return false;
  }
}

/**
 * A fresh private directory for one egress gate's socket, in Vak's runtime
 * directory (XDG_RUNTIME_DIR/vak, else the state directory): never reachable
 * from a sandbox. sun_path holds 108 bytes, so a deep home directory falls
 * back to a per-user directory under the system temp dir.
 */
export function gateSocketDir(env: NodeJS.ProcessEnv = process.env): string {
  const d = vakDirs(env);
  const base = d.runtime ?? join(d.state, "run");
  const root = (base + "/gate-xxxxxxxxxxxx/gate.sock").length < 100 ? base : join(tmpdir(), `vak-${process.getuid?.() ?? 0}`);
  mkdirSync(root, { recursive: true, mode: 0o700 });
  return join(root, `gate-${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}${Math.random().toString(36).slice(2, 6)}`);
}
