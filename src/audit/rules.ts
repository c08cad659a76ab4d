import { realpathSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { findProposals, ProposalApprovals } from "../mcp/proposals.js";
import type { McpServerDef } from "../policy/mcp-servers.js";
import type { Profile } from "../policy/profile.js";
import { loadUserProfiles, type ProfilesFile } from "../policy/profiles-file.js";
import { findProjectConfig, loadProject, readTrust, trustFilePath } from "../policy/trust.js";
import { isWithin } from "../policy/paths.js";
import type { AuditContext } from "./context.js";
import type { Check } from "./finding.js";

/**
 * Grants broader than anyone means: the whole file system or the home
 * directory, Vak's own directories, a network rule that matches every host,
 * and approvals turned off for commands: in MCP servers' grants and in the
 * user's own [exec] and [profiles.NAME] (and this repository's, once
 * trusted). Each is legal; each is a question.
 * (A full-access mode cannot be found here: the config refuses mode =
 * "full-access" in [exec] and every profile, it is only ever a flag.)
 */
const HOME_SPELLING = /^(?:~|\$HOME|\$\{HOME\})(?:\/|$)/;

/** A grant's path as it will resolve: the home spellings expanded, a relative path against the workspace. */
function expand(p: string, home: string, workspace: string): string {
  if (p === "~" || p === "$HOME" || p === "${HOME}") return home;
  for (const pre of ["~/", "$HOME/", "${HOME}/"]) if (p.startsWith(pre)) return resolve(home, p.slice(pre.length));
  return isAbsolute(p) ? resolve(p) : resolve(workspace, p);
}

/** A net rule that matches every host, or every host of a top-level domain. */
export function wildcardNet(rule: string): boolean {
  const r = rule.replace(/^read:/, "").trim().toLowerCase();
  const host = r.replace(/:(?:\d+|\*)$/, "");
  return host === "*" || host === "*.*" || /^\*\.[a-z0-9-]+$/.test(host) || host === "0.0.0.0/0" || host === "::/0";
}

/** The MCP servers whose grants count: the user's own, and those of this repository the user approved (their grants come with the approval). */
function grantedServers(ctx: AuditContext): { server: string; at: string; where: string; def: McpServerDef }[] {
  const out = Object.entries(ctx.config?.mcp_servers ?? {}).map(([server, def]) => ({ server, at: `mcp_servers.${server}`, where: ctx.configPath, def }));
  let ws: string;
  try {
    ws = realpathSync.native(ctx.workspace);
  } catch {
    return out;
  }
  let approved: { name: string; hash: string }[];
  try {
    approved = new ProposalApprovals(ctx.approvedPath).forWorkspace(ws);
  } catch {
    return out; // trust.approvals-damaged says so; nothing counts as approved
  }
  for (const p of findProposals(ws))
    if (p.def && approved.some((a) => a.name === p.name && a.hash === p.hash)) out.push({ server: p.name, at: `${p.source}: ${p.name}`, where: join(ws, p.source), def: p.def });
  return out;
}

/** Whatever holds grants: an MCP server, the user's [exec] defaults, a named profile. */
interface Holder {
  /** As a title names it: "the MCP server X", "the profile work". */
  who: string;
  at: string;
  where: string;
  read: readonly string[];
  write: readonly string[];
  net: readonly string[];
  /** What the lists are called there: read/write/net for an MCP server, allow_read/… for a profile. */
  prefix: "" | "allow_";
  /** What a relative path resolves against: the workspace, or a repository config's repository. */
  base: string;
  /** A repository config's relative path that leaves the repository is skipped (compose.ts), so it grants nothing. */
  confined?: boolean;
}

/** The [exec] and [profiles.NAME] of one config file; `base` is what its relative paths resolve against. */
function tablesOf(file: ProfilesFile, where: string, base: string, whose: string): Holder[] {
  const of = (who: string, at: string, p: Profile): Holder => ({ who, at, where, base, confined: whose !== "", read: p.body.lists.allow_read, write: p.body.lists.allow_write, net: p.body.lists.allow_net, prefix: "allow_" });
  const out = file.exec ? [of(`every vak exec (${whose}[exec])`, "exec", file.exec)] : [];
  for (const [name, p] of file.profiles) out.push(of(`${whose ? "this repository's" : "the"} profile ${name}`, `profiles.${name}`, p));
  return out;
}

/** The user's [exec] and profiles (none when the config does not parse: config.invalid says so), and this repository's once trusted (`vak trust`). */
function profileHolders(ctx: AuditContext): Holder[] {
  const out: Holder[] = [];
  try {
    const file = loadUserProfiles(ctx.configPath);
    if (file) out.push(...tablesOf(file, ctx.configPath, ctx.workspace, ""));
  } catch {
    // config.invalid
  }
  try {
    const ws = realpathSync.native(ctx.workspace);
    const found = findProjectConfig(ws, ctx.home);
    const p = found ? loadProject(found, readTrust(trustFilePath(ctx.env))) : undefined;
    if (p?.config?.trusted) out.push(...tablesOf(p.config.file, p.path, p.config.root, "this repository's "));
  } catch {
    // trust.records-damaged: nothing is trusted
  }
  return out;
}

export function ruleChecks(ctx: AuditContext): Check[] {
  const cfg = ctx.config;
  if (!cfg) return [];
  const out: Check[] = [];
  const own = [ctx.dirs.config, ctx.dirs.state, ctx.dirs.data, ctx.dirs.cache];
  const holders: Holder[] = grantedServers(ctx).map(({ server, at, where, def }) => ({ who: `the MCP server ${server}`, at, where, read: def.read, write: def.write, net: def.net, prefix: "" as const, base: ctx.workspace }));
  holders.push(...profileHolders(ctx));
  for (const { who, at, where, read, write: writes, net, prefix, base, confined } of holders) {
    const key = (k: "read" | "write" | "net") => `${prefix}${k}`;
    for (const [raw, write] of [...read.map((r) => [r, false] as const), ...writes.map((w) => [w, true] as const)]) {
      const k = `${at}.${key(write ? "write" : "read")}`;
      const p = expand(raw, ctx.home, base);
      if (confined && !isAbsolute(raw) && !HOME_SPELLING.test(raw) && !isWithin(p, base)) continue;
      const sev = write ? "critical" : "warn";
      if (p === "/")
        out.push({ id: "rules.grant-root", severity: sev, path: where, fixable: false, title: `${who} is granted the whole file system`,
          detail: `${k} = "${raw}": ${write ? "it can write" : "it can read"} every file the user can`, fix: `grant the directories it needs instead, in ${k}` });
      else if (p === ctx.home)
        out.push({ id: "rules.grant-home", severity: sev, path: where, fixable: false, title: `${who} is granted the home directory`,
          detail: `${k} = "${raw}": ${write ? "it can write" : "it can read"} ${ctx.home} (keys, shell start-up files, other projects)`, fix: `grant the directories it needs instead, in ${k}` });
      else if (own.some((d) => isWithin(d, p) || isWithin(p, d)))
        out.push({ id: "rules.grant-vak-dirs", severity: "warn", path: where, fixable: false, title: `a grant of ${who} reaches Vak's own directories`,
          detail: `${k} = "${raw}" covers Vak's config or state (${own.filter((d) => isWithin(d, p) || isWithin(p, d)).join(", ")}); they are held back from every sandbox, so the grant does less than it says`, fix: `narrow ${k}` });
    }
    for (const rule of net)
      if (wildcardNet(rule))
        out.push({ id: "rules.net-wildcard", severity: "warn", path: where, fixable: false, title: `${who} may reach any host`,
          detail: `${at}.${key("net")} = "${rule}" matches every host${rule.includes(".") ? " of a top-level domain" : ""}: whatever it reads, it can send anywhere`, fix: `list the exact hosts it needs in ${at}.${key("net")}` });
  }
  if (cfg.approvals.exec === "allow")
    out.push({ id: "rules.approvals-exec-allow", severity: "warn", path: ctx.configPath, fixable: false, title: "commands run without asking",
      detail: "approvals.exec = \"allow\": a command a model chose runs inside the grant without a person seeing it first", fix: "remove approvals.exec (the default is ask) or set it to \"ask\"" });
  if (cfg.approvals.write === "allow")
    out.push({ id: "rules.approvals-write-allow", severity: "info", path: ctx.configPath, fixable: false, title: "writes inside the grant happen without asking",
      detail: "approvals.write = \"allow\"", fix: "remove approvals.write (the default is ask) to review each write" });
  return out;
}
