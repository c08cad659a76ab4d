"use strict";
// Build step: V8 code caches for the CLI bundle's files, so that `vak exec`
// does not pay for compiling them on every start. Made by the Node that will
// run them, after evaluating each file once so that the functions its start-up
// needs are in the cache.
const { copyFileSync, readdirSync, readFileSync, writeFileSync } = require("node:fs");
const Module = require("node:module");
const { dirname, join } = require("node:path");
const { Script } = require("node:vm");

const { mkdirSync, mkdtempSync, rmSync } = require("node:fs");
const { tmpdir } = require("node:os");

/** Runs one op of each kind through the worker, so that the cache holds what requests use. */
function warmWorker(worker) {
  const dir = mkdtempSync(join(tmpdir(), "vak-cache-"));
  try {
    const f = join(dir, "f.txt");
    const ops = [
      { kind: "write", path: f, content: "one\ntwo\n" },
      { kind: "read", path: f },
      { kind: "read", path: f, offset: 2, limit: 1 },
      { kind: "edit", path: f, old: "two", new: "three" },
      { kind: "list", path: dir },
      { kind: "glob", pattern: "*.txt", path: dir },
      { kind: "grep", pattern: "thr", path: dir },
      { kind: "read", path: join(dir, "missing") },
    ];
    for (const [i, op] of ops.entries()) worker.handle(JSON.stringify({ v: 1, id: String(i), op }));
    worker.handle("not json");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Plans (never launches) a sandbox for a scratch repository, so that the cache holds what planning runs. */
async function warmPlan(cli) {
  const dir = mkdtempSync(join(tmpdir(), "vak-cache-plan-"));
  try {
    mkdirSync(join(dir, ".git", "hooks"), { recursive: true });
    writeFileSync(join(dir, ".git", "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(dir, ".git", "config"), '[core]\n\tbare = false\n\thooksPath = "hooks" ; a comment\n[alias]\n\tx = !tools/x.sh\n');
    mkdirSync(join(dir, "sub", ".vscode"), { recursive: true });
    await cli.warmUp(dir);
    // The command line's parsing: commander's builders and parser, as `vak exec` and `vak --version` run them.
    if (typeof cli.parseExec === "function") await cli.parseExec(["exec", "--profile", "git", "--profile", "node", "--timeout", "10m", "--max-memory", "1G", "--", "/bin/true"]);
    if (typeof cli.program === "function") cli.program();
  } catch {
    // a cache without planning in it costs only time
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const dist = join(__dirname, "..", "dist");
const BUNDLE = join(dist, "bin");

/**
 * The CLI bundle is one entry and its chunks. Each is compiled here as
 * bin/vak.cjs compiles it (a Script per file), and its cache is made only
 * after the warm-up has run, so that a chunk the warm-up required (planning,
 * profiles, the TOML parser) is cached with the functions it ran, not just its
 * top level.
 */
async function main() {
  const scripts = new Map();
  const plain = Module._extensions[".cjs"] ?? Module._extensions[".js"];
  Module._extensions[".cjs"] = function compileTracked(module, filename) {
    if (dirname(filename) !== BUNDLE) return plain(module, filename);
    const script = new Script(Module.wrap(readFileSync(filename, "utf8")), { filename });
    scripts.set(filename, script);
    script.runInThisContext()(module.exports, Module.createRequire(filename), module, filename, dirname(filename));
  };
  const cli = require(join(BUNDLE, "vak.cjs"));
  if (typeof cli.warmUp === "function") await warmPlan(cli);
  // Every other chunk too (those the warm-up did not reach: a cache of their top level).
  for (const n of readdirSync(BUNDLE).filter((n) => n.endsWith(".cjs"))) require(join(BUNDLE, n));
  for (const [filename, script] of scripts) writeFileSync(`${filename}.cache`, script.createCachedData());
  Module._extensions[".cjs"] = plain;

  const worker = join(dist, "runtime", "worker.cjs");
  const script = new Script(Module.wrap(readFileSync(worker, "utf8")), { filename: worker });
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, Module.createRequire(worker), mod, worker, dirname(worker));
  warmWorker(mod.exports);
  writeFileSync(`${worker}.cache`, script.createCachedData());

  copyFileSync(join(__dirname, "worker-boot.cjs"), join(dist, "runtime", "worker-boot.cjs"));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
