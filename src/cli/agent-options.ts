import { realpathSync } from "node:fs";
import type { ApprovalRules } from "../approvals/approval-rules.js";
import type { AgentSessionOptions, SessionMode } from "../agent/agent-session.js";
import { Journal } from "../journal/journal.js";
import { resolveModel } from "../model/providers.js";
import { parseNetGrants, RuleError } from "../policy/net-grants.js";
import { loadUserConfig, type UserConfig } from "../policy/config.js";
import type { HubServer } from "../mcp/hub.js";
import { findProposals, ProposalApprovals } from "../mcp/proposals.js";
import { hostFacts } from "../sandbox/host.js";
import { parseRef, resolveRef } from "../secrets/store.js";
import { visible } from "./visible.js";
import { VakError } from "../policy/errors.js";

/** The grant flags `vak exec`, `vak run` and `vak` share (see grantFlags in main.ts). */
export interface GrantFlags {
  mode: string;
  fullAccess?: boolean;
  workspace?: string;
  allowRead?: string[];
  allowWrite?: string[];
  denyRead?: string[];
  denyWrite?: string[];
  allowNet?: string[];
  denyNet?: string[];
  sandbox: string;
}

/** The flags `vak run` and `vak` share. */
export interface AgentFlags extends GrantFlags {
  model?: string;
  approve?: string[];
  maxTurns?: number;
}

const APPROVABLE = new Set(["write", "exec"]);

/** Turns flags and the user's config into a session's options (not yet its callbacks); opens the journal unless given one. */
export function sessionOptions(flags: AgentFlags, open?: Journal): { options: AgentSessionOptions; journal: Journal } {
  if (flags.fullAccess || flags.mode === "full-access")
    throw new VakError("unsupported", "an agent session always runs its tools in the sandbox; full access is for `vak exec --full-access` only");
  if (flags.mode === "read-only" && flags.allowWrite?.length)
    throw new VakError("bad-input", "--allow-write with --mode read-only: a read-only session writes nothing; use --mode workspace-write with --deny-write to narrow it");
  const config = loadUserConfig();
  const model = resolveModel(flags.model, config);
  const approvalRules: ApprovalRules = { write: config.approvals.write ?? "ask", exec: config.approvals.exec ?? "ask" };
  for (const k of flags.approve ?? []) {
    if (!APPROVABLE.has(k)) throw new VakError("bad-input", `--approve ${k}: only write and exec can be approved ahead of time`);
    approvalRules[k as keyof ApprovalRules] = "allow";
  }
  let net;
  if (flags.allowNet?.length) {
    try {
      net = parseNetGrants(flags.allowNet, flags.denyNet ?? []);
    } catch (e) {
      if (e instanceof RuleError) throw new VakError("bad-input", e.message);
      throw e;
    }
  }
  let workspace: string;
  try {
    workspace = realpathSync(flags.workspace ?? process.cwd());
  } catch (e) {
    throw new VakError("bad-input", `--workspace ${flags.workspace}: ${(e as Error).message}`);
  }
  const journal = open ?? Journal.open();
  const mcp = mcpServers(config, workspace);
  return {
    journal,
    options: {
      workspace,
      mode: flags.mode as SessionMode,
      grants: { read: flags.allowRead ?? [], write: flags.allowWrite ?? [], denyRead: flags.denyRead ?? [], denyWrite: flags.denyWrite ?? [], env: [] },
      net,
      model: model.client,
      journal,
      secrets: model.key ? [model.key] : [],
      approvalRules,
      approvalTimeoutMs: config.approvals.timeout_seconds ? config.approvals.timeout_seconds * 1000 : undefined,
      maxTurns: flags.maxTurns,
      sandbox: flags.sandbox === "reduced" ? "reduced" : "namespaces",
      ...(mcp.length
        ? {
            mcp: {
              servers: mcp, host: hostFacts(),
              secret: (ref: string) => resolveRef(parseRef(ref), { commands: config.secret_commands }),
              log: (line: string) => void process.stderr.write(`${visible(line)}\n`), neutralise: visible,
            },
          }
        : {}),
    },
  };
}

/**
 * The MCP servers of a session: those of the user's config, and those the
 * repository proposes that the user approved for this exact definition. An
 * unapproved proposal starts nothing, with or without a terminal: it is named,
 * with the command that approves it.
 */
function mcpServers(config: UserConfig, workspace: string): HubServer[] {
  const out: HubServer[] = Object.entries(config.mcp_servers).map(([name, def]) => ({ name, def, source: "your config" }));
  const approvals = new ProposalApprovals();
  for (const p of findProposals(workspace)) {
    if (out.some((s) => s.name === p.name)) continue; // your config's server of that name wins
    if (p.problem || !p.def) {
      process.stderr.write(`vak: ${p.source} proposes the MCP server ${visible(p.name)}, which cannot start: ${visible(p.problem ?? "")}\n`);
      continue;
    }
    if (!approvals.isApproved(workspace, p)) {
      process.stderr.write(`vak: ${p.source} proposes the MCP server ${visible(p.name)}; it was not started (review and approve it with \`vak mcp approve ${visible(p.name)}\`)\n`);
      continue;
    }
    out.push({ name: p.name, def: p.def, source: p.source });
  }
  return out;
}
