import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { installation } from "../../src/policy/install.js";
import { loadPreset, presetNames } from "../../src/policy/presets.js";
import { BuiltPresets } from "../../src/policy/presets-built.js";

// The build compiles presets/*.toml (dist/presets.json) so that `vak exec --profile git` needs no TOML parser.
// The TOML stays the one source: the compiled copy must say what it says, and is not used once it says otherwise.
describe("the compiled presets", () => {
  const tmp = mkdtempSync(join(tmpdir(), "vak-presets-built-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("say what each preset's TOML says: the same body, file and line of every key", () => {
    const built = BuiltPresets.load();
    expect(built, "dist/presets.json: run the build").toBeDefined();
    expect(built!.names()).toEqual(presetNames());
    for (const name of presetNames()) {
      const toml = loadPreset(name)!;
      const compiled = built!.preset(name);
      expect(compiled, name).toBeDefined();
      expect({ ...compiled!, line: undefined }).toEqual({ ...toml, line: undefined });
      for (const key of [undefined, ...Object.keys(toml.body), ...Object.keys(toml.body.lists), "no_such_key"]) expect(compiled!.line(key), `${name} ${key}`).toBe(toml.line(key));
    }
  });

  /** A copy of the installation's presets and their compiled form, to change one of them. */
  function copy(label: string): { dist: string; presets: string } {
    const dist = join(tmp, label, "dist");
    const presets = join(tmp, label, "presets");
    cpSync(join(installation().dist, "presets.json"), join(dist, "presets.json"));
    cpSync(installation().presetsDir, presets, { recursive: true });
    return { dist, presets };
  }

  it("a preset edited since the build is not taken from the compiled copy (its TOML is read instead)", () => {
    const c = copy("edited");
    writeFileSync(join(c.presets, "git.toml"), 'allow_read = ["~/.ssh"]\n');
    const built = BuiltPresets.load(c.dist, c.presets)!;
    expect(built.preset("git")).toBeUndefined();
    expect(built.plain("git")).toBe(false);
    expect(built.preset("node")).toBeDefined();
  });

  it("a preset that is now a link, or gone, is not taken from the compiled copy", () => {
    const c = copy("linked");
    const elsewhere = join(tmp, "git.toml");
    cpSync(join(c.presets, "git.toml"), elsewhere);
    rmSync(join(c.presets, "git.toml"));
    symlinkSync(elsewhere, join(c.presets, "git.toml"));
    rmSync(join(c.presets, "node.toml"));
    const built = BuiltPresets.load(c.dist, c.presets)!;
    expect(built.preset("git")).toBeUndefined();
    expect(built.preset("node")).toBeUndefined();
  });

  it("a preset composes from the compiled copies alone, with what it extends, even one that strips a file's credentials", () => {
    const built = BuiltPresets.load()!;
    expect(built.preset("git")!.body.lists.allow_read_redacted.length).toBeGreaterThan(0);
    expect(built.plain("git")).toBe(true);
    expect(built.plain("node")).toBe(true);
    expect(built.plain("npm")).toBe(true);
    expect(built.plain("no-such-preset")).toBe(false);
    expect(built.preset("../etc/passwd")).toBeUndefined();
  });

  it("no compiled copy at all: none is used", () => {
    expect(BuiltPresets.load(join(tmp, "nowhere"))).toBeUndefined();
  });
});
