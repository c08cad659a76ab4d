"use strict";
// Build step: V8's code cache for the CLI bundle, so that `vak exec` does not
// pay for compiling it on every start. Made by the Node that will run it, after
// evaluating the bundle once so that the functions start-up needs are in it.
const { readFileSync, writeFileSync } = require("node:fs");
const { createRequire, wrap } = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

const file = join(__dirname, "..", "dist", "bin", "vak.cjs");
const script = new Script(wrap(readFileSync(file, "utf8")), { filename: file });
const mod = { exports: {} };
script.runInThisContext()(mod.exports, createRequire(file), mod, file, dirname(file));
writeFileSync(`${file}.cache`, script.createCachedData());
