"use strict";
// Build step, two files from the presets (presets/*.toml, which stay the one source; a test checks both):
// - dist/presets-index.json, for the hints `vak exec` prints before and after a run (which preset is for which
//   program, the variables it passes, the paths it grants), so that a run reads one small JSON file instead of
//   parsing every preset's TOML;
// - dist/presets.json, each preset compiled: its text, what smol-toml makes of it and the line of every key
//   (src/policy/presets-built.ts), so that a run naming presets needs no TOML parser. It is used only while the
//   preset's file holds that same text.
const { readdirSync, readFileSync, writeFileSync } = require("node:fs");
const { join } = require("node:path");
const { isDeepStrictEqual } = require("node:util");
const { parse } = require("smol-toml");

async function main() {
  const { tomlLines } = await import("../dist/policy/toml-where.js");
  const root = join(__dirname, "..");
  const dir = join(root, "presets");
  const index = [];
  const compiled = {};
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".toml")).sort()) {
    const text = readFileSync(join(dir, f), "utf8");
    // What the run-time reader refuses (src/policy/profiles-file.ts readConfigText) is not compiled either.
    if (text.includes("\uFFFD")) throw new Error(`presets/${f}: not UTF-8`);
    const p = parse(text);
    // JSON must carry the data as smol-toml gave it (no dates, no big integers), or the copy would say something else.
    if (!isDeepStrictEqual(JSON.parse(JSON.stringify(p)), p)) throw new Error(`presets/${f}: holds a value JSON does not carry as it is`);
    const name = f.slice(0, -5);
    compiled[name] = { text, data: p, lines: [...tomlLines(text)] };
    index.push({
      name,
      extends: [].concat(p.extends ?? []),
      commands: p.commands ?? [],
      env: [...(p.allow_env ?? []), ...(p.secrets ?? []).map((s) => s.slice(0, s.indexOf("=")))],
      read: [...(p.allow_read ?? []), ...(p.allow_read_redacted ?? [])],
      write: [...(p.allow_write ?? []), ...(p.state_dirs ?? []), ...(p.state_files ?? [])],
      net: p.allow_net ?? [],
    });
  }
  writeFileSync(join(root, "dist", "presets-index.json"), JSON.stringify(index) + "\n");
  writeFileSync(join(root, "dist", "presets.json"), JSON.stringify(compiled) + "\n");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
