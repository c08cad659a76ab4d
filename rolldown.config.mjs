import { defineConfig } from "rolldown";

/**
 * commander requires child_process at its top for executable subcommands, which Vak does not define; with it come
 * net and the streams, ~3 ms of `vak exec`'s start-up. It is required when a subcommand would spawn, never before.
 * The build fails if commander no longer reads as expected.
 */
const lazyCommanderSpawn = {
  name: "lazy-commander-spawn",
  transform(code, id) {
    if (!/[\\/]commander[\\/]lib[\\/]command\.js$/.test(id)) return null;
    const eager = "const childProcess = require('node:child_process');";
    if (!code.includes(eager)) throw new Error(`${id}: no \`${eager}\` to make lazy; look at lazyCommanderSpawn in rolldown.config.mjs`);
    return code.replace(eager, "const childProcess = { spawn: (...a) => require('node:child_process').spawn(...a) };");
  },
};

/**
 * What charset "ascii" leaves (comments, tagged templates' raw text) as \u escapes: one character past Latin-1
 * makes V8 hold the whole file as UTF-16, twice the bytes to decode and keep. A tagged template's cooked strings
 * (fmt`…` reads those) are the same; only String.raw would tell, and the bundle holds none with such text.
 */
const asciiOnly = {
  name: "ascii-only",
  renderChunk(code) {
    return code.replace(/[^\0-\x7f]/gu, (c) => {
      const n = c.codePointAt(0);
      return n > 0xffff ? `\\u{${n.toString(16)}}` : `\\u${n.toString(16).padStart(4, "0")}`;
    });
  },
};

export default defineConfig([
  // The CLI as one CommonJS file: Node resolves and compiles one module instead
  // of dozens, and skips the ES module loader, which together are most of
  // `vak exec`'s start-up. Commands other than exec load their chunks on demand.
  // Everything the entry imports statically is one chunk ("start"): left to
  // itself, rolldown split it into some twenty small shared chunks, and each
  // file costs a resolve, two reads and a Script (~15 ms of `vak exec` together).
  {
    input: { vak: "src/cli/main.ts" },
    platform: "node",
    plugins: [lazyCommanderSpawn, asciiOnly],
    // Native addons find their binary relative to their own package; ws requires its optional addons itself;
    // pg is loaded only for a PostgreSQL journal.
    external: [/^node:/, "better-sqlite3", "node-pty", "ws", "pg"],
    output: {
      dir: "dist/bin",
      format: "cjs",
      // One character past Latin-1 makes V8 hold the whole file as UTF-16: twice the bytes to decode and keep.
      charset: "ascii",
      entryFileNames: "[name].cjs",
      chunkFileNames: "[name]-[hash].cjs",
      codeSplitting: {
        groups: [
          { name: "start", tags: ["$initial"] },
          // What a run with a config, or a preset changed since the build, loads on demand (the configs, the TOML
          // parser, the presets' files, trust): one file, not six.
          { name: "configs", test: /src\/cli\/exec-config\.ts/ },
        ],
      },
    },
  },
  // The resident host (`vak host`), a bundle of its own: vak.cjs stays one file for the in-process start-up.
  {
    input: { host: "src/resident/main.ts" },
    platform: "node",
    external: [/^node:/, "better-sqlite3", "node-pty", "ws"],
    output: { dir: "dist/resident-host", format: "cjs", entryFileNames: "[name].cjs", chunkFileNames: "[name]-[hash].cjs" },
  },
  // The worker: one file (with zod inside) in dist/runtime, bound read-only into worker sandboxes.
  {
    input: { worker: "src/worker/main.ts" },
    platform: "node",
    external: [/^node:/],
    output: { dir: "dist/runtime", format: "cjs", entryFileNames: "[name].cjs" },
  },
  // The fetch preload for sandboxed Node processes, with undici as a chunk
  // beside it; the directory is bound read-only into sandboxes with a network grant.
  {
    input: { "fetch-proxy": "src/net/preload/fetch-proxy.cts" },
    platform: "node",
    external: [/^node:/],
    output: { dir: "dist/preload", format: "cjs", entryFileNames: "[name].cjs", chunkFileNames: "[name]-[hash].cjs" },
  },
]);
