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
function warmPlan(cli) {
  const dir = mkdtempSync(join(tmpdir(), "vak-cache-plan-"));
  try {
    mkdirSync(join(dir, ".git", "hooks"), { recursive: true });
    writeFileSync(join(dir, ".git", "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(dir, ".git", "config"), '[core]\n\tbare = false\n\thooksPath = "hooks" ; a comment\n[alias]\n\tx = !tools/x.sh\n');
    mkdirSync(join(dir, "sub", ".vscode"), { recursive: true });
    cli.warmUp(dir);
  } catch {
    // a cache without planning in it costs only time
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const dist = join(__dirname, "..", "dist");
const files = [
  ...readdirSync(join(dist, "bin")).filter((n) => n.endsWith(".cjs")).map((n) => join(dist, "bin", n)),
  join(dist, "runtime", "worker.cjs"),
];
for (const filename of files) {
  const script = new Script(Module.wrap(readFileSync(filename, "utf8")), { filename });
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, Module.createRequire(filename), mod, filename, dirname(filename));
  if (filename.endsWith("worker.cjs")) warmWorker(mod.exports);
  if (typeof mod.exports.warmUp === "function") warmPlan(mod.exports);
  writeFileSync(`${filename}.cache`, script.createCachedData());
}

copyFileSync(join(__dirname, "worker-boot.cjs"), join(dist, "runtime", "worker-boot.cjs"));
