import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak } from "../support/vak.js";

// `vak completion bash|zsh|fish`: made from the commander definitions, so
// every command in `vak help` is in every script; each script loads in its
// shell and completes commands, options and option values. bash is always
// here; zsh and fish are installed by .ci/run (apt), and tested where present.
const has = (shell: string) => spawnSync("sh", ["-c", `command -v ${shell}`]).status === 0;

/** The commands a help text lists (its Commands: section, up to the blank line after it). */
const names = (help: string) => {
  const section = help.slice(help.indexOf("Commands:")).split("\n\n")[0]!;
  return [...section.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]!).filter((c) => c !== "help");
};

let s: Scratch;
const scripts: Record<string, string> = {};
let commands: string[] = [];
beforeAll(async () => {
  s = scratch();
  for (const shell of ["bash", "zsh", "fish"]) {
    const r = await runVak(["completion", shell], { cwd: s.ws });
    expect(r.code, r.stderr).toBe(0);
    scripts[shell] = join(s.root, `vak.${shell}`);
    writeFileSync(scripts[shell]!, r.stdout);
  }
  const help = (await runVak(["help"], { cwd: s.ws })).stdout;
  commands = names(help);
  // The user's own profiles (one with a dot in its name, one header no shell may run), and a repository's, which
  // completion never offers: it reads nothing of a repository's.
  mkdirSync(join(s.root, "xdg", "vak"), { recursive: true });
  writeFileSync(join(s.root, "xdg", "vak", "config.toml"), `[exec]\nprofiles = ["git"]\n\n[profiles.web]\nextends = "npm"\n  [ profiles."my.tools" ]  # mine\n[profiles.web.nested]\n[profiles.$(touch PWNED)]\n[profiles.\`touch PWNED\`]\n`);
  mkdirSync(join(s.ws, ".vak"), { recursive: true });
  writeFileSync(join(s.ws, ".vak", "config.toml"), `[profiles.repo-only]\nallow_read = ["/"]\n`);
});

/** What --profile offers: Vak's presets, then the user's own profiles. */
const PRESETS = ["cargo", "claude", "codex", "gemini", "git", "node", "npm", "pip", "python", "rust"];
const profileEnv = () => ({ ...process.env, HOME: join(s.root, "home"), XDG_CONFIG_HOME: join(s.root, "xdg") });
afterAll(() => s.cleanup());

describe("the scripts come from the command definitions", () => {
  it("every command `vak help` lists, and every subcommand, is in each script", async () => {
    expect(commands).toEqual(expect.arrayContaining(["exec", "run", "journal", "mcp", "completion"]));
    const journal = (await runVak(["journal", "--help"], { cwd: s.ws })).stdout;
    const subs = names(journal);
    expect(subs).toContain("tail");
    for (const shell of ["bash", "zsh", "fish"]) {
      const text = (await runVak(["completion", shell], { cwd: s.ws })).stdout;
      for (const c of [...commands, ...subs]) expect(text, `${shell}: ${c}`).toMatch(new RegExp(`\\b${c}\\b`));
    }
  });

  it("an unknown shell is refused", async () => {
    const r = await runVak(["completion", "powershell"], { cwd: s.ws });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/Allowed choices are bash, zsh, fish/);
  });
});

describe("bash", () => {
  const complete = (...words: string[]) =>
    execFileSync("bash", ["-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _vak; printf '%s\\n' "\${COMPREPLY[@]}"`, "_", scripts.bash!, ...words], { cwd: s.ws, encoding: "utf8", env: profileEnv() })
      .split("\n")
      .filter(Boolean);

  it("loads, and completes commands, subcommands, options and their values", () => {
    expect(complete("vak", "ex")).toEqual(["exec"]);
    expect(complete("vak", "")).toEqual(expect.arrayContaining(commands));
    expect(complete("vak", "journal", "")).toEqual(expect.arrayContaining(["list", "show", "tail"]));
    expect(complete("vak", "exec", "--max-o")).toEqual(["--max-output"]);
    expect(complete("vak", "exec", "--mode", "")).toEqual(["read-only", "workspace-write"]);
    expect(complete("vak", "journal", "list", "--kind", "w")).toEqual(["workload"]);
    expect(complete("vak", "completion", "")).toEqual(["bash", "zsh", "fish"]);
    // A value is skipped when finding the command: --workspace's value is not taken for a subcommand.
    expect(complete("vak", "--workspace", "journal", "")).toEqual(expect.arrayContaining(["exec", "journal"]));
  });

  it("after --, a command name", () => {
    expect(complete("vak", "exec", "--mode", "read-only", "--", "bas")).toContain("bash");
  });

  it("after --profile, the presets and your own profiles (never a repository's), each item of a list", () => {
    expect(complete("vak", "exec", "--profile", "")).toEqual([...PRESETS, "web", "my.tools"]);
    expect(complete("vak", "run", "--profile", "w")).toEqual(["web"]);
    expect(complete("vak", "--profile", "git,n")).toEqual(["git,node", "git,npm"]);
    expect(complete("vak", "exec", "--profile", "repo")).toEqual([]);
    expect(existsSync(join(s.ws, "PWNED"))).toBe(false);
  });
});

describe.runIf(has("zsh"))("zsh", () => {
  it("loads after compinit, and registers _vak for vak", () => {
    const r = spawnSync("zsh", ["-fc", `autoload -Uz compinit && compinit -u -d "$1/zcompdump" && source "$2" && print -r -- \${+functions[_vak]} \${_comps[vak]}`, "_", s.root, scripts.zsh!], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("1 _vak");
  });

  it("offers commands, options and values (the completion functions stubbed to print what they are given)", () => {
    const stubs = `compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@"; }; compset() { :; }; _describe() { local arr=\${@[-1]}; print -rl -- \${(P)arr}; }; _files() { print FILES; }; _directories() { print DIRS; }; _command_names() { print COMMANDS; }; _message() { print "MESSAGE $*"; }`;
    const complete = (...words: string[]) =>
      spawnSync("zsh", ["-fc", `${stubs}; source "$1"; shift; words=("$@"); CURRENT=$#words; _vak`, "_", scripts.zsh!, ...words], { cwd: s.ws, encoding: "utf8", env: profileEnv() }).stdout.split("\n").filter(Boolean);
    expect(complete("vak", "")).toEqual(expect.arrayContaining(["exec:run a command in the sandbox: vak exec [options] -- CMD [ARGS...]"]));
    expect(complete("vak", "journal", "")).toEqual(expect.arrayContaining([expect.stringMatching(/^tail:follow the journal/)]));
    expect(complete("vak", "exec", "--mode", "")).toEqual(["read-only", "workspace-write"]);
    expect(complete("vak", "exec", "--workspace", "")).toEqual(["DIRS"]);
    expect(complete("vak", "exec", "--max-output", "")).toEqual(["MESSAGE size"]);
    expect(complete("vak", "exec", "--")).toEqual(expect.arrayContaining([expect.stringMatching(/^--max-output:/)]));
    expect(complete("vak", "exec", "--", "")).toEqual(["COMMANDS"]);
    // --profile: the presets and your own profiles, never a repository's (compset, which takes a list's head, stubbed).
    expect(complete("vak", "exec", "--profile", "")).toEqual([...PRESETS, "web", "my.tools"]);
    expect(existsSync(join(s.ws, "PWNED"))).toBe(false);
  });
});

describe.runIf(has("fish"))("fish", () => {
  const complete = (line: string) =>
    execFileSync("fish", ["-c", `source $argv[1]; complete -C $argv[2]`, scripts.fish!, line], { cwd: s.ws, encoding: "utf8", env: profileEnv() })
      .split("\n")
      .filter(Boolean)
      .map((l) => l.split("\t")[0]!);

  it("loads, and completes commands, subcommands, options and their values", () => {
    expect(complete("vak ex")).toEqual(["exec"]);
    expect(complete("vak journal ")).toEqual(expect.arrayContaining(["list", "show", "tail"]));
    expect(complete("vak exec --max-o")).toEqual(["--max-output"]);
    expect(complete("vak exec --mode ")).toEqual(["read-only", "workspace-write"]);
    expect(complete("vak journal list --kind ")).toEqual(expect.arrayContaining(["agent", "exec", "workload"]));
    expect(complete("vak completion ")).toEqual(["bash", "fish", "zsh"]);
    expect(complete("vak --workspace /tmp journal ")).toEqual(expect.arrayContaining(["list", "tail"]));
  });

  it("after --profile, the presets and your own profiles (never a repository's), each item of a list", () => {
    expect(complete("vak exec --profile ").sort()).toEqual([...PRESETS, "web", "my.tools"].sort());
    expect(complete("vak run --profile w")).toEqual(["web"]);
    expect(complete("vak --profile git,n").sort()).toEqual(["git,node", "git,npm"]);
    expect(complete("vak exec --profile repo")).toEqual([]);
    expect(existsSync(join(s.ws, "PWNED"))).toBe(false);
  });
});
