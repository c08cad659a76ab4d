import { defineConfig } from "rolldown";

// The CLI as one CommonJS file: Node resolves and compiles one module instead
// of dozens, and skips the ES module loader, which together are most of
// `vak exec`'s start-up. Commands other than exec load their chunks on demand.
export default defineConfig({
  input: { vak: "src/cli/main.ts" },
  platform: "node",
  external: [/^node:/],
  output: { dir: "dist/bin", format: "cjs", entryFileNames: "[name].cjs", chunkFileNames: "[name]-[hash].cjs" },
});
