"use strict";
// Build step: V8 code caches for the CLI bundle's files, so that `vak exec`
// does not pay for compiling them on every start. Made by the Node that will
// run them, after evaluating each file once so that the functions its start-up
// needs are in the cache.
const { readdirSync, readFileSync, writeFileSync } = require("node:fs");
const Module = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

const dir = join(__dirname, "..", "dist", "bin");
for (const name of readdirSync(dir).filter((n) => n.endsWith(".cjs"))) {
  const filename = join(dir, name);
  const script = new Script(Module.wrap(readFileSync(filename, "utf8")), { filename });
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, Module.createRequire(filename), mod, filename, dirname(filename));
  writeFileSync(`${filename}.cache`, script.createCachedData());
}
