import { existsSync } from "node:fs";
import { join } from "node:path";
import { installation } from "../policy/install.js";
import type { Spawner } from "./launcher.js";

interface Addon extends Spawner {
  /** Marks every descriptor from n up close-on-exec (native/resident.c). */
  cloexecFrom?(n: number): void;
  /** PR_SET_DUMPABLE 0: no core file, no ptrace or /proc/PID/mem by other processes of the user (native/resident.c). */
  nonDumpable?(): void;
}

let loaded: Addon | null | undefined;

function addon(): Addon | undefined {
  if (loaded === undefined) {
    const p = join(installation().root, "build", "Release", "vak-resident.node");
    // process.dlopen, not require: the resolver's realpath walk and stats cost more than loading the addon.
    const m = { exports: {} };
    if (existsSync(p)) process.dlopen(m, p);
    loaded = existsSync(p) ? (m.exports as Addon) : null;
  }
  return loaded ?? undefined;
}

/**
 * posix_spawn from the resident host's addon (build/Release/vak-resident.node, native/resident.c), for
 * `vak exec` in-process too: Node's spawn forks this process (its page tables copied with the event loop
 * stopped) and loads child_process, net and the streams, ~5 ms of a short command together. undefined where
 * the addon is not built: the caller then uses Node's spawn, which does the same.
 */
export function nativeSpawner(): Spawner | undefined {
  return addon();
}

/**
 * Descriptors this process inherited above 2 (a caller's file, socket or pipe it left open across its exec) reach
 * no program Vak starts: Node's spawn passes on every descriptor not marked close-on-exec, to the container engine,
 * a broker's launcher (its monitor, init, resolver and relay, which parse what the command sends), an MCP server.
 * Called once, as the CLI starts. Where the addon is not built, they stay as they are (the launcher started by
 * posix_spawn closes them anyway; Node's spawn does not).
 */
export function withholdInherited(): void {
  addon()?.cloexecFrom?.(3);
}

/**
 * This process's memory reaches no core file and no other process of the user (ptrace, /proc/PID/mem): it holds a run
 * CA's private key, gate-held secrets, provider keys. A crash of `vak exec` would otherwise write them into the
 * workspace (core_pattern `core`). Called once, as the CLI and the resident host start. What it starts is dumpable
 * again from its exec.
 */
export function keepOutOfDumps(): void {
  addon()?.nonDumpable?.();
}
