import { basename, dirname, isAbsolute } from "node:path";

/**
 * `vak mcp wrap`: an MCP client's config with every stdio server rewritten to
 * run through `vak mcp` (read-only by default), and `unwrap`, its inverse.
 * The shapes: `mcpServers` (Claude Desktop, Cursor, Claude Code's .mcp.json,
 * and each project of ~/.claude.json) and `servers` (VS Code's mcp.json, and
 * `mcp.servers` in its settings). Remote (HTTP, SSE) servers are not
 * processes Vak could sandbox: they are left as they are and reported.
 * Decided here without touching the disk; facts about paths come in.
 */
export interface PathFacts {
  /** "file", "dir" or undefined for a path that does not exist. */
  kind(path: string): "file" | "dir" | undefined;
  /** The nearest directory at or above `dir` holding a package.json, if any. */
  packageRoot(dir: string): string | undefined;
}

export interface WrapReport {
  name: string;
  where: string;
  action: "wrapped" | "remote" | "already" | "unwrapped" | "skipped";
  detail: string;
}

/** How the client is to start Vak: ["vak"] when it is on the PATH, else node and the script. */
export type VakInvocation = readonly string[];

type Entry = Record<string, unknown>;
type Servers = Record<string, Entry>;

/** Where the server tables are in a config, by the path to each. */
function tables(config: Record<string, unknown>): { where: string; servers: Servers }[] {
  const out: { where: string; servers: Servers }[] = [];
  const add = (where: string, v: unknown) => {
    if (v && typeof v === "object" && !Array.isArray(v)) out.push({ where, servers: v as Servers });
  };
  add("mcpServers", config.mcpServers);
  add("servers", config.servers);
  if (config.mcp && typeof config.mcp === "object") add("mcp.servers", (config.mcp as Record<string, unknown>).servers);
  if (config.projects && typeof config.projects === "object")
    for (const [p, v] of Object.entries(config.projects as Record<string, unknown>))
      if (v && typeof v === "object") add(`projects.${p}.mcpServers`, (v as Record<string, unknown>).mcpServers);
  return out;
}

const REMOTE_TYPES = new Set(["http", "sse", "streamable-http", "streamableHttp", "ws"]);
/** Launchers that fetch the server from a registry at start: the registry is the one destination they need. */
const REGISTRY: Record<string, string[]> = {
  npx: ["registry.npmjs.org"], bunx: ["registry.npmjs.org"], pnpx: ["registry.npmjs.org"],
  uvx: ["pypi.org", "files.pythonhosted.org"], pipx: ["pypi.org", "files.pythonhosted.org"],
};
const SECRET_NAME = /KEY|TOKEN|SECRET|PASS|PAT\b|CREDENTIAL|AUTH|COOKIE|SESSION/i;
const SYSTEM = ["/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/", "/opt/homebrew/"];

function isWrapped(e: Entry, vak: VakInvocation): boolean {
  const args = Array.isArray(e.args) ? (e.args as unknown[]) : [];
  const cmd = [e.command, ...args].map(String);
  return cmd.length > vak.length && vak.every((v, i) => cmd[i] === v || (i === 0 && basename(cmd[0]!) === "vak" && v === "vak")) && cmd[vak.length] === "mcp";
}

/** The `vak mcp` arguments for one stdio server: its name, read-only grants for the paths it was given, its variables. */
export function grantsFor(name: string, e: Entry, facts: PathFacts): string[] {
  const command = String(e.command);
  const args = Array.isArray(e.args) ? (e.args as unknown[]).map(String) : [];
  const flags = ["--name", name];
  if (typeof e.cwd === "string" && isAbsolute(e.cwd)) flags.push("--workspace", e.cwd);
  const reads = new Set<string>();
  const consider = (p: string) => {
    if (!isAbsolute(p) || SYSTEM.some((s) => p.startsWith(s))) return;
    const k = facts.kind(p);
    if (k === "dir") reads.add(p);
    else if (k === "file") reads.add(facts.packageRoot(dirname(p)) ?? dirname(p));
  };
  consider(command);
  for (const a of args) consider(a.startsWith("--") && a.includes("=") ? a.slice(a.indexOf("=") + 1) : a);
  for (const r of [...reads].sort()) flags.push("--allow-read", r);
  const nets = REGISTRY[basename(command)];
  if (nets) flags.push("--allow-net", nets.join(","));
  const env = e.env && typeof e.env === "object" ? Object.keys(e.env as Record<string, unknown>).sort() : [];
  for (const k of env) flags.push(...(SECRET_NAME.test(k) ? ["--secret", `${k}=env:${k}`] : ["--allow-env", k]));
  return flags;
}

/** Rewrites every stdio server of the config to start through Vak. Returns the new config and what was done. */
export function wrapConfig(config: Record<string, unknown>, vak: VakInvocation, facts: PathFacts): { config: Record<string, unknown>; report: WrapReport[] } {
  const next = structuredClone(config);
  const report: WrapReport[] = [];
  for (const { where, servers } of tables(next)) {
    for (const [name, e] of Object.entries(servers)) {
      if (!e || typeof e !== "object") continue;
      const type = typeof e.type === "string" ? e.type : undefined;
      if (typeof e.url === "string" || typeof e.serverUrl === "string" || (type && REMOTE_TYPES.has(type))) {
        report.push({ name, where, action: "remote", detail: `a remote server (${String(e.url ?? e.serverUrl ?? type)}): left as it is; Vak sandboxes processes, not URLs` });
        continue;
      }
      if (typeof e.command !== "string" || !e.command) {
        report.push({ name, where, action: "skipped", detail: "no command: left as it is" });
        continue;
      }
      if (isWrapped(e, vak)) {
        report.push({ name, where, action: "already", detail: "already runs through vak mcp" });
        continue;
      }
      const args = Array.isArray(e.args) ? (e.args as unknown[]).map(String) : [];
      const flags = grantsFor(name, e, facts);
      servers[name] = { ...e, command: vak[0], args: [...vak.slice(1), "mcp", ...flags, "--", e.command, ...args] };
      report.push({ name, where, action: "wrapped", detail: `vak mcp ${flags.join(" ")} -- ${[e.command, ...args].join(" ")}` });
    }
  }
  return { config: next, report };
}

/**
 * The inverse: each server that runs through `vak mcp` gets back its own
 * command and arguments (what follows `--`), and, when the backup has the
 * same server with that command, every field it had there. Servers added or
 * edited since are kept.
 */
export function unwrapConfig(config: Record<string, unknown>, backup: Record<string, unknown> | undefined): { config: Record<string, unknown>; report: WrapReport[] } {
  const next = structuredClone(config);
  const report: WrapReport[] = [];
  const before = new Map(backup ? tables(backup).map((t) => [t.where, t.servers] as const) : []);
  for (const { where, servers } of tables(next)) {
    for (const [name, e] of Object.entries(servers)) {
      if (!e || typeof e !== "object" || typeof e.command !== "string" || !Array.isArray(e.args)) continue;
      const args = (e.args as unknown[]).map(String);
      const mcp = args.indexOf("mcp");
      const dash = args.indexOf("--", mcp + 1);
      const viaVak = basename(e.command) === "vak" || (mcp > 0 && args.slice(0, mcp).some((a) => basename(a) === "vak.cjs"));
      if (!viaVak || mcp < 0 || dash < 0 || dash + 1 >= args.length) continue;
      const command = args[dash + 1]!;
      const rest = args.slice(dash + 2);
      const old = before.get(where)?.[name];
      const same = old && old.command === command && JSON.stringify((old.args as unknown[] | undefined) ?? []) === JSON.stringify(rest);
      servers[name] = same ? structuredClone(old) : { ...e, command, args: rest };
      report.push({ name, where, action: "unwrapped", detail: [command, ...rest].join(" ") });
    }
  }
  return { config: next, report };
}
