#!/usr/bin/env node
"use strict";
// CommonJS on purpose: it spares `vak exec` the ES module loader's start-up.
// The CLI bundle's files are compiled with V8 code caches made at build time
// by the same Node (scripts/code-cache.cjs); a cache V8 rejects costs only time.
const { readFileSync } = require("node:fs");
const Module = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

const BUNDLE = join(__dirname, "..", "dist", "bin");
const plain = Module._extensions[".cjs"] ?? Module._extensions[".js"];
Module._extensions[".cjs"] = function compileCached(module, filename) {
  if (dirname(filename) !== BUNDLE) return plain(module, filename);
  let cachedData;
  try {
    cachedData = readFileSync(`${filename}.cache`);
  } catch {
    cachedData = undefined;
  }
  const script = new Script(Module.wrap(readFileSync(filename, "utf8")), { filename, cachedData });
  script.runInThisContext()(module.exports, Module.createRequire(filename), module, filename, dirname(filename));
};

// `vak host` is the resident host (src/resident/), a bundle of its own.
const host = process.argv[2] === "host";
const cli = require(host ? join(__dirname, "..", "dist", "resident-host", "host.cjs") : join(BUNDLE, "vak.cjs"));
// main() prints its own errors; the exit waits until stdout and stderr are flushed (a pipe to a slow reader gets everything).
cli.main(process.argv.slice(host ? 3 : 2)).then(
  (code) => cli.exitWhenFlushed(code),
  () => cli.exitWhenFlushed(125),
);
