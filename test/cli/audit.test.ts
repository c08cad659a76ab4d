import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { AuditReportSchema } from "../../src/audit/finding.js";
import { pinFileName } from "../../src/mcp/pins.js";
import { auditHome, type AuditHome } from "../support/audit.js";
import { ROOT } from "../support/paths.js";
import { serve } from "../support/serve.js";
import { runVak, spawnVak } from "../support/vak.js";

const mode = (p: string) => statSync(p).mode & 0o7777;
const isRoot = process.getuid?.() === 0;

let h: AuditHome;
beforeEach(() => {
  h = auditHome();
});
afterEach(() => h.cleanup());

const cfg = () => join(h.config, "vak", "config.toml");

describe("vak audit: the report", () => {
  it("a fresh home on a full sandbox has nothing at warn or above, and exits 0", async () => {
    const r = await h.audit();
    expect(r.report.findings.filter((f) => f.severity !== "info")).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.report.version).toBe(1);
  });

  it("the text report names each finding and exits 1", async () => {
    h.write(cfg(), "", 0o644);
    const r = await runVak(["audit"], { cwd: h.workspace, env: h.env });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("control.readable");
    expect(r.stdout).toContain("[--fix]");
  });
});

describe("sandbox", () => {
  it("sandbox.reduced: where user namespaces are refused, the full profile is missing (not fixable)", async () => {
    const r = await h.audit(["--fix"], { wrapper: [inject("noUserns")] });
    expect(r.ids).toContain("sandbox.reduced");
    expect(r.ids).toContain("sandbox.layer.user-namespaces");
    expect(r.find("sandbox.reduced")!.fixable).toBe(false);
    expect(r.report.fixed).toEqual([]);
    expect(r.code).toBe(1);
  });

  // The state exists only for root (any other uid has RLIMIT_NPROC): built for real with no user namespaces and,
  // in a mount namespace of its own, an empty tmpfs where the cgroup hierarchy was.
  it.skipIf(process.getuid?.() !== 0)("sandbox.procs-limit: root with no pids cgroup and no user namespaces (so no pid namespace of its own) cannot hold a process limit (not fixable)", async () => {
    expect((await h.audit()).ids).not.toContain("sandbox.procs-limit");
    const noCgroups = ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount -t tmpfs vak-no-cgroups /sys/fs/cgroup && exec "$@"', "sh"];
    const r = await h.audit(["--fix"], { wrapper: [...noCgroups, inject("noUserns")] });
    expect(r.find("sandbox.procs-limit")).toMatchObject({ severity: "info", fixable: false });
    expect(r.find("sandbox.procs-limit")!.detail).toMatch(/--max-procs is refused/);
    expect(r.report.fixed).toEqual([]);
    // With the cgroups back (user namespaces still refused), the pids cgroup holds the limit: no finding.
    expect((await h.audit([], { wrapper: [inject("noUserns")] })).ids).not.toContain("sandbox.procs-limit");
  });
});

/** A copy of Vak's installation (what runs, and its modules by a link), in dir. */
function installCopy(dir: string): string {
  for (const part of ["package.json", "bin", "dist", "build/Release/vak-launcher", "build/Release/vak-engine.node"]) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** `vak audit --json` as the copy's own CLI runs it (it audits the installation it runs from), checked by the schema. */
function auditFrom(pkg: string, args: string[] = []) {
  const r = spawnSync(process.execPath, [join(pkg, "bin", "vak.cjs"), "audit", "--json", ...args], { cwd: h.workspace, env: h.env, encoding: "utf8" });
  const report = AuditReportSchema.parse(JSON.parse(r.stdout.trim().split("\n").pop() ?? ""));
  expect(r.status, r.stderr).toBe(report.ok ? 0 : 1);
  return { code: r.status, report, ids: report.findings.map((f) => f.id), find: (id: string) => report.findings.find((f) => f.id === id) };
}

describe("sandbox: what this machine or this installation cannot do", () => {
  it("sandbox.unavailable: vak audit run inside a Vak sandbox of its own (no seccomp listener, no openat2, no user namespaces there) says no sandbox can be built", async () => {
    expect((await h.audit()).ids).not.toContain("sandbox.unavailable");
    // The outer sandbox refuses what a nested one needs; the inner audit probes for real and must say so, not run weaker.
    const r = await h.audit(["--fix"], { wrapper: [process.execPath, join(ROOT, "bin", "vak.cjs"), "exec", "--allow-read", ROOT, "--"] });
    expect(r.find("sandbox.unavailable")).toMatchObject({ severity: "critical", fixable: false });
    expect(r.find("sandbox.unavailable")!.detail).toMatch(/seccomp user notification/);
    // No sandbox, no smoke test tried: the finding is the unavailability itself.
    expect(r.ids).not.toContain("sandbox.smoke-test");
    expect(r.report.fixed).toEqual([]);
    expect(r.code).toBe(1);
  });

  it("sandbox.smoke-test: a TMPDIR that does not exist, or that lies in Vak's own config (held read-only in every sandbox), fails the real sandboxed command", async () => {
    for (const tmp of [join(h.root, "no-such-dir"), join(h.config, "vak")]) {
      const r = await h.audit(["--fix"], { env: { TMPDIR: tmp } });
      const f = r.find("sandbox.smoke-test");
      expect(f, tmp).toMatchObject({ severity: "critical", fixable: false });
      expect(f!.detail).toMatch(tmp.endsWith("no-such-dir") ? /cannot make a temporary workspace/ : /Permission denied|Read-only/);
      expect(r.code).toBe(1);
    }
    expect((await h.audit()).ids).not.toContain("sandbox.smoke-test");
  });

  it("sandbox.egress-engine: a copy of Vak whose engine is missing, then not a loadable library, says network grants are refused", async () => {
    const pkg = installCopy(join(h.root, "pkg"));
    const engine = join(pkg, "build", "Release", "vak-engine.node");
    expect(auditFrom(pkg).ids).not.toContain("sandbox.egress-engine");
    rmSync(engine);
    const missing = auditFrom(pkg, ["--fix"]);
    expect(missing.find("sandbox.egress-engine")).toMatchObject({ severity: "warn", fixable: false });
    expect(missing.find("sandbox.egress-engine")!.detail).toContain("missing");
    expect(missing.code).toBe(1);
    h.write(engine, "#!/bin/sh\nnot an ELF object\n", 0o755);
    const broken = auditFrom(pkg, ["--fix"]);
    expect(broken.find("sandbox.egress-engine")).toMatchObject({ severity: "warn", fixable: false });
    expect(broken.report.fixed).toEqual([]);
    cpSync(join(ROOT, "build", "Release", "vak-engine.node"), engine);
    expect(auditFrom(pkg).ids).not.toContain("sandbox.egress-engine");
  });

  it("install.parent-writable: a copy of Vak under a directory anyone can write (no sticky bit) is critical; --fix removes o+w from the one that is yours", async () => {
    const open = join(h.root, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    const pkg = installCopy(join(open, "pkg"));
    const r = auditFrom(pkg);
    expect(r.report.findings.find((f) => f.id === "install.parent-writable" && f.path === open)).toMatchObject({ severity: "critical", fixable: true });
    const fixed = auditFrom(pkg, ["--fix"]);
    expect(fixed.report.fixed).toContainEqual({ id: "install.parent-writable", path: open, from: "0777", to: "0775" });
    expect(fixed.report.findings.find((f) => f.id === "install.parent-writable" && f.path === open)).toBeUndefined();
    expect(mode(open)).toBe(0o775);
    // A sticky one (like /tmp) is not a finding.
    chmodSync(open, 0o1777);
    expect(auditFrom(pkg).report.findings.find((f) => f.id === "install.parent-writable" && f.path === open)).toBeUndefined();
  });

  it("install.not-held: Vak installed inside this workspace, where no sandbox of it can be planned (more held paths than the sandbox carries), is critical", async () => {
    const pkg = installCopy(join(h.workspace, "node_modules", "vak"));
    // Inside the workspace but held read-only: not a finding.
    expect(auditFrom(pkg).ids).not.toContain("install.not-held");
    // 2,100 protected names that are links (each holds its target): the plan cannot carry them, so nothing would hold the copy.
    const many = join(h.workspace, "many");
    for (let i = 0; i < 2100; i++) {
      mkdirSync(join(many, `d${i}`), { recursive: true });
      h.write(join(many, `d${i}`, "t"), "x\n", 0o644);
      symlinkSync("t", join(many, `d${i}`, ".envrc"));
    }
    const r = auditFrom(pkg, ["--fix"]);
    expect(r.find("install.not-held")).toMatchObject({ severity: "critical", fixable: false, path: pkg });
    expect(r.find("install.not-held")!.detail).toMatch(/cannot plan a sandbox/);
    expect(r.report.fixed).toEqual([]);
    rmSync(many, { recursive: true, force: true });
    expect(auditFrom(pkg).ids).not.toContain("install.not-held");
  });
});

describe("control files", () => {
  it("control.readable: a config others can read is narrowed to 0600 by --fix, on the record", async () => {
    h.write(cfg(), "", 0o644);
    const before = await h.audit();
    const f = before.find("control.readable")!;
    expect(f).toMatchObject({ severity: "warn", fixable: true, path: cfg() });
    const fixed = await h.audit(["--fix"]);
    expect(fixed.report.fixed).toEqual([{ id: "control.readable", path: cfg(), from: "0644", to: "0600" }]);
    expect(fixed.ids).not.toContain("control.readable");
    expect(fixed.code).toBe(0);
    expect(mode(cfg())).toBe(0o600);
    expect(h.fixedEvents()).toEqual([{ check: "control.readable", path: cfg(), from: "0644", to: "0600" }]);
    expect((await runVak(["journal", "verify"], { cwd: h.workspace, env: h.env })).code).toBe(0);
    const sessions = JSON.parse((await runVak(["journal", "list", "--json"], { cwd: h.workspace, env: h.env })).stdout) as { id: string; kind: string }[];
    const shown = await runVak(["journal", "show", sessions.find((x) => x.kind === "audit")!.id], { cwd: h.workspace, env: h.env });
    expect(shown.stdout).toContain(`control.readable: ${cfg()} 0644 → 0600`);
  });

  it("control.readable: the repository trust records (trust.json) others can read are closed by --fix", async () => {
    const trust = h.write(join(h.state, "vak", "trust.json"), JSON.stringify({ version: 1, trusted: [] }), 0o644);
    expect((await h.audit()).report.findings.find((f) => f.path === trust)).toMatchObject({ id: "control.readable", fixable: true });
    const fixed = await h.audit(["--fix"]);
    expect(fixed.report.fixed).toContainEqual({ id: "control.readable", path: trust, from: "0644", to: "0600" });
    expect(mode(trust)).toBe(0o600);
  });

  it("control.readable is critical for the secret store", async () => {
    const store = h.write(join(h.config, "vak", "secrets.json"), '{"version":1,"secrets":{}}\n', 0o640);
    const r = await h.audit();
    expect(r.report.findings.find((f) => f.path === store)).toMatchObject({ id: "control.readable", severity: "critical" });
    expect((await h.audit(["--fix"])).ids).not.toContain("control.readable");
    expect(mode(store)).toBe(0o600);
  });

  it("control.writable: a world-writable secret store and state directory are closed by --fix", async () => {
    const store = h.write(join(h.config, "vak", "secrets.json"), '{"version":1,"secrets":{}}\n', 0o666);
    const dir = join(h.state, "vak");
    chmodSync(dir, 0o777);
    const r = await h.audit();
    expect(r.report.findings.filter((f) => f.id === "control.writable").map((f) => f.path).sort()).toEqual([store, dir].sort());
    expect(r.find("control.writable")!.severity).toBe("critical");
    const fixed = await h.audit(["--fix"]);
    expect(fixed.ids).not.toContain("control.writable");
    expect(mode(store)).toBe(0o600);
    expect(mode(dir)).toBe(0o700);
    expect(h.fixedEvents().map((e) => e.path).sort()).toEqual([store, dir].sort());
  });

  it("control.symlink: a config that is a link is reported, and --fix neither follows it nor changes what it points to", async () => {
    const target = h.write(join(h.root, "elsewhere.toml"), "", 0o644);
    symlinkSync(target, cfg());
    const r = await h.audit(["--fix"]);
    expect(r.find("control.symlink")).toMatchObject({ severity: "warn", fixable: false, path: cfg() });
    expect(mode(target)).toBe(0o644);
    expect(r.report.fixed).toEqual([]);
  });

  it("control.parent-writable: a world-writable parent (no sticky bit) of the config loses o+w with --fix", async () => {
    h.write(cfg(), "");
    chmodSync(h.config, 0o777);
    const r = await h.audit();
    expect(r.report.findings.find((f) => f.id === "control.parent-writable" && f.path === h.config)).toMatchObject({ severity: "critical", fixable: true });
    const fixed = await h.audit(["--fix"]);
    expect(fixed.ids).not.toContain("control.parent-writable");
    expect(mode(h.config)).toBe(0o775);
  });

  it("control.parent-writable: a sticky world-writable parent (like /tmp) is not a finding", async () => {
    h.write(cfg(), "");
    chmodSync(h.config, 0o1777);
    expect((await h.audit()).ids).not.toContain("control.parent-writable");
  });

  it("control.synced: Vak's config inside a Dropbox folder is reported (not fixable)", async () => {
    const synced = join(h.root, "Dropbox", "cfg");
    mkdirSync(join(synced, "vak"), { recursive: true, mode: 0o700 });
    chmodSync(join(h.root, "Dropbox"), 0o700);
    h.write(join(synced, "vak", "config.toml"), "");
    const r = await h.audit(["--fix"], { env: { XDG_CONFIG_HOME: synced } });
    expect(r.find("control.synced")).toMatchObject({ severity: "warn", fixable: false });
  });

  it.runIf(isRoot)("control.owner: a control file of another user is critical and not fixable", async () => {
    h.write(cfg(), "");
    chownSync(cfg(), 65534, 65534);
    const r = await h.audit(["--fix"]);
    expect(r.find("control.owner")).toMatchObject({ severity: "critical", fixable: false, path: cfg() });
    expect(statSync(cfg()).uid).toBe(65534);
  });

  it("control files the config names: a TLS key others can read is critical, closed by --fix", async () => {
    const key = h.write(join(h.root, "tls", "key.pem"), "not a key\n", 0o644);
    const cert = h.write(join(h.root, "tls", "cert.pem"), "not a cert\n", 0o644);
    h.write(cfg(), `[server]\ntls_cert = "${cert}"\ntls_key = "${key}"\n`);
    const r = await h.audit();
    expect(r.report.findings.find((f) => f.path === key)).toMatchObject({ id: "control.readable", severity: "critical" });
    expect(r.report.findings.find((f) => f.path === cert)).toBeUndefined();
    await h.audit(["--fix"]);
    expect(mode(key)).toBe(0o600);
    expect(mode(cert)).toBe(0o644);
  });

  it("config.invalid: a config that does not parse is critical", async () => {
    h.write(cfg(), "[server\n");
    expect((await h.audit()).find("config.invalid")).toMatchObject({ severity: "critical", fixable: false });
  });
});

describe("secrets", () => {
  const token = `ghp_${"A1b2C3d4E5".repeat(4)}`;
  it("secrets.literal: a credential written in the config is critical, named by line, never printed", async () => {
    h.write(cfg(), `[mcp_servers.gh]\ncommand = ["/usr/bin/gh-mcp"]\nset_env = { GITHUB_TOKEN = "${token}" }\n`);
    const r = await h.audit(["--fix"]);
    const f = r.find("secrets.literal")!;
    expect(f).toMatchObject({ severity: "critical", fixable: false, path: cfg() });
    expect(f.detail).toContain("line 3");
    expect(r.stdout).not.toContain(token);
    const text = await runVak(["audit"], { cwd: h.workspace, env: h.env });
    expect(text.stdout).not.toContain(token);
  });

  it("secrets.literal: in this repository's .vak/config.toml too", async () => {
    h.write(join(h.workspace, ".vak", "config.toml"), `[mcp_servers.x]\ncommand = ["/bin/x"]\nset_env = { K = "sk-proj-${"x".repeat(40)}" }\n`);
    expect((await h.audit()).find("secrets.literal")?.path).toBe(join(h.workspace, ".vak", "config.toml"));
  });

  it("secrets.literal: a key in the repository's .mcp.json env", async () => {
    h.write(join(h.workspace, ".mcp.json"), JSON.stringify({ mcpServers: { x: { command: "x", env: { KEY: `AKIA${"ABCDEFGHIJKLMNOP"}` } } } }), 0o644);
    expect((await h.audit()).find("secrets.literal")?.path).toBe(join(h.workspace, ".mcp.json"));
  });

  it("secrets.unresolved: a reference to a secret that is not in the store", async () => {
    h.write(cfg(), `[mcp_servers.gh]\ncommand = ["/usr/bin/gh-mcp"]\nsecrets = [{ ref = "secret:NOPE", env = "GITHUB_TOKEN" }, { ref = "env:VAK_AUDIT_UNSET", env = "B" }]\n`);
    const r = await h.audit();
    const found = r.report.findings.filter((f) => f.id === "secrets.unresolved");
    expect(found).toHaveLength(2);
    expect(found[0]!.detail).toContain("secret:NOPE");
  });

  it("secrets.cmd-not-absolute: a password-manager command found through PATH", async () => {
    h.write(cfg(), `[secret_commands]\ngh = ["pass", "show", "github"]\nok = ["/usr/bin/pass", "show", "x"]\n`);
    const r = await h.audit();
    expect(r.report.findings.filter((f) => f.id === "secrets.cmd-not-absolute").map((f) => f.detail)).toEqual([expect.stringContaining("secret_commands.gh")]);
  });
});

describe("broad rules", () => {
  it("rules.*: the home directory, the root, Vak's own state, a wildcard host and exec approvals off", async () => {
    h.write(cfg(), [
      "[approvals]", 'exec = "allow"',
      "[mcp_servers.wide]", 'command = ["/bin/srv"]', 'mode = "workspace-write"', 'write = ["~"]', 'read = ["/"]', 'net = ["*", "read:*.com"]',
      "[mcp_servers.own]", 'command = ["/bin/srv"]', `read = ["${join(h.state, "vak")}"]`,
      "[mcp_servers.fine]", 'command = ["/bin/srv"]', 'read = ["/usr/share/doc"]', 'net = ["api.github.com"]',
    ].join("\n"));
    const r = await h.audit(["--fix"]);
    expect(r.find("rules.grant-home")).toMatchObject({ severity: "critical", fixable: false });
    expect(r.find("rules.grant-root")).toMatchObject({ severity: "warn" });
    expect(r.report.findings.filter((f) => f.id === "rules.net-wildcard")).toHaveLength(2);
    expect(r.find("rules.grant-vak-dirs")!.title).toContain("own");
    expect(r.find("rules.approvals-exec-allow")).toMatchObject({ severity: "warn" });
    expect(r.report.findings.some((f) => f.title.includes("fine"))).toBe(false);
  });
});

describe("broad rules of the user's [exec] and profiles", () => {
  it("rules.*: [exec] reading the home directory, a profile writing /, reaching any host, and one granting Vak's state, each named", async () => {
    h.write(cfg(), [
      "[exec]", 'allow_read = ["~"]',
      "[profiles.wide]", 'allow_write = ["/"]', 'allow_net = ["*"]',
      "[profiles.own]", `allow_read = ["${join(h.state, "vak")}"]`,
      "[profiles.fine]", 'allow_read = ["/usr/share/doc"]', 'allow_net = ["api.github.com"]',
    ].join("\n"));
    const r = await h.audit(["--fix"]);
    expect(r.ids).not.toContain("config.invalid");
    expect(r.find("rules.grant-home")).toMatchObject({ severity: "warn", fixable: false, path: cfg(), detail: expect.stringContaining("exec.allow_read") });
    expect(r.find("rules.grant-root")).toMatchObject({ severity: "critical", fixable: false, title: expect.stringContaining("the profile wide") });
    expect(r.find("rules.net-wildcard")).toMatchObject({ fixable: false, detail: expect.stringContaining("profiles.wide.allow_net") });
    expect(r.find("rules.grant-vak-dirs")).toMatchObject({ fixable: false, title: expect.stringContaining("the profile own") });
    expect(r.report.findings.some((f) => f.title.includes("fine"))).toBe(false);
  });

  it("rules.*: this repository's [exec] and profiles count once trusted, not before", async () => {
    const repo = join(h.workspace, ".vak", "config.toml");
    h.write(repo, '[exec]\nallow_write = ["..", "~"]\n[profiles.deploy]\nallow_net = ["*"]\n', 0o644);
    const before = await h.audit();
    expect(before.ids.filter((i) => i.startsWith("rules."))).toEqual([]);
    expect((await runVak(["trust", "--yes"], { cwd: h.workspace, env: h.env })).code).toBe(0);
    const r = await h.audit();
    // ".." leaves the repository, so Vak skips it (it grants nothing); "~" is the home directory.
    expect(r.report.findings.filter((f) => f.id === "rules.grant-home")).toEqual([
      expect.objectContaining({ severity: "critical", fixable: false, path: repo, title: expect.stringContaining("this repository's [exec]"), detail: expect.stringContaining('"~"') }),
    ]);
    expect(r.find("rules.net-wildcard")).toMatchObject({ fixable: false, path: repo, title: expect.stringContaining("this repository's profile deploy") });
  });

  it("rules.approvals-write-allow: writes without asking is information only (exit 0)", async () => {
    h.write(cfg(), '[approvals]\nwrite = "allow"\n');
    const r = await h.audit(["--fix"]);
    expect(r.find("rules.approvals-write-allow")).toMatchObject({ severity: "info", fixable: false, path: cfg() });
    expect(r.code).toBe(0);
  });

  it("a full-access mode cannot be a default: in a profile it is config.invalid, never a silent grant", async () => {
    h.write(cfg(), "[profiles.all]\nmode = \"full-access\"\n");
    expect((await h.audit()).find("config.invalid")).toMatchObject({ severity: "critical", detail: expect.stringContaining("full access is never a default") });
  });
});

describe("trust of this repository's .vak/config.toml", () => {
  it("trust.repo-config-changed: a repository config edited after vak trust is reported (not fixable)", async () => {
    const repo = join(h.workspace, ".vak", "config.toml");
    h.write(repo, '[exec]\nallow_read = ["src"]\n', 0o644);
    expect((await runVak(["trust", "--yes"], { cwd: h.workspace, env: h.env })).code).toBe(0);
    expect((await h.audit()).ids).not.toContain("trust.repo-config-changed");
    h.write(repo, '[exec]\nallow_read = ["src", ".."]\n', 0o644);
    const r = await h.audit(["--fix"]);
    expect(r.find("trust.repo-config-changed")).toMatchObject({ severity: "warn", fixable: false, path: repo });
    expect(r.code).toBe(1);
  });

  it("trust.repo-config-unreadable: a repository config vak exec refuses to run with (an unknown key) is reported, naming it", async () => {
    const repo = join(h.workspace, ".vak", "config.toml");
    h.write(repo, '[exec]\ndeny_read = ["secrets"]\nfuture_key = 1\n', 0o644);
    const r = await h.audit();
    expect(r.find("trust.repo-config-unreadable")).toMatchObject({ severity: "warn", fixable: false, path: repo });
    expect(JSON.stringify(r.find("trust.repo-config-unreadable"))).toMatch(/config\.toml:3: exec\.future_key: unknown key/);
    h.write(repo, '[exec]\ndeny_read = ["secrets"]\n', 0o644);
    expect((await h.audit()).ids).not.toContain("trust.repo-config-unreadable");
  });

  it("trust.records-damaged: a trust file that is not JSON", async () => {
    h.write(join(h.state, "vak", "trust.json"), "{not json");
    expect((await h.audit()).find("trust.records-damaged")).toMatchObject({ severity: "warn", fixable: false, path: join(h.state, "vak", "trust.json") });
  });
});

describe("broad rules of this repository's approved proposals", () => {
  it("rules.grant-home: a .vak/config.toml proposal, once approved, granting the home directory (as ..)", async () => {
    const toml = (write: string) => `[mcp_servers.tool]\ncommand = ["/bin/srv"]\nmode = "workspace-write"\nwrite = ["${write}"]\n`;
    h.write(join(h.workspace, ".vak", "config.toml"), toml(".."), 0o644);
    // Not approved: its grants count for nothing yet (the proposal is not started).
    expect((await h.audit()).ids).not.toContain("rules.grant-home");
    expect((await runVak(["mcp", "approve", "tool", "--yes"], { cwd: h.workspace, env: h.env })).code).toBe(0);
    const r = await h.audit();
    expect(r.find("rules.grant-home")).toMatchObject({ severity: "critical", path: join(h.workspace, ".vak", "config.toml") });
  });
});

describe("the record", () => {
  /** A journal with a few events in it: what --fix writes when it narrows a mode. */
  async function journalWithEvents() {
    h.write(cfg(), "", 0o644);
    await h.audit(["--fix"]);
    return join(h.state, "vak", "journal.db");
  }

  it("record.chain-broken: an event changed outside Vak breaks the chain, and audit says so", async () => {
    const path = await journalWithEvents();
    expect((await h.audit()).ids).not.toContain("record.chain-broken");
    const db = new Database(path);
    db.exec("DROP TRIGGER events_no_update");
    db.prepare("UPDATE events SET payload = ? WHERE kind = 'audit.fixed'").run(JSON.stringify({ check: "x", path: "/", from: "0", to: "0" }));
    db.close();
    const r = await h.audit(["--fix"]);
    expect(r.find("record.chain-broken")).toMatchObject({ severity: "critical", fixable: false });
  });

  it("record.retention: sessions older than journal.retention_days", async () => {
    const path = await journalWithEvents();
    h.write(cfg(), "[journal]\nretention_days = 1\n");
    expect((await h.audit()).ids).not.toContain("record.retention");
    const db = new Database(path);
    db.prepare("UPDATE sessions SET started = ?").run(new Date(Date.now() - 5 * 86_400_000).toISOString());
    db.close();
    expect((await h.audit()).find("record.retention")).toMatchObject({ severity: "warn" });
  });

  // A small file system of its own, in a mount namespace of this one process (nothing else sees it).
  it.runIf(isRoot)("record.disk-space: a journal on a nearly full file system", async () => {
    const small = join(h.root, "small");
    mkdirSync(small, { mode: 0o700 });
    const r = spawnSync("unshare", ["-m", "--propagation", "private", "sh", "-c", 'mount -t tmpfs -o size=64m,mode=0700 vak-audit-small "$1" && exec "$2" "$3" audit --json', "sh", small, process.execPath, join(ROOT, "bin", "vak.cjs")],
      { cwd: h.workspace, env: { ...h.env, VAK_JOURNAL: join(small, "journal.db") }, encoding: "utf8" });
    const report = JSON.parse(r.stdout.trim()) as { findings: { id: string; severity: string; path?: string }[] };
    expect(report.findings.find((f) => f.id === "record.disk-space")).toMatchObject({ severity: "critical", path: small });
    expect(r.status).toBe(1);
  });

  it("record.unreadable: a journal that is not a database", async () => {
    h.write(join(h.state, "vak", "journal.db"), "not sqlite at all, and long enough to be read as a header ".repeat(4));
    expect((await h.audit()).find("record.unreadable")).toMatchObject({ severity: "critical", fixable: false });
  });

  it("record.spool-backlog: a finished session's spool not yet ingested", async () => {
    h.write(join(h.state, "vak", "spool", "s1.123.done.jsonl"), "");
    const r = await h.audit();
    expect(r.find("record.spool-backlog")).toMatchObject({ severity: "warn", fixable: false });
  });
});

describe("exposure", () => {
  it("exposure.invalid: a bind beyond loopback without trusted_hosts is what vak serve refuses", async () => {
    h.write(cfg(), '[server]\nhost = "0.0.0.0"\n');
    expect((await h.audit()).find("exposure.invalid")).toMatchObject({ severity: "critical", fixable: false });
  });

  it("exposure.not-loopback and exposure.tls-by-proxy: an exposed bind is a warning", async () => {
    h.write(cfg(), '[server]\nhost = "0.0.0.0"\ntrusted_hosts = ["vak.example.internal"]\ntls_terminated_by_proxy = true\nterminal = true\n');
    const r = await h.audit();
    expect(r.find("exposure.not-loopback")).toMatchObject({ severity: "warn" });
    expect(r.find("exposure.tls-by-proxy")).toMatchObject({ severity: "info" });
    expect(r.find("exposure.terminal")).toMatchObject({ severity: "info" });
  });

  it("information only (the terminal on a loopback bind) leaves the exit status 0", async () => {
    h.write(cfg(), "[server]\nterminal = true\n");
    const r = await h.audit();
    expect(r.find("exposure.terminal")).toMatchObject({ severity: "info" });
    expect(r.code).toBe(0);
    expect(r.report.ok).toBe(true);
  });

  describe("--deep", () => {
    let fake: Server | undefined;
    afterEach(() => new Promise<void>((resolve) => (fake ? fake.close(() => resolve()) : resolve())));

    it("exposure.deep-foreign-host and -origin: a server on the configured port that answers anyone is critical", async () => {
      fake = createServer((_q, s) => s.end("ok"));
      await new Promise<void>((resolve) => fake!.listen(0, "127.0.0.1", resolve));
      h.write(cfg(), `[server]\nport = ${(fake.address() as AddressInfo).port}\n`);
      expect((await h.audit()).ids.filter((i) => i.startsWith("exposure.deep"))).toEqual([]);
      const r = await h.audit(["--deep"]);
      expect(r.find("exposure.deep-foreign-host")).toMatchObject({ severity: "critical" });
      expect(r.find("exposure.deep-foreign-origin")).toMatchObject({ severity: "critical" });
      expect(r.report.deep).toBe(true);
    });

    it("a real vak serve refuses both: no deep finding", async () => {
      const probe = createServer();
      await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
      const port = (probe.address() as AddressInfo).port;
      await new Promise<void>((resolve) => probe.close(() => resolve()));
      const served = await serve({ workspace: h.workspace, config: `[server]\nport = ${port}\n` });
      try {
        h.write(cfg(), `[server]\nport = ${port}\n`);
        const r = await h.audit(["--deep"]);
        expect(r.ids.filter((i) => i.startsWith("exposure.deep"))).toEqual([]);
      } finally {
        await served.close();
      }
    });

    it("exposure.deep-not-running: nothing on the port is only information", async () => {
      h.write(cfg(), "[server]\nport = 1\n");
      expect((await h.audit(["--deep"])).find("exposure.deep-not-running")).toMatchObject({ severity: "info" });
    });

    it("exposure.deep-skipped: with no fixed port, or TLS by vak itself, nothing is probed and it says why", async () => {
      h.write(cfg(), "[server]\nterminal = true\n");
      const r = await h.audit(["--deep"]);
      expect(r.find("exposure.deep-skipped")).toMatchObject({ severity: "info", detail: expect.stringContaining("port is not set") });
      expect(r.ids.filter((i) => i.startsWith("exposure.deep") && i !== "exposure.deep-skipped")).toEqual([]);
      expect(r.code).toBe(0);
      const key = h.write(join(h.root, "tls", "key.pem"), "not a key\n", 0o600);
      const cert = h.write(join(h.root, "tls", "cert.pem"), "not a cert\n", 0o644);
      h.write(cfg(), `[server]\nport = 1\ntls_cert = "${cert}"\ntls_key = "${key}"\n`);
      const tls = await h.audit(["--deep"]);
      expect(tls.find("exposure.deep-skipped")).toMatchObject({ severity: "info", detail: expect.stringContaining("TLS") });
      expect(tls.find("exposure.deep-not-running")).toBeUndefined();
    });
  });
});

describe("trust and drift", () => {
  it("trust.unpinned-package: npx -y PKG without a version; an exact version is not a finding", async () => {
    h.write(cfg(), ['[mcp_servers.fs]', 'command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]',
      '[mcp_servers.pinned]', 'command = ["npx", "-y", "@modelcontextprotocol/server-filesystem@2025.8.21"]',
      '[mcp_servers.latest]', 'command = ["/usr/bin/npx", "some-server@latest"]'].join("\n"));
    const r = await h.audit();
    const found = r.report.findings.filter((f) => f.id === "trust.unpinned-package");
    expect(found.map((f) => f.title)).toEqual([expect.stringContaining(" fs "), expect.stringContaining(" latest ")]);
  });

  it("trust.pin-drift: a tool whose definition changed since it was pinned waits for vak mcp trust", async () => {
    const entry = { digest: "0".repeat(64), definition: { name: "read" }, at: new Date().toISOString() };
    h.write(join(h.state, "vak", "mcp", "pins", pinFileName("fs")), JSON.stringify({ v: 1, server: "fs", command: ["/bin/fs"], created: entry.at, tools: { read: entry }, pending: { read: { ...entry, why: "changed" } } }));
    const r = await h.audit();
    expect(r.find("trust.pin-drift")).toMatchObject({ severity: "warn", fixable: false });
    expect(r.find("trust.pin-drift")!.fix).toContain("vak mcp trust fs");
  });
});

describe("trust: a running workload's spec", () => {
  it("trust.workload-drift: a workload running while its spec file is edited runs the old generation, and audit says so", async () => {
    const spec = (secs: number) => ['version = 1', 'name = "slow"', 'workspace = "."', '[harness]', 'model = "openai:gpt-4.1"',
      '[tools.wait]', `command = ["/bin/sleep", "${secs}"]`, 'input = { type = "object" }', 'approval = { exec = "allow" }', 'limits = { timeout_seconds = 60 }', ''].join("\n");
    const file = h.write(join(h.workspace, "slow.toml"), spec(30), 0o644);
    const script = h.write(join(h.root, "script.json"), JSON.stringify({ turns: [{ tool_calls: [{ name: "wait", args: {} }] }, { text: "done" }] }));
    const child = spawnVak(["run", "--spec", file, "--model", `scripted:${script}`, "wait"], { cwd: h.workspace, env: h.env });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    try {
      // Running, unchanged: no drift. The record of what runs is written before the harness starts.
      const running = join(h.state, "vak", "workloads", "running");
      // Written atomically (a temporary file, then renamed): wait for the record itself, not the first entry.
      const records = () => (existsSync(running) ? readdirSync(running).filter((f) => f.endsWith(".json")) : []);
      for (let i = 0; i < 200 && !records().length; i++) await new Promise((res) => setTimeout(res, 50));
      expect(records(), out).toEqual([expect.stringMatching(new RegExp(`^${child.pid}-[0-9a-f]+\\.json$`))]);
      const r = await h.audit();
      expect(r.ids).not.toContain("trust.workload-drift");
      // The spec edited on disk while the old generation runs.
      h.write(file, spec(31), 0o644);
      const drift = await h.audit(["--fix"]);
      const f = drift.find("trust.workload-drift");
      expect(f).toMatchObject({ severity: "warn", fixable: false, path: file });
      expect(f!.detail).toContain(`pid ${child.pid}`);
      expect(f!.detail).toContain("generation 1");
      expect(drift.report.fixed).toEqual([]);
      expect(drift.code).toBe(1);
      // The journal's start of that session names the spec's hash it runs.
      const db = new Database(join(h.state, "vak", "journal.db"), { readonly: true });
      try {
        const started = (db.prepare("SELECT payload FROM events WHERE kind = 'session.started'").all() as { payload: string }[]).map((x) => JSON.parse(x.payload) as { kind: string; sha256?: string });
        expect(started.find((x) => x.kind.startsWith("workload:"))?.sha256).toMatch(/^[0-9a-f]{64}$/);
      } finally {
        db.close();
      }
      // Put back as it was: the running generation matches the file again.
      h.write(file, spec(30), 0o644);
      expect((await h.audit()).ids).not.toContain("trust.workload-drift");
    } finally {
      child.kill("SIGTERM");
      await exited;
    }
    // A workload that is gone (its record left behind by a kill) says nothing.
    h.write(file, spec(32), 0o644);
    expect((await h.audit()).ids).not.toContain("trust.workload-drift");
  });
});

describe("trust: this repository's approved proposals", () => {
  it("trust.proposal-changed: an MCP server approved at one definition that the repository changed since", async () => {
    const mcp = (args: string[]) => JSON.stringify({ mcpServers: { fs: { command: "npx", args } } });
    h.write(join(h.workspace, ".mcp.json"), mcp(["-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "."]), 0o644);
    const approve = await runVak(["mcp", "approve", "fs", "--yes"], { cwd: h.workspace, env: h.env });
    expect(approve.code, approve.stderr).toBe(0);
    expect((await h.audit()).ids.filter((i) => i.startsWith("trust."))).toEqual([]);
    h.write(join(h.workspace, ".mcp.json"), mcp(["-y", "@modelcontextprotocol/server-filesystem", "/"]), 0o644);
    const r = await h.audit(["--fix"]);
    expect(r.find("trust.proposal-changed")).toMatchObject({ severity: "warn", fixable: false, path: join(h.workspace, ".mcp.json") });
    expect(r.find("trust.proposal-changed")!.fix).toContain("vak mcp approve fs");
    expect(r.find("trust.unpinned-package")!.title).toContain("approved MCP server fs");
  });
});

describe("trust: damaged approvals", () => {
  it("trust.approvals-damaged: an approvals file that does not parse counts nothing as approved, and says so", async () => {
    h.write(join(h.workspace, ".mcp.json"), JSON.stringify({ mcpServers: {} }), 0o644);
    h.write(join(h.state, "vak", "mcp", "approved.json"), "{not json");
    expect((await h.audit()).find("trust.approvals-damaged")).toMatchObject({ severity: "warn", fixable: false });
  });
});

describe("Vak's own installation", () => {
  it("install.writable: a copy of Vak with a world-writable dist file is critical; --fix removes the write bits", async () => {
    const pkg = join(h.root, "pkg");
    for (const part of ["package.json", "bin", "dist", "build/Release/vak-launcher", "build/Release/vak-engine.node"]) cpSync(join(ROOT, part), join(pkg, part), { recursive: true });
    symlinkSync(join(ROOT, "node_modules"), join(pkg, "node_modules"));
    const victim = join(pkg, "dist", "cli", "audit.js");
    chmodSync(victim, 0o666);
    const bin = join(pkg, "bin", "vak.cjs");
    // The copy's own CLI: it audits the installation it runs from.
    const vak = async (args: string[]) => {
      const r = spawnSync(process.execPath, [bin, "audit", "--json", ...args], { cwd: h.workspace, env: h.env, encoding: "utf8" });
      return { code: r.status, report: JSON.parse(r.stdout.trim()) as { findings: { id: string; severity: string; fixable: boolean; detail: string }[] } };
    };
    const before = await vak([]);
    const f = before.report.findings.find((x) => x.id === "install.writable");
    expect(f).toMatchObject({ severity: "critical", fixable: true });
    expect(f!.detail).toContain(victim);
    expect(before.code).toBe(1);
    const after = await vak(["--fix"]);
    expect(after.report.findings.map((x) => x.id)).not.toContain("install.writable");
    expect(mode(victim)).toBe(0o644);
    expect(h.fixedEvents()).toContainEqual({ check: "install.writable", path: victim, from: "0666", to: "0644" });
    if (isRoot) {
      // install.owner: a part of it that another (non-root) user can change; not fixable.
      chownSync(join(pkg, "package.json"), 65534, 65534);
      const foreign = await vak(["--fix"]);
      expect(foreign.report.findings.find((x) => x.id === "install.owner")).toMatchObject({ severity: "warn", fixable: false });
      expect(statSync(join(pkg, "package.json")).uid).toBe(65534);
    }
    rmSync(pkg, { recursive: true, force: true });
  });
});
