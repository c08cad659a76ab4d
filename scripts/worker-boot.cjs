"use strict";
// Starts the worker bundle beside this file with its V8 code cache (made at
// build time by scripts/code-cache.cjs after running sample ops), warms the
// paths a request takes, then serves one request.
const { readFileSync } = require("node:fs");
const Module = require("node:module");
const { join } = require("node:path");
const { Script } = require("node:vm");

const filename = join(__dirname, "worker.cjs");
let cachedData;
try {
  cachedData = readFileSync(`${filename}.cache`);
} catch {
  cachedData = undefined;
}
const script = new Script(Module.wrap(readFileSync(filename, "utf8")), { filename, cachedData });
const mod = { exports: {} };
script.runInThisContext()(mod.exports, Module.createRequire(filename), mod, filename, __dirname);
mod.exports.warmUp(__dirname);
mod.exports.serve();
