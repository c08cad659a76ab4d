import type { AgentEvent, RunResult } from "../agent/agent.js";
import type { AgentSession, SessionMode } from "../agent/agent-session.js";
import type { ApprovalGate, ApprovalRequest, Outcome } from "../approvals/approval-gate.js";
import type { InteractiveSandbox } from "../broker/broker.js";
import { TOOLS } from "../broker/registry.js";
import { PROTECTED_PATHS } from "../policy/protected.js";
import { describeRecipient } from "../secrets/grant.js";
import type { WorkloadSession } from "../workload/workload-session.js";
import type { ComponentReach } from "./wire.js";

/**
 * A session as the server hosts it, whatever its kind: an agent session (one
 * component, the agent, and its task sub-agents) or a workload session (a
 * harness and its components). The server never constructs one itself: the
 * command that starts it does (it knows the flags, the model and the config),
 * handing the server's hooks in, so that one session can be watched by the
 * browser and by a terminal at once.
 */
export interface SessionHooks {
  onEvent(e: AgentEvent): void;
  onApproval(r: ApprovalRequest): void;
  onApprovalSettled(r: ApprovalRequest, o: Outcome): void;
  onPolicy(p: { generation: number; mode: SessionMode }): void;
}

export interface HostedSession {
  readonly kind: string;
  /** The journal's id for it. */
  readonly id: string;
  readonly title: string;
  readonly workspace: string;
  readonly approvals: ApprovalGate;
  readonly generation: number;
  readonly mode: SessionMode | null;
  /** Resolves once it started (each component's state walked, Broker.ready); rejects with why it did not. */
  readonly ready: Promise<void>;
  send(text: string, signal: AbortSignal): Promise<RunResult>;
  /** The most a mode switch may give. */
  readonly ceiling?: SessionMode | undefined;
  /** Revokes exactly as `/mode` does; absent where the grants come from elsewhere (a workload's spec). */
  setMode?: ((mode: SessionMode, reason: string) => Promise<void>) | undefined;
  reach(): ComponentReach[];
  /** A sandbox with the session's grants for the web terminal's shell; absent where there is no one set of grants (a workload). */
  interactive?: ((argv: string[], stop: () => Promise<void>) => Promise<InteractiveSandbox>) | undefined;
  close(): Promise<void>;
}

const PROTECTED = PROTECTED_PATHS.map((p) => (p.kind === "tree" ? `${p.pattern}/` : p.pattern));
const AGENT_TOOLS = [...TOOLS.map((t) => t.name), "task"];

/**
 * An agent session, hosted. ceiling: the most a mode switch may give (`vak
 * serve --mode read-only` keeps every session it hosts read-only, whatever
 * the browser asks).
 */
export function hostAgent(s: AgentSession, title: string, workspace: string, ceiling: SessionMode = "workspace-write"): HostedSession {
  if (!s.journalSession) throw new Error("a hosted session needs a journal");
  const id = s.journalSession.id;
  return {
    kind: "agent", id, title, workspace, approvals: s.approvals, ready: s.ready,
    get generation() { return s.generation; },
    get mode() { return s.mode; },
    send: (text, signal) => s.run(text, signal),
    ceiling,
    setMode: (mode, reason) => s.setMode(mode, reason),
    interactive: (argv, stop) => s.interactive(argv, stop),
    reach: () => {
      const r = s.reach();
      const ws = r.mode === "workspace-write" ? "write" : "read";
      return [{
        component: "agent", tools: AGENT_TOOLS,
        files: [{ path: r.workspace, access: ws }, ...r.read.map((path) => ({ path, access: "read" as const })), ...(r.mode === "workspace-write" ? r.write : []).map((path) => ({ path, access: "write" as const }))],
        denied: [...r.denyRead.map((path) => ({ path, access: "read" as const })), ...r.denyWrite.map((path) => ({ path, access: "write" as const }))],
        protected: PROTECTED, network: r.net, networkDenied: r.denyNet, env: r.env, secrets: r.secrets, stores: [],
      }, ...r.mcp.map((m): ComponentReach => ({
        component: `mcp:${m.name}`, tools: [`mcp__${m.name}__* (${m.command.join(" ")}; from ${m.source})`],
        files: [{ path: r.workspace, access: m.mode === "workspace-write" ? "write" : "read" }, ...m.read.map((path) => ({ path, access: "read" as const })), ...(m.mode === "workspace-write" ? m.write : []).map((path) => ({ path, access: "write" as const }))],
        denied: [...m.denyRead.map((path) => ({ path, access: "read" as const })), ...m.denyWrite.map((path) => ({ path, access: "write" as const }))],
        protected: m.mode === "workspace-write" ? PROTECTED : [], network: m.net, networkDenied: m.denyNet, env: m.env, secrets: m.secrets, stores: [],
      }))];
    },
    close: () => s.close(),
  };
}

export function hostWorkload(s: WorkloadSession): HostedSession {
  if (!s.journalSession) throw new Error("a hosted session needs a journal");
  const plan = s.spec;
  return {
    kind: `workload:${plan.id}`, id: s.journalSession.id, title: `workload ${plan.name}`, workspace: plan.workspace, approvals: s.approvals, ready: s.ready,
    get generation() { return s.generation; },
    mode: null,
    send: (text, signal) => s.send(text, signal),
    reach: () => [
      { component: "harness", tools: [], files: [], denied: [], protected: [], network: [], networkDenied: [], env: [], secrets: [], stores: [] },
      ...s.spec.components.map((c): ComponentReach => ({
        component: c.name,
        tools: c.command ? [c.name] : c.builtin,
        files: [...c.read.map((path) => ({ path, access: "read" as const })), ...c.write.map((path) => ({ path, access: "write" as const }))],
        denied: [...c.denyRead.map((path) => ({ path, access: "read" as const })), ...c.denyWrite.map((path) => ({ path, access: "write" as const }))],
        protected: c.write.length ? PROTECTED : [],
        network: c.netText, networkDenied: c.net ? c.net.deny.map((r) => r.text) : [], env: c.env,
        secrets: c.secrets.map((x) => ({ ref: x.ref, to: describeRecipient(x.recipient) })),
        stores: c.stores,
      })),
    ],
    close: () => s.close(),
  };
}
