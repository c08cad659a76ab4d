import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Where Vak is installed: its package root and the files it runs from. One
 * place, low in the layers, so that whatever must know these paths (the
 * launcher's and the engine's binaries, the worker bundle bound into worker
 * sandboxes, the fetch preload, the CLI that ingests in the background, and
 * rules that keep sandboxes away from Vak's own installation) asks here.
 * Nothing here reads the file system; callers check that what they need exists.
 */

/** The package root: two levels above this module, in src/ (src/policy/) and in dist/ (dist/policy/, dist/bin/) alike. */
export function packageRoot(): string {
  return fileURLToPath(new URL("../..", import.meta.url));
}

export interface Installation {
  /** The package root (package.json, bin/, dist/, build/). */
  root: string;
  /** The built JavaScript: dist/. */
  dist: string;
  /** The CLI's entry, bin/vak.cjs. */
  cli: string;
  /** The sandbox launcher built by node-gyp at install: build/Release/vak-launcher. */
  launcher: string;
  /** The egress gate's engine addon built beside it: build/Release/vak-engine.node. */
  engine: string;
  /** The worker bundle's directory (dist/runtime: worker.cjs, worker-boot.cjs, their code cache), bound read-only into worker sandboxes. */
  workerDir: string;
  /** The fetch preload's directory (dist/preload), bound read-only into sandboxes with a network grant. */
  preloadDir: string;
  /** The web client built by Vite (dist/web), served by `vak serve`. */
  webDir: string;
  /** The built-in profiles (presets/NAME.toml): what they grant is what the next run grants. */
  presetsDir: string;
  /** The Node.js binary Vak runs on. */
  node: string;
  /** The Node.js installation that binary belongs to (its prefix: bin/node's grandparent). */
  nodePrefix: string;
}

/** Every path of Vak's own installation, computed from where this module is. */
export function installation(): Installation {
  const root = packageRoot();
  const dist = join(root, "dist");
  return {
    root,
    dist,
    cli: join(root, "bin", "vak.cjs"),
    launcher: join(root, "build", "Release", "vak-launcher"),
    engine: join(root, "build", "Release", "vak-engine.node"),
    workerDir: join(dist, "runtime"),
    preloadDir: join(dist, "preload"),
    webDir: join(dist, "web"),
    presetsDir: join(root, "presets"),
    node: process.execPath,
    nodePrefix: dirname(dirname(process.execPath)),
  };
}
