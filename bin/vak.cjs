#!/usr/bin/env node
"use strict";
// CommonJS on purpose: it spares `vak exec` the ES module loader's start-up.
// The CLI bundle is compiled with V8's code cache made at build time by the
// same Node (scripts/code-cache.cjs); a cache V8 rejects costs only the time.
const { readFileSync } = require("node:fs");
const { createRequire, wrap } = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

function loadCli() {
  const file = join(__dirname, "..", "dist", "bin", "vak.cjs");
  let cachedData;
  try {
    cachedData = readFileSync(`${file}.cache`);
  } catch {
    cachedData = undefined;
  }
  const script = new Script(wrap(readFileSync(file, "utf8")), { filename: file, cachedData });
  const module = { exports: {} };
  script.runInThisContext()(module.exports, createRequire(file), module, file, dirname(file));
  return module.exports;
}

loadCli()
  .main(process.argv.slice(2))
  .then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`vak: internal error: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(125);
    },
  );
