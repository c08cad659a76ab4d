// The layers of src/, checked on every `npm test` (pretest: npm run check:layers).
// A folder is a layer; a module may import only from its own folder and from
// layers listed before its own (lower ones). Folders on the same line are peers
// and may not import each other. The worker bundle and the fetch preload run
// inside sandboxes, among hostile code: they import nothing that holds authority.
// ARCHITECTURE.md ("The map") describes the same table; change both together.
"use strict";

/** Bottom first. Each entry is one rank; a rank may hold several peer folders. */
const LAYERS = [
  ["protocol", "text"],
  ["policy"],
  ["secrets", "sandbox", "net", "stores", "model"],
  ["journal"],
  ["approvals"],
  ["broker"],
  ["mcp"],
  ["agent"],
  ["workload"],
  ["server"],
  ["audit"],
  ["cli", "index.ts"],
  // The resident host serves `vak exec` for native/client.c with the CLI's own code.
  ["resident"],
];
/** Runs in a worker sandbox: may import only the wire protocol (and Node's own modules, zod). */
const ISLANDS = ["worker"];

const folder = (name) => (name.endsWith(".ts") ? `^src/${name.replace(/\./g, "\\.")}$` : `^src/${name}/`);
const known = [...LAYERS.flat(), ...ISLANDS].map(folder);

const forbidden = [
  {
    name: "no-cycles",
    comment: "An import cycle makes two modules one concept; break it by moving what both need lower.",
    severity: "error",
    from: { path: "^src/" },
    to: { circular: true },
  },
  {
    name: "every-folder-has-a-layer",
    comment: "A new src/ folder must take its place in LAYERS (in .dependency-cruiser.cjs) and in ARCHITECTURE.md's map.",
    severity: "error",
    from: { path: "^src/", pathNot: known },
    to: {},
  },
  {
    name: "imports-only-placed-folders",
    comment: "A module in a folder that has no place in LAYERS is not imported either: place the folder first.",
    severity: "error",
    from: { path: "^src/" },
    to: { path: "^src/", pathNot: known },
  },
  {
    name: "no-unplaced-orphans",
    comment: "A module that imports nothing and is imported by nothing still needs its folder in LAYERS.",
    severity: "error",
    from: { orphan: true, path: "^src/", pathNot: [...known, "\\.d\\.ts$", "README\\.md$"] },
    to: {},
  },
  {
    name: "worker-holds-no-authority",
    comment: "The worker runs among hostile code in its sandbox: it may import only src/protocol/ (and Node's modules, zod). No journal, secrets, broker, approvals, gate, model, agent or CLI.",
    severity: "error",
    from: { path: "^src/worker/" },
    to: { path: "^src/", pathNot: ["^src/worker/", "^src/protocol/"] },
  },
  {
    name: "worker-imports-only-node-and-zod",
    comment: "The worker bundle carries no npm package but zod.",
    severity: "error",
    from: { path: "^src/(worker|protocol)/" },
    to: { dependencyTypes: ["npm", "npm-dev", "npm-optional", "npm-peer", "npm-bundled", "npm-no-pkg", "npm-unknown"], pathNot: "node_modules/zod/" },
  },
  {
    name: "preload-holds-no-authority",
    comment: "The fetch preload runs inside sandboxes with a network grant: it imports nothing of Vak's.",
    severity: "error",
    from: { path: "^src/net/preload/" },
    to: { path: "^src/" , pathNot: "^src/net/preload/" },
  },
  {
    name: "web-client-imports-only-itself",
    comment: "The browser client (src/server/web/) runs in a page: it imports only itself and, for types, the wire format (src/server/wire.ts); nothing of the host.",
    severity: "error",
    from: { path: "^src/server/web/" },
    to: { path: "^src/", pathNot: ["^src/server/web/", "^src/server/wire\\.ts$"] },
  },
  {
    name: "web-client-imports-only-preact-and-xterm",
    comment: "The browser bundle carries Preact and xterm.js and nothing else from npm: no CDN, no font, no other package.",
    severity: "error",
    from: { path: "^src/server/web/", pathNot: "^src/server/web/vite\\.config\\.mjs$" },
    to: { dependencyTypes: ["npm", "npm-dev", "npm-optional", "npm-peer", "npm-bundled", "npm-no-pkg", "npm-unknown"], pathNot: ["node_modules/preact/", "node_modules/@xterm/xterm/"] },
  },
  {
    name: "nothing-imports-the-web-client",
    comment: "The web client is a separate bundle built by Vite and served as files; no host module imports it.",
    severity: "error",
    from: { path: "^src/", pathNot: "^src/server/web/" },
    to: { path: "^src/server/web/" },
  },
  {
    name: "nothing-imports-the-worker",
    comment: "The worker is a separate bundle started in a sandbox, never a library of the host.",
    severity: "error",
    from: { path: "^src/", pathNot: "^src/worker/" },
    to: { path: "^src/worker/" },
  },
];

// Imports point down: from each layer, every folder of its own rank or above (but itself) is forbidden.
for (const [rank, names] of LAYERS.entries()) {
  const notBelow = LAYERS.slice(rank).flat();
  for (const name of names) {
    const higher = notBelow.filter((n) => n !== name);
    if (higher.length === 0) continue;
    forbidden.push({
      name: `layer-${name.replace(/\.ts$/, "")}-imports-down`,
      comment: `${name} may import only from layers below it: ${LAYERS.slice(0, rank).flat().join(", ") || "none"}.`,
      severity: "error",
      from: { path: folder(name) },
      to: { path: higher.map(folder) },
    });
  }
}

module.exports = {
  forbidden,
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: "^src/.*\\.d\\.ts$" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
