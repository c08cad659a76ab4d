import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

/**
 * Vak installed in the workspace, as `npm install vak` lays it out and `npx
 * vak` runs it: the package in node_modules/vak (what npm packs: package.json,
 * bin, dist, native, scripts, binding.gyp; and build/ as its install script
 * leaves it), its CLI's run-time dependencies copied in beside it, the others
 * linked, and node_modules/.bin/vak linking to its launcher. Every attack runs
 * under that installed Vak, from `vak exec` and from a broker worker; the
 * next start of Vak on the host must run exactly the files that were there.
 */
function install(ws: string): void {
  const nm = join(ws, "node_modules");
  const pkg = join(nm, "vak");
  mkdirSync(join(pkg, "build", "Release"), { recursive: true });
  for (const p of ["package.json", "bin", "dist", "native", "scripts", "binding.gyp"]) cpSync(join(ROOT, p), join(pkg, p), { recursive: true });
  for (const f of ["vak-launcher", "vak-engine.node"]) cpSync(join(ROOT, "build", "Release", f), join(pkg, "build", "Release", f));
  // What the CLI loads at run time, copied (so that it lies inside the workspace): better-sqlite3 and its addon.
  const sqlite = join(nm, "better-sqlite3");
  mkdirSync(join(sqlite, "build", "Release"), { recursive: true });
  for (const p of ["package.json", "lib"]) cpSync(join(ROOT, "node_modules", "better-sqlite3", p), join(sqlite, p), { recursive: true });
  cpSync(join(ROOT, "node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node"), join(sqlite, "build", "Release", "better_sqlite3.node"));
  for (const d of ["bindings", "file-uri-to-path"]) cpSync(join(ROOT, "node_modules", d), join(nm, d), { recursive: true });
  // The rest of the library's dependencies, linked as a package manager might.
  const deps = Object.keys((JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> }).dependencies);
  for (const d of deps) {
    if (existsSync(join(nm, d))) continue;
    mkdirSync(join(nm, d, ".."), { recursive: true });
    symlinkSync(join(ROOT, "node_modules", d), join(nm, d));
  }
  mkdirSync(join(nm, ".bin"));
  symlinkSync("../vak/bin/vak.cjs", join(nm, ".bin", "vak"));
}

/** Every file and link under dir (links not followed) with its content hash or target. */
function snapshot(dir: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    const p = join(dir, e.name);
    if (e.isSymbolicLink()) out[rel] = `-> ${readlinkSync(p)}`;
    else if (e.isDirectory()) Object.assign(out, { [rel]: `dir ${lstatSync(p).mode}` }, snapshot(p, rel));
    else out[rel] = `${lstatSync(p).mode} ${createHash("sha256").update(readFileSync(p)).digest("hex")}`;
  }
  return out;
}

const PWNED = "pwned-marker";

/** Each attack, as a shell line that tries it and carries on. */
const ATTACKS = [
  // The launcher: rewritten, appended to, truncated, replaced by rename, re-pointed, removed.
  `echo 'require("fs").writeFileSync("${PWNED}", "x")' > node_modules/vak/bin/vak.cjs`,
  `echo 'require("fs").writeFileSync("${PWNED}", "x")' >> node_modules/vak/bin/vak.cjs`,
  `truncate -s 0 node_modules/vak/bin/vak.cjs`,
  `printf '#!/usr/bin/env node\\nrequire("fs").writeFileSync("${PWNED}", "x")\\n' > evil.cjs; mv -f evil.cjs node_modules/vak/bin/vak.cjs`,
  `cp evil.cjs new.cjs 2>/dev/null; ln -f new.cjs node_modules/vak/bin/vak.cjs`,
  `ln -sf ../../../evil.cjs node_modules/vak/bin/vak.cjs`,
  `rm -f node_modules/vak/bin/vak.cjs`,
  `chmod 0777 node_modules/vak/bin/vak.cjs; touch -d 2001-01-01 node_modules/vak/bin/vak.cjs`,
  // Its parents replaced: bin/, the package, node_modules itself.
  `mv node_modules/vak/bin node_modules/vak/bin.old; mkdir -p node_modules/vak/bin && cp evil.cjs node_modules/vak/bin/vak.cjs`,
  `mv node_modules/vak vak.old; mkdir -p node_modules/vak/bin && cp evil.cjs node_modules/vak/bin/vak.cjs`,
  `mv node_modules nm.old; mkdir -p node_modules/vak/bin && cp evil.cjs node_modules/vak/bin/vak.cjs`,
  `rm -rf node_modules/vak`,
  // The CLI bundle, its code cache (V8 runs what the cache says), the worker, the preload, the package manifest.
  `echo 'throw 1' > node_modules/vak/dist/bin/vak.cjs; echo x > node_modules/vak/dist/bin/vak.cjs.cache`,
  `for f in node_modules/vak/dist/bin/*.cjs; do echo 'process.exit(3)' >> "$f"; done`,
  `echo x > node_modules/vak/dist/runtime/worker.cjs; echo x > node_modules/vak/dist/runtime/worker-boot.cjs; echo x > node_modules/vak/dist/preload/fetch-proxy.cjs`,
  `echo x > node_modules/vak/dist/index.js; mkdir node_modules/vak/dist/new`,
  `sed -i 's/bin\\/vak.cjs/evil.cjs/' node_modules/vak/package.json; echo '{"name":"vak","bin":{"vak":"evil.cjs"}}' > node_modules/vak/package.json`,
  // The launcher binary and the engine addon, and the sources its install script builds them from.
  `cp /bin/sh node_modules/vak/build/Release/vak-launcher; echo x > node_modules/vak/build/Release/vak-engine.node`,
  `echo 'int main(){}' > node_modules/vak/native/main.c; echo x > node_modules/vak/binding.gyp`,
  // A module Vak loads, its addon, the packages it loads, and copies planted where Node looks first.
  `echo 'module.exports = () => { require("fs").writeFileSync("${PWNED}", "x") }' > node_modules/better-sqlite3/lib/index.js`,
  `echo x > node_modules/better-sqlite3/build/Release/better_sqlite3.node; echo x > node_modules/bindings/bindings.js`,
  `mkdir -p node_modules/vak/node_modules/better-sqlite3 && echo '{"name":"better-sqlite3","main":"x.js"}' > node_modules/vak/node_modules/better-sqlite3/package.json`,
  `mkdir -p node_modules/better-sqlite3/node_modules/bindings && echo '{"name":"bindings"}' > node_modules/better-sqlite3/node_modules/bindings/package.json`,
  `rm -f node_modules/zod; ln -s ../evil node_modules/zod; mv node_modules/better-sqlite3 bs.old`,
  // The names that lead to it.
  `ln -sf ../../evil.cjs node_modules/.bin/vak; rm -f node_modules/.bin/vak; echo x > node_modules/.bin/vak`,
  `mv node_modules/.bin bin.old; mkdir node_modules/.bin; ln -s ../../evil.cjs node_modules/.bin/vak`,
];

describe("Vak's own installation cannot be changed from inside any sandbox", () => {
  let s: Scratch;
  let before: Record<string, string>;
  const vak = () => join(s.ws, "node_modules", ".bin", "vak");

  beforeAll(() => {
    s = scratch({ git: true });
    install(s.ws);
    writeFileSync(join(s.ws, "evil.cjs"), `require("fs").writeFileSync("${PWNED}", "x")\n`);
    before = snapshot(join(s.ws, "node_modules"));
  });
  afterAll(() => s.cleanup());

  const runInstalled = (args: string[]) => spawnSync(process.execPath, [vak(), ...args], { cwd: s.ws, env: baseEnv(), encoding: "utf8", timeout: 60_000 });

  const unchanged = () => {
    expect(snapshot(join(s.ws, "node_modules"))).toEqual(before);
    // The next start of the installed Vak on the host runs what was installed.
    const next = runInstalled(["exec", "--", "/bin/true"]);
    expect(next.status, next.stderr).toBe(0);
    expect(existsSync(join(s.ws, PWNED))).toBe(false);
  };

  for (const attack of ATTACKS)
    it(`vak exec: ${attack}`, () => {
      const r = runInstalled(["exec", "--", "/bin/sh", "-c", `${attack}; true`]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/refused|Permission denied|Read-only/);
      unchanged();
    });

  it("vak exec --allow-write of the package itself, and of the launcher's directory, holds them all the same", () => {
    const r = runInstalled(["exec", "--allow-write", "node_modules/vak", "--allow-write", "node_modules/.bin", "--", "/bin/sh", "-c", `${ATTACKS.slice(0, 4).join("; ")}; true`]);
    expect(r.stderr).toContain("Vak's own installation");
    unchanged();
  });

  it("a broker worker (write and edit ops, and its exec) cannot change it either", () => {
    const script = `
      const { Broker } = await import(${JSON.stringify(join(s.ws, "node_modules/vak/dist/broker/broker.js"))});
      const b = new Broker({ workspace: process.cwd(), mode: "workspace-write" });
      const out = [];
      for (const op of [
        { kind: "write", path: "node_modules/vak/bin/vak.cjs", content: "pwned" },
        { kind: "write", path: "node_modules/vak/dist/runtime/worker.cjs", content: "pwned" },
        { kind: "edit", path: "node_modules/vak/package.json", old: "bin/vak.cjs", new: "evil.cjs" },
        { kind: "write", path: "node_modules/better-sqlite3/lib/index.js", content: "pwned" },
        { kind: "write", path: "node_modules/vak/node_modules/zod/package.json", content: "{}" },
        { kind: "write", path: "node_modules/.bin/vak", content: "pwned" },
        { kind: "exec", command: ${JSON.stringify(ATTACKS.slice(0, 12).join("; ") + "; true")} },
      ]) out.push(await b.run(op));
      await b.close();
      console.log(JSON.stringify(out));`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: s.ws, env: baseEnv(), encoding: "utf8", timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    const results = JSON.parse(r.stdout.trim().split("\n").pop()!) as { ok: boolean; code?: string; message?: string; output?: string }[];
    for (const res of results.slice(0, 6)) {
      expect(res.ok).toBe(false);
      expect(res.message).toMatch(/held read-only|protected path/);
    }
    expect(JSON.stringify(results[6])).toMatch(/Permission denied|refused/);
    unchanged();
  });

  it("a node_modules/vak or .bin/vak planted in a project without one is refused, at any depth", () => {
    const fresh = join(s.root, "fresh");
    mkdirSync(fresh);
    execFileSync("git", ["init", "-q"], { cwd: fresh });
    const r = runInstalled([
      "exec", "--workspace", fresh, "--", "/bin/sh", "-c",
      "mkdir -p node_modules/.bin sub/node_modules/.bin; echo x > node_modules/.bin/vak; mkdir node_modules/vak; echo x > sub/node_modules/.bin/vak; " +
        "mkdir -p stage/vak && mv stage node_modules/x && mv node_modules/x node_modules/vak; mkdir -p nm/.bin && echo x > nm/.bin/vak && mv nm sub/other/node_modules; " +
        "ln -s ../../evil node_modules/.bin/VAK; mkdir -p node_modules/.pnpm/vak@1/node_modules/vak; true",
    ]);
    expect(r.status, r.stderr).toBe(0);
    for (const p of ["node_modules/.bin/vak", "node_modules/vak", "sub/node_modules/.bin/vak", "node_modules/.bin/VAK", "node_modules/.pnpm/vak@1/node_modules/vak", "sub/other/node_modules"])
      expect(existsSync(join(fresh, p)), p).toBe(false);
    // Ordinary installs still work: node_modules and .bin can be made, filled and removed.
    const ok = runInstalled(["exec", "--workspace", fresh, "--", "/bin/sh", "-c", "mkdir -p node_modules/.bin/ && echo x > node_modules/.bin/tsc && rm -rf node_modules && mkdir node_modules && echo done"]);
    expect(ok.stdout).toContain("done");
  });

  it("vak doctor says the installation is held", () => {
    const r = runInstalled(["doctor"]);
    expect(r.stdout).toMatch(/ok {3}Vak's installation: .*held read-only/);
  });
});
