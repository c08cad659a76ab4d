import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { EgressGate, type EgressEvent } from "../net/gate.js";
import type { NetPolicy } from "../net/rules.js";
import { vakDirs } from "../policy/state.js";
import type { GateLink } from "../sandbox/launcher.js";

/** Vak's private runtime directory: XDG_RUNTIME_DIR/vak, else the state directory. Never reachable from a sandbox. */
function runtimeDir(): string {
  const d = vakDirs();
  return d.runtime ?? join(d.state, "run");
}

/** Starts an egress gate for one `vak exec` run, on a socket in a fresh private directory. */
export async function startGate(policy: NetPolicy, onEvent: (e: EgressEvent) => void): Promise<{ link: GateLink; close(): Promise<void> }> {
  const base = runtimeDir();
  mkdirSync(base, { recursive: true, mode: 0o700 });
  // sun_path holds 108 bytes; a deep home directory must not make the socket unreachable.
  const root = (base + "/gate-xxxxxxxx/gate.sock").length < 100 ? base : join(tmpdir(), `vak-${process.getuid?.() ?? 0}`);
  const dir = join(root, `gate-${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`);
  const gate = new EgressGate({ dir, onEvent });
  await gate.listen();
  const token = gate.register({ component: "exec", generation: 1, policy });
  let closed: Promise<void> | undefined;
  return {
    link: { dir, token },
    // Once: the run closes the gate as soon as the sandbox is gone, and again on its way out.
    close: () =>
      (closed ??= gate.close().then(() => rmSync(dir, { recursive: true, force: true }))),
  };
}
