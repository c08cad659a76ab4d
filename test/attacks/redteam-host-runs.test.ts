import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, sandboxSh } from "../support/vak.js";

/**
 * Files that a tool on the host reads and runs what they say, without being asked to run the project:
 * a version control system on `log`/`diff` (its pager, hooks), an editor or an agent on opening the
 * folder (language servers, MCP servers, hooks), a build tool's settings read before any build file, the
 * desktop session at login. A sandboxed command must not be able to plant or change any of them, by any
 * way of writing (a write, a rename onto it, a link, a copy of a prepared directory).
 */

/** Each way a command might put `body` at `rel` (relative to the workspace). */
function plantAll(rel: string): string {
  const q = `'${rel}'`;
  return [
    `mkdir -p "$(dirname ${q})"`,
    `echo evil > ${q}`,
    `echo evil >> ${q}`,
    `echo evil > /tmp/src && cp /tmp/src ${q}.new; mv ${q}.new ${q}`,
    `echo evil > ${q}.2; ln ${q}.2 ${q}`,
    `ln -s /tmp/src ${q}`,
  ].join("; ");
}

const REPO_FILES: [string, string][] = [
  [".jj/repo/config.toml", "Jujutsu's repository config"],
  [".jj/repo/store/git_target", "names the git directory Jujutsu runs git on"],
  [".sl/config", "Sapling"],
  [".helix/languages.toml", "Helix"],
  [".helix/config.toml", "Helix"],
  ["bunfig.toml", "Bun"],
  [".bunfig.toml", "Bun"],
  [".bazelrc", "Bazel"],
  [".mvn/jvm.config", "Maven"],
  [".mvn/extensions.xml", "Maven"],
  [".qwen/settings.json", "Qwen Code"],
  [".kilocode/mcp.json", "Kilo Code"],
  [".clinerules/hooks/PreToolUse", "Cline"],
  ["crush.json", "Crush"],
  [".crush.json", "Crush"],
];

describe("files a host tool runs from a repository cannot be planted", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());

  for (const [rel, tool] of REPO_FILES)
    it(`${rel} (${tool}) cannot be created at the top or deep in the workspace, by write, rename, hard or symbolic link`, async () => {
      const deep = `pkg/sub/${rel}`;
      const r = await sandboxSh(s.ws, `${plantAll(rel)}; ${plantAll(deep)}; true`);
      expect(r.code).toBe(0);
      expect(r.stderr).toContain(`protected path`);
      for (const p of [rel, deep]) expect(existsSync(join(s.ws, p)), p).toBe(false);
    });

  it("an existing .jj/repo/config.toml and .mvn/jvm.config keep their content", async () => {
    const files = [".jj/repo/config.toml", ".mvn/jvm.config"];
    for (const f of files) {
      mkdirSync(dirname(join(s.ws, f)), { recursive: true });
      writeFileSync(join(s.ws, f), "# ok\n");
    }
    const r = await sandboxSh(
      s.ws,
      `printf '[ui]\\npager = ["sh", "-c", "touch /tmp/pwned"]\\n' >> .jj/repo/config.toml; echo -javaagent:/tmp/evil.jar > .mvn/jvm.config; truncate -s0 .mvn/jvm.config; mv .mvn .mvn-old; mv .jj/repo .jj/repo-old; true`,
    );
    expect(r.code).toBe(0);
    for (const f of files) expect(readFileSync(join(s.ws, f), "utf8")).toBe("# ok\n");
  });

  it("ordinary files of the same names elsewhere stay writable (no over-reach)", async () => {
    const r = await sandboxSh(s.ws, `mkdir -p docs && echo ok > docs/bazelrc.md && echo ok > jj-config.toml && mkdir -p helix && echo ok > helix/config.toml && echo done`);
    expect(r.stdout).toContain("done");
    expect(readFileSync(join(s.ws, "helix/config.toml"), "utf8")).toBe("ok\n");
  });
});

const HOME_FILES = [
  ".config/systemd/user/evil.service",
  ".config/systemd/user/default.target.wants/evil.service",
  ".config/autostart/evil.desktop",
  ".config/environment.d/50-evil.conf",
  ".config/jj/config.toml",
  ".config/jj/repos/0123abcd/config.toml",
  ".jjconfig.toml",
  ".config/helix/languages.toml",
  ".config/zed/settings.json",
  ".config/gh/config.yml",
  ".config/starship.toml",
  ".pam_environment",
  ".xprofile",
  ".xsessionrc",
  ".bunfig.toml",
];

describe("a grant that covers the home directory does not let a command plant what the session runs at login or on a prompt", () => {
  let s: Scratch;
  let home: string;
  beforeEach(() => {
    s = scratch({ git: true });
    home = join(s.root, "home");
    mkdirSync(join(home, ".config"), { recursive: true });
  });
  afterEach(() => s.cleanup());

  it("systemd user units, autostart entries, environment.d, jj, helix, zed, gh, starship and login files are refused", async () => {
    const script = HOME_FILES.map((f) => plantAll(join(home, f))).join("; ") + "; true";
    const r = await sandboxSh(s.ws, script, ["--allow-write", home], { env: baseEnv({ HOME: home }) });
    expect(r.code).toBe(0);
    for (const f of HOME_FILES) expect(existsSync(join(home, f)), f).toBe(false);
    // The rest of the home directory is what the grant says: writable.
    const ok = await sandboxSh(s.ws, `echo ok > ${home}/.config/notes.txt && echo done`, ["--allow-write", home], { env: baseEnv({ HOME: home }) });
    expect(ok.stdout).toContain("done");
  });
});
