// The web client: Preact, built by Vite into dist/web at install (npm run build:js).
// Everything it needs is in the bundle: no CDN, no external font, no inline script
// (the server's CSP allows scripts and styles from 'self' only).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root: here,
  base: "/",
  logLevel: "warn",
  publicDir: false,
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: fileURLToPath(new URL("../../../dist/web", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    // The polyfill would be an inline script; every browser we support preloads modules itself.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    reportCompressedSize: false,
    rollupOptions: { input: { index: fileURLToPath(new URL("./index.html", import.meta.url)), terminal: fileURLToPath(new URL("./terminal.html", import.meta.url)) } },
  },
});
