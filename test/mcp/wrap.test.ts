import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type PathFacts, unwrapConfig, wrapConfig } from "../../src/mcp/wrap.js";
import { scratch, type Scratch } from "../support/fs.js";
import { VAK_BIN } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

const facts = (dirs: string[], files: Record<string, string> = {}): PathFacts => ({
  kind: (p) => (dirs.includes(p) ? "dir" : p in files ? "file" : undefined),
  packageRoot: (d) => Object.values(files).find((root) => d.startsWith(root)),
});
const VAK = ["vak"];

describe("vak mcp wrap: the config shapes", () => {
  const desktop = {
    mcpServers: {
      filesystem: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"] },
      github: { command: "node", args: ["/opt/srv/github/dist/index.js"], env: { GITHUB_TOKEN: "ghp_x", LOG_LEVEL: "debug" } },
      remote: { url: "https://mcp.example.invalid/sse" },
    },
    globalShortcut: "kept as it is",
  };

  it("Claude Desktop and Cursor (mcpServers): stdio servers run through vak mcp, read-only, with the paths they were given", () => {
    const { config, report } = wrapConfig(desktop, VAK, facts(["/Users/me/Desktop"], { "/opt/srv/github/dist/index.js": "/opt/srv/github" }));
    const fs = (config.mcpServers as Record<string, { command: string; args: string[] }>).filesystem!;
    expect(fs.command).toBe("vak");
    expect(fs.args).toEqual(["mcp", "--name", "filesystem", "--allow-read", "/Users/me/Desktop", "--allow-net", "registry.npmjs.org", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]);
    expect(fs.args).not.toContain("--mode");
    const gh = (config.mcpServers as Record<string, { args: string[]; env: unknown }>).github!;
    expect(gh.args.slice(0, gh.args.indexOf("--"))).toEqual(["mcp", "--name", "github", "--allow-read", "/opt/srv/github", "--secret", "GITHUB_TOKEN=env:GITHUB_TOKEN", "--allow-env", "LOG_LEVEL"]);
    expect(gh.env).toEqual(desktop.mcpServers.github.env);
    expect((config.mcpServers as Record<string, unknown>).remote).toEqual(desktop.mcpServers.remote);
    expect(config.globalShortcut).toBe("kept as it is");
    expect(report.map((r) => `${r.action} ${r.name}`)).toEqual(["wrapped filesystem", "wrapped github", "remote remote"]);
  });

  it("VS Code (servers, type stdio/http), its settings (mcp.servers), and each project of ~/.claude.json", () => {
    const vscode = { servers: { a: { type: "stdio", command: "uvx", args: ["mcp-server-git"] }, b: { type: "http", url: "http://localhost:3000/mcp" } }, inputs: [] };
    const r1 = wrapConfig(vscode, VAK, facts([]));
    expect((r1.config.servers as Record<string, { args: string[] }>).a!.args).toContain("pypi.org,files.pythonhosted.org");
    expect(r1.report.find((r) => r.name === "b")!.action).toBe("remote");
    const settings = { mcp: { servers: { s: { command: "node", args: ["x.js"] } } } };
    expect(wrapConfig(settings, VAK, facts([])).report[0]!.where).toBe("mcp.servers");
    const claude = { projects: { "/p": { mcpServers: { t: { type: "stdio", command: "server-t" } } } }, mcpServers: { u: { command: "server-u", cwd: "/work/proj" } } };
    const r3 = wrapConfig(claude, VAK, facts([]));
    expect(r3.report.map((r) => r.where).sort()).toEqual(["mcpServers", "projects./p.mcpServers"]);
    expect(((r3.config.mcpServers as Record<string, { args: string[] }>).u!.args)).toEqual(["mcp", "--name", "u", "--workspace", "/work/proj", "--", "server-u"]);
  });

  it("wrapping twice changes nothing; unwrapping gives back every original field", () => {
    const once = wrapConfig(desktop, VAK, facts([])).config;
    const twice = wrapConfig(once, VAK, facts([]));
    expect(twice.config).toEqual(once);
    expect(twice.report.filter((r) => r.action === "already")).toHaveLength(2);
    expect(unwrapConfig(once, desktop).config).toEqual(desktop);
    expect(unwrapConfig(once, undefined).config).toEqual(desktop);
  });
});

describe("vak mcp wrap and unwrap on a real file", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  it("--dry-run writes nothing; wrap keeps a backup and the mode; unwrap restores and keeps servers added since", () => {
    const file = join(s.ws, "claude_desktop_config.json");
    mkdirSync(join(s.ws, "docs"));
    const original = { mcpServers: { docs: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", join(s.ws, "docs")] }, web: { url: "https://mcp.example.invalid" } } };
    writeFileSync(file, JSON.stringify(original), { mode: 0o640 });
    const run = (...a: string[]) => execFileSync(process.execPath, [VAK_BIN, "mcp", ...a, "--config", file], { env: baseEnv(), encoding: "utf8" });
    const dry = run("wrap", "--dry-run");
    expect(dry).toContain('"mcp"');
    expect(dry).toMatch(/remote\s+web/);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual(original);
    expect(existsSync(`${file}.vak-backup`)).toBe(false);

    run("wrap");
    const wrapped = JSON.parse(readFileSync(file, "utf8")) as typeof original & { mcpServers: Record<string, { command: string; args: string[] }> };
    expect(wrapped.mcpServers.docs.args).toContain("--allow-read");
    expect(wrapped.mcpServers.docs.args).toContain(join(s.ws, "docs"));
    expect(statSync(file).mode & 0o777).toBe(0o640);
    expect(JSON.parse(readFileSync(`${file}.vak-backup`, "utf8"))).toEqual(original);

    // A server the user adds after wrapping is kept by unwrap.
    (wrapped.mcpServers as Record<string, unknown>).added = { command: "other" };
    writeFileSync(file, JSON.stringify(wrapped));
    expect(run("unwrap")).toMatch(/unwrapped\s+docs/);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ mcpServers: { ...original.mcpServers, added: { command: "other" } } });
    expect(existsSync(`${file}.vak-backup`)).toBe(false);
  });
});
