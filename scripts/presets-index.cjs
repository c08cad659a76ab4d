"use strict";
// Build step: an index of the presets (dist/presets-index.json) for the
// hints `vak exec` prints before and after a run (which preset is for which
// program, the variables it passes, the paths it grants), so that a run
// reads one small JSON file instead of parsing every preset's TOML. The
// presets themselves (presets/*.toml) stay the one source: a test checks
// that the index says what they say.
const { readdirSync, readFileSync, writeFileSync } = require("node:fs");
const { join } = require("node:path");
const { parse } = require("smol-toml");

const root = join(__dirname, "..");
const dir = join(root, "presets");
const index = [];
for (const f of readdirSync(dir).filter((n) => n.endsWith(".toml")).sort()) {
  const p = parse(readFileSync(join(dir, f), "utf8"));
  index.push({
    name: f.slice(0, -5),
    extends: [].concat(p.extends ?? []),
    commands: p.commands ?? [],
    env: [...(p.allow_env ?? []), ...(p.secrets ?? []).map((s) => s.slice(0, s.indexOf("=")))],
    read: [...(p.allow_read ?? []), ...(p.allow_read_redacted ?? [])],
    write: [...(p.allow_write ?? []), ...(p.state_dirs ?? []), ...(p.state_files ?? [])],
    net: p.allow_net ?? [],
  });
}
writeFileSync(join(root, "dist", "presets-index.json"), JSON.stringify(index) + "\n");
