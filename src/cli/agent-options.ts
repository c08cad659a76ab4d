import { realpathSync } from "node:fs";
import type { ApprovalRules } from "../approvals/approval-rules.js";
import type { AgentSessionOptions, SessionMode } from "../agent/agent-session.js";
import { Journal } from "../journal/journal.js";
import { resolveModel } from "../model/providers.js";
import { parseNetGrants, RuleError } from "../policy/net-grants.js";
import { loadUserConfig } from "../policy/config.js";
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

/** Turns flags and the user's config into a session's options (not yet its callbacks). */
export function sessionOptions(flags: AgentFlags): { options: AgentSessionOptions; journal: Journal } {
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
  const journal = Journal.open();
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
    },
  };
}
