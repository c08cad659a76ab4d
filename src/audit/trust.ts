import { realpathSync } from "node:fs";
import { dirname } from "node:path";
import { type PinFile, PinStore } from "../mcp/pins.js";
import { findProposals, ProposalApprovals } from "../mcp/proposals.js";
import { findProjectConfig, loadProject, readTrust, type TrustFile, trustFilePath } from "../policy/trust.js";
import type { AuditContext } from "./context.js";
import type { Check } from "./finding.js";

/**
 * Trust and drift: MCP servers whose code is whatever a registry serves today
 * (`npx -y pkg` without a version), and tool definitions that changed after
 * they were pinned and wait for `vak mcp trust`, and this repository's
 * proposed MCP servers whose definition changed after it was approved, and
 * this repository's .vak/config.toml changed after `vak trust`, or unreadable.
 */
const RUNNERS = new Set(["npx", "bunx", "pnpx", "uvx"]);

/** The package an `npx`-style argv runs, when it names no exact version. */
export function unpinnedPackage(argv: readonly string[]): string | undefined {
  const bin = argv[0]!.split("/").pop()!;
  let rest = argv.slice(1);
  if ((bin === "pnpm" && rest[0] === "dlx") || (bin === "npm" && (rest[0] === "exec" || rest[0] === "x"))) rest = rest.slice(1);
  else if (!RUNNERS.has(bin)) return undefined;
  let i = 0;
  while (i < rest.length && rest[i]!.startsWith("-")) i += rest[i] === "--package" || rest[i] === "-p" ? 2 : 1;
  const pkg = rest[i];
  if (!pkg || pkg.startsWith(".") || pkg.startsWith("/")) return undefined;
  const exact = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/;
  const at = pkg.lastIndexOf("@");
  if (at > 0 && exact.test(pkg.slice(at + 1))) return undefined;
  if (bin === "uvx" && /==/.test(pkg) && exact.test(pkg.split("==")[1]!)) return undefined;
  return pkg;
}

export function trustChecks(ctx: AuditContext): Check[] {
  const out: Check[] = [];
  for (const [server, def] of Object.entries(ctx.config?.mcp_servers ?? {})) {
    const pkg = unpinnedPackage(def.command);
    if (pkg)
      out.push({ id: "trust.unpinned-package", severity: "warn", path: ctx.configPath, fixable: false, title: `the MCP server ${server} runs whatever version the registry serves`,
        detail: `mcp_servers.${server}.command runs ${pkg} with no exact version: a new release (or a hijacked one) runs with its grants the next time it starts`, fix: `pin it: ${pkg.replace(/@[^@/]*$/, "")}@X.Y.Z in mcp_servers.${server}.command` });
  }
  let pins: PinFile[];
  try {
    pins = new PinStore(ctx.pinsDir).list();
  } catch {
    pins = [];
  }
  for (const f of pins) {
    const pending = Object.entries(f.pending);
    if (pending.length)
      out.push({ id: "trust.pin-drift", severity: "warn", fixable: false, title: `tools of the MCP server ${f.server} changed after they were pinned`,
        detail: `${pending.map(([t, e]) => `${t} (${e.why})`).slice(0, 10).join(", ")}: withheld from every listing until you accept them`, fix: `review and accept with: vak mcp trust ${f.server}` });
  }
  out.push(...proposalChecks(ctx), ...repoConfigChecks(ctx));
  return out;
}

/** This workspace's .vak/config.toml trusted (`vak trust`) at a hash it no longer has: it is ignored until trusted again. */
function repoConfigChecks(ctx: AuditContext): Check[] {
  const path = trustFilePath(ctx.env);
  let trust: TrustFile;
  try {
    trust = readTrust(path);
  } catch (e) {
    return [{ id: "trust.records-damaged", severity: "warn", path, fixable: false, title: "the repository trust records cannot be read", detail: `${(e as Error).message}; every repository config is untrusted meanwhile`, fix: `remove ${path}, then: vak trust in each repository you trust` }];
  }
  let ws: string;
  try {
    ws = realpathSync.native(ctx.workspace);
  } catch {
    return [];
  }
  const file = findProjectConfig(ws, ctx.home);
  if (!file) return [];
  const p = loadProject(file, trust);
  if (p.broken)
    return [{ id: "trust.repo-config-unreadable", severity: "warn", path: file, fixable: false, title: "this repository's .vak/config.toml cannot be read whole",
      detail: `${p.broken}; vak exec, vak run and vak refuse to run here until it reads (its deny rules are never skipped)`, fix: "fix the file (vak trust shows it), or remove it" }];
  if (trust.trusted.length === 0) return [];
  if (!p.hash || p.config?.trusted) return [];
  const was = trust.trusted.filter((r) => r.path === p.path).at(-1);
  if (!was) return [];
  return [{ id: "trust.repo-config-changed", severity: "warn", path: p.path, fixable: false, title: "this repository's .vak/config.toml changed after you trusted it",
    detail: `trusted ${was.at} at sha256 ${was.sha256.slice(0, 12)}…; it is ${p.hash.slice(0, 12)}… now, so its [exec] and profiles are ignored`, fix: `review what it would grant, then: vak trust ${dirname(dirname(p.path))}` }];
}

/** A repository's proposal approved at one hash that now has another: it does not start until approved again. */
function proposalChecks(ctx: AuditContext): Check[] {
  let ws: string;
  try {
    ws = realpathSync.native(ctx.workspace);
  } catch {
    return [];
  }
  let approved;
  try {
    approved = new ProposalApprovals(ctx.approvedPath).forWorkspace(ws);
  } catch (e) {
    return [{ id: "trust.approvals-damaged", severity: "warn", path: ctx.approvedPath, fixable: false, title: "the MCP approvals file cannot be read", detail: (e as Error).message, fix: `remove ${ctx.approvedPath} and approve again` }];
  }
  if (approved.length === 0) return [];
  const out: Check[] = [];
  const proposals = findProposals(ws);
  for (const a of approved) {
    const now = proposals.find((p) => p.name === a.name);
    if (now && now.hash !== a.hash)
      out.push({ id: "trust.proposal-changed", severity: "warn", path: `${ws}/${now.source}`, fixable: false, title: `the MCP server ${a.name} this repository proposes changed after you approved it`,
        detail: `approved ${a.at} as defined in ${a.source}; its definition in ${now.source} has another hash now, so it does not start`, fix: `review it (vak mcp proposals), then: vak mcp approve ${a.name}` });
    const pkg = now?.def ? unpinnedPackage(now.def.command) : undefined;
    if (pkg)
      out.push({ id: "trust.unpinned-package", severity: "warn", path: `${ws}/${now!.source}`, fixable: false, title: `the approved MCP server ${a.name} runs whatever version the registry serves`,
        detail: `${now!.source} runs ${pkg} with no exact version: the approval covers the command line, not the code it downloads`, fix: `ask the repository to pin ${pkg.replace(/@[^@/]*$/, "")}@X.Y.Z` });
  }
  return out;
}
