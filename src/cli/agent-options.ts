import { realpathSync } from "node:fs";
import type { ApprovalRules } from "../approvals/approval-rules.js";
import type { AgentSessionOptions, SessionMode } from "../agent/agent-session.js";
import type { Journal } from "../journal/journal.js";
import { openJournal } from "../journal/open.js";
import { providerKeys } from "../model/provider-keys.js";
import { resolveModel } from "../model/providers.js";
import { describeSource } from "../policy/compose.js";
import { parseNetGrants, RuleError } from "../policy/net-grants.js";
import { loadUserConfig, type UserConfig } from "../policy/config.js";
import type { HubServer } from "../mcp/hub.js";
import { findProposals, ProposalApprovals } from "../mcp/proposals.js";
import { hostFacts } from "../sandbox/host.js";
import { parseRef, resolveRef } from "../secrets/store.js";
import { visible } from "../text/visible.js";
import { fmt, processOutput } from "./output.js";
import { VakError } from "../policy/errors.js";
import { checkEnvRecipient } from "../secrets/grant.js";
import * as configFiles from "./exec-config.js";
import { createStatePaths, resolveGrantsWith } from "./exec-grants.js";

/** The grant flags `vak exec`, `vak run` and `vak` share (see grantFlags in main.ts). */
export interface GrantFlags {
  mode?: string;
  fullAccess?: boolean;
  workspace?: string;
  allowRead?: string[];
  allowWrite?: string[];
  denyRead?: string[];
  denyWrite?: string[];
  allowNet?: string[];
  denyNet?: string[];
  profile?: string[];
  sandbox: string;
}

/** The flags `vak run` and `vak` share. */
export interface AgentFlags extends GrantFlags {
  model?: string;
  approve?: string[];
  maxTurns?: number;
}

const APPROVABLE = new Set(["write", "exec"]);

/** Turns flags and the user's config into a session's options (not yet its callbacks), and opens the journal. */
export async function sessionOptions(flags: AgentFlags): Promise<{ options: AgentSessionOptions; journal: Journal }> {
  sessionFlagsCheck(flags);
  const journal = await openJournal({ config: loadUserConfig() });
  try {
    return sessionOptionsWith(flags, journal);
  } catch (e) {
    await journal.close().catch(() => undefined);
    throw e;
  }
}

function sessionFlagsCheck(flags: AgentFlags): void {
  if (flags.fullAccess || flags.mode === "full-access")
    throw new VakError("unsupported", "an agent session always runs its tools in the sandbox; full access is for `vak exec --full-access` only");
  if (flags.mode === "read-only" && flags.allowWrite?.length)
    throw new VakError("bad-input", "--allow-write with --mode read-only: a read-only session writes nothing; use --mode workspace-write with --deny-write to narrow it");
}

/** The same, on a journal already open (`vak serve`'s sessions share the server's). */
export function sessionOptionsWith(flags: AgentFlags, journal: Journal): { options: AgentSessionOptions; journal: Journal } {
  sessionFlagsCheck(flags);
  const config = loadUserConfig();
  const model = resolveModel(flags.model, config);
  const approvalRules: ApprovalRules = { write: config.approvals.write ?? "ask", exec: config.approvals.exec ?? "ask" };
  for (const k of flags.approve ?? []) {
    if (!APPROVABLE.has(k)) throw new VakError("bad-input", `--approve ${k}: only write and exec can be approved ahead of time`);
    approvalRules[k as keyof ApprovalRules] = "allow";
  }
  let workspace: string;
  try {
    workspace = realpathSync(flags.workspace ?? process.cwd());
  } catch (e) {
    throw new VakError("bad-input", `--workspace ${flags.workspace}: ${(e as Error).message}`);
  }
  // Named profiles (yours, the presets, a trusted repository's) add their grants; [exec] is vak exec's alone.
  const r = resolveGrantsWith(configFiles, { ...flags, workspace }, { execDefaults: false });
  const c = r.composition;
  const execOnly = [c.setEnv.size && "set_env", c.files.size && "files", Object.keys(c.limits).length && "limits"].filter(Boolean);
  if (execOnly.length)
    throw new VakError("bad-input", `${execOnly.join(", ")} (from ${c.applied.map((p) => `profile ${p.name}`).join(", ") || "the flags"}) apply to \`vak exec\` only; an agent session takes a profile's read, write, deny, net, env and secrets`);
  // A file shown without its credentials is a copy in vak exec's view; a session's sandboxes have none: not shown.
  for (const g of c.lists.allow_read_redacted) r.notes.push(`${g.value} (allow_read_redacted, ${describeSource(g.source)}) is shown to \`vak exec\` only, as a copy without its credentials: not to this session`);
  for (const n of r.notes) processOutput().err.line(fmt`vak: ${n}`);
  createStatePaths(c.create);
  let net;
  if (r.allowNet.length) {
    try {
      net = parseNetGrants(r.allowNet, r.denyNet);
    } catch (e) {
      if (e instanceof RuleError) throw new VakError("bad-input", e.message);
      throw e;
    }
  }
  const inject = r.secrets.map((spec) => {
    const eq = spec.indexOf("=");
    const name = spec.slice(0, eq);
    checkEnvRecipient(name);
    const ref = parseRef(spec.slice(eq + 1));
    return { ref: ref.text, value: resolveRef(ref, { commands: config.secret_commands }), recipient: { kind: "env" as const, name } };
  });
  const mcp = mcpServers(config, workspace);
  return {
    journal,
    options: {
      workspace,
      mode: r.mode as SessionMode,
      grants: r.grants,
      net,
      model: model.client,
      journal,
      // Every provider key the host holds is redacted everywhere and withheld from every sandbox, not only the one in use.
      // The injected secrets are not withheld (they are granted to the sandbox); the session redacts them too (`inject`).
      secrets: [...new Set([...(model.key ? [model.key] : []), ...providerKeys(config, process.env).values])],
      inject,
      approvalRules,
      approvalTimeoutMs: config.approvals.timeout_seconds ? config.approvals.timeout_seconds * 1000 : undefined,
      maxTurns: flags.maxTurns,
      sandbox: flags.sandbox === "reduced" || flags.sandbox === "container" ? flags.sandbox : "namespaces",
      ...(mcp.length
        ? {
            mcp: {
              servers: mcp, host: hostFacts(),
              secret: (ref: string) => resolveRef(parseRef(ref), { commands: config.secret_commands }),
              // An MCP server's stderr and Vak's warnings about it, made safe and labelled by src/mcp/: printed as they are.
              log: (line: string) => processOutput().err.relayed(line), neutralise: visible,
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
      processOutput().err.line(fmt`vak: ${p.source} proposes the MCP server ${p.name}, which cannot start: ${p.problem ?? ""}`);
      continue;
    }
    if (!approvals.isApproved(workspace, p)) {
      processOutput().err.line(fmt`vak: ${p.source} proposes the MCP server ${p.name}; it was not started (review and approve it with \`vak mcp approve ${p.name}\`)`);
      continue;
    }
    out.push({ name: p.name, def: p.def, source: p.source });
  }
  return out;
}
