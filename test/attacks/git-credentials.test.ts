import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// `--profile git` shows the user's git configuration read-only, with the real git inside: every credential
// form git config can hold stays on the host (src/policy/strip-git-config.ts), in ~/.gitconfig,
// ~/.config/git/config and every file they include, while a commit still carries the user's identity.
const TOKEN = "ghp_SECRETVALUE0123456789abcdefghijklmn";
const SECRETS = [TOKEN, "c2VjcmV0LWJhc2lj", "hunter2-smtp", "proxy-pass-42", "inline-helper-pw", "remote-url-pw", "commented-pw", "work-header-pw", "xdg-header-pw", "nested-pw", "workspace-inc-pw"];

describe("git's configuration reaches the sandbox without its credentials", () => {
  let s: Scratch;
  let home: string;
  let xdgGit: string;
  beforeAll(() => {
    s = scratch({ git: true });
    home = join(s.root, "home");
    xdgGit = join(home, ".config", "git");
    mkdirSync(xdgGit, { recursive: true });
    writeFileSync(join(home, ".gitconfig"), [
      "[user]",
      "\tname = Daily User",
      "\temail = daily@example.invalid",
      `[url "https://x-access-token:${TOKEN}@github.com/"]`,
      "\tinsteadOf = https://github.com/",
      "[http]",
      "\textraheader = AUTHORIZATION: basic c2VjcmV0LWJhc2lj",
      "\tproxy = http://me:proxy-pass-42@proxy.invalid:3128",
      `[HTTP "https://gitlab.invalid/"]`,
      "\tExtraHeader = \"PRIVATE-TOKEN: \\",
      "inline-helper-pw\"",
      "[credential]",
      "\thelper = \"!f() { echo username=me; echo password=inline-helper-pw; }; f\"",
      '[remote "origin"]',
      "\turl = https://me:remote-url-pw@example.invalid/r.git",
      "[sendemail]",
      "\tsmtpPass = hunter2-smtp",
      "#\textraheader = AUTHORIZATION: bearer commented-pw",
      "[include]",
      "\tpath = ~/.gitconfig-work",
      `\tpath = ${join(s.ws, "inc.gitconfig")}`,
      '[includeIf "gitdir:/"]',
      "\tpath = work.inc",
      "",
    ].join("\n"));
    writeFileSync(join(home, ".gitconfig-work"), `[user]\n\tsigningkey = 0xDEADBEEF\n[http "https://work.invalid/"]\n\textraheader = Authorization: Bearer work-header-pw\n[include]\n\tpath = ~/.config/git/nested.inc\n`);
    writeFileSync(join(home, "work.inc"), `[core]\n\tabbrev = 12\n`);
    writeFileSync(join(xdgGit, "nested.inc"), `[http]\n\tcookiefile = /nested-pw\n[alias]\n\tst = status\n`);
    writeFileSync(join(xdgGit, "config"), `[http]\n\textraHeader = Authorization: token xdg-header-pw\n[color]\n\tui = auto\n`);
    writeFileSync(join(xdgGit, "ignore"), "*.swp\n");
    // In the workspace, which the sandbox sees as it is: git inside must not be led to it by an include.
    writeFileSync(join(s.ws, "inc.gitconfig"), `[http]\n\textraheader = X-Token: workspace-inc-pw\n`);
  });
  afterAll(() => s.cleanup());

  const vak = (args: string[]) => runVak(["exec", ...args], { cwd: s.ws, env: baseEnv({ HOME: home, XDG_CONFIG_HOME: join(home, ".config") }) });

  it("git config --list inside shows no extraheader, token URL, proxy password, helper, smtpPass or included token", async () => {
    const r = await vak(["--profile", "git", "--", "git", "config", "--list", "--show-origin"]);
    expect(r.code, r.stderr).toBe(0);
    for (const v of SECRETS) expect(r.stdout).not.toContain(v);
    expect(r.stdout).not.toMatch(/extraheader|credential\.helper|smtppass|insteadof|http\.proxy|cookiefile/i);
    // What is not a credential stays: identity, the signing key's id, settings, and what the includes bring.
    for (const v of ["user.name=Daily User", "user.email=daily@example.invalid", "user.signingkey=0xDEADBEEF", "color.ui=auto", "core.abbrev=12", "alias.st=status"]) expect(r.stdout).toContain(v);
  });

  it("reading the files themselves shows no credential either, comments included", async () => {
    const r = await vak(["--profile", "git", "--", "sh", "-c", "cat ~/.gitconfig ~/.gitconfig-work ~/work.inc ~/.config/git/config ~/.config/git/nested.inc ~/.config/git/ignore"]);
    expect(r.code, r.stderr).toBe(0);
    for (const v of SECRETS) expect(r.stdout).not.toContain(v);
    expect(r.stdout).toContain("*.swp");
  });

  it("git credential fill inside gets no password from a helper in ~/.gitconfig", async () => {
    const r = await vak(["--profile", "git", "--", "sh", "-c", "printf 'protocol=https\\nhost=github.com\\n\\n' | GIT_TERMINAL_PROMPT=0 git credential fill; echo rc=$?"]);
    expect(r.stdout + r.stderr).not.toContain("inline-helper-pw");
    expect(r.stdout).not.toMatch(/^password=/m);
  });

  it("an include whose target another grant binds as it is (the workspace) is not followed", async () => {
    const r = await vak(["--profile", "git", "--", "git", "config", "--global", "--get-all", "include.path"]);
    expect(r.stdout.trim().split("\n")).toEqual(["~/.gitconfig-work"]);
  });

  it("a commit inside still carries the identity from ~/.gitconfig", async () => {
    writeFileSync(join(s.ws, "f.txt"), "one\n");
    const r = await vak(["--profile", "git", "--", "sh", "-c", "git add f.txt && git commit -qm second && git log -1 --format='%an <%ae>'"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe("Daily User <daily@example.invalid>");
    expect(execFileSync("git", ["log", "-1", "--format=%ae"], { cwd: s.ws, encoding: "utf8" }).trim()).toBe("daily@example.invalid");
  });

  it("--print-plan says which lines each file lost and what brought an included file in, and shows no credential", async () => {
    const r = await vak(["--profile", "git", "--print-plan", "--json", "--", "true"]);
    expect(r.code, r.stderr).toBe(0);
    for (const v of SECRETS) expect(r.stdout).not.toContain(v);
    const plan = JSON.parse(r.stdout) as { redacted: { path: string; removed: string[]; from: string }[] };
    // (and /etc/gitconfig, where the machine has one)
    expect(plan.redacted.map((x) => x.path).filter((p) => p !== "/etc/gitconfig")).toEqual([join(home, ".gitconfig"), join(home, ".gitconfig-work"), join(xdgGit, "nested.inc"), join(home, "work.inc"), join(xdgGit, "config")]);
    const top = plan.redacted[0]!;
    expect(top.removed.join("; ")).toMatch(/line 7 \(http\.extraheader: .*line 21 \(include\.path: not followed: inside a path bound from the host/);
    expect(plan.redacted[1]!.from).toMatch(/^profile git \(preset presets\/git\.toml:\d+\); included by ~\/\.gitconfig$/);
  });
});
