import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { join } from "node:path";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import type { Spawner } from "../sandbox/launcher.js";
import type { Received } from "./request.js";

interface Addon extends Spawner {
  peer(fd: number): { pid: number; uid: number; gid: number };
  receive(fd: number, maxBody: number, timeoutMs: number, done: (r: Received) => void): void;
}

/** The host's native half, built by node-gyp beside the launcher (build/Release/vak-resident.node). */
export function loadResident(): Addon {
  const p = join(installation().root, "build", "Release", "vak-resident.node");
  if (!existsSync(p)) throw new VakError("unsupported", `the resident host's addon is missing (${p}); run \`npm ci\` (or \`npx node-gyp rebuild\`) in the Vak package`);
  return createRequire(import.meta.url)(p) as Addon;
}

/** The descriptor under a Node socket: the kernel's peer credentials and SCM_RIGHTS live there. */
export function socketFd(s: Socket): number {
  const fd = (s as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) throw new VakError("internal", "a connection without a file descriptor");
  return fd;
}
