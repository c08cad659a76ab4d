import { existsSync } from "node:fs";
import { join } from "node:path";
import { installation } from "../policy/install.js";
import type { Spawner } from "./launcher.js";

let loaded: Spawner | null | undefined;

/**
 * posix_spawn from the resident host's addon (build/Release/vak-resident.node, native/resident.c), for
 * `vak exec` in-process too: Node's spawn forks this process (its page tables copied with the event loop
 * stopped) and loads child_process, net and the streams, ~5 ms of a short command together. undefined where
 * the addon is not built: the caller then uses Node's spawn, which does the same.
 */
export function nativeSpawner(): Spawner | undefined {
  if (loaded === undefined) {
    const p = join(installation().root, "build", "Release", "vak-resident.node");
    // process.dlopen, not require: the resolver's realpath walk and stats cost more than loading the addon.
    const m = { exports: {} };
    if (existsSync(p)) process.dlopen(m, p);
    loaded = existsSync(p) ? (m.exports as Spawner) : null;
  }
  return loaded ?? undefined;
}
