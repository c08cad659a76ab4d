import { ApprovalGate, type ApprovalRequest, type Outcome } from "../approvals/approval-gate.js";
import { type ApprovalRules, DEFAULT_APPROVAL_RULES } from "../approvals/approval-rules.js";
import { Broker, type InteractiveSandbox } from "../broker/broker.js";
import type { Journal } from "../journal/journal.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { Grants, Mode } from "../policy/grants.js";
import type { SandboxKind } from "../policy/plan.js";
import type { NetGrants } from "../policy/net-grants.js";
import { describeRecipient, type InjectedSecret } from "../secrets/grant.js";
import { Redactor } from "../secrets/redact.js";
import type { Message, ModelClient } from "../model/types.js";
import { McpHub, type HubOptions } from "../mcp/hub.js";
import { type AgentEvent, brokerRouter, type RunResult, runAgent } from "./agent.js";
import type { TaskArgs } from "./task.js";

export type SessionMode = Exclude<Mode, "full-access">;

/** What an agent session can reach, by name: paths, destinations, variable names, secret references (never values). */
export interface SessionReach {
  workspace: string;
  mode: SessionMode;
  generation: number;
  read: string[];
  write: string[];
  denyRead: string[];
  denyWrite: string[];
  env: string[];
  net: string[];
  denyNet: string[];
  secrets: { ref: string; to: string }[];
  /** The session's MCP servers, each a component with grants of its own. */
  mcp: { name: string; source: string; command: string[]; mode: SessionMode; read: string[]; write: string[]; denyRead: string[]; denyWrite: string[]; net: string[]; denyNet: string[]; env: string[]; secrets: { ref: string; to: string }[] }[];
}

export interface AgentSessionOptions {
  workspace: string;
  mode: SessionMode;
  grants?: Partial<Grants>;
  /** Network grants for the agent's commands (through the egress gate). */
  net?: NetGrants | undefined;
  model: ModelClient;
  journal?: Journal | undefined;
  /** Values to redact everywhere (the provider key among them). */
  secrets?: readonly string[];
  /** Secrets the agent's commands get, with their recipients (task sub-agents get none). */
  inject?: readonly InjectedSecret[];
  approvalRules?: ApprovalRules;
  approvalTimeoutMs?: number;
  /** The host's approver; without one, every op that asks is denied. */
  onApproval?: ((r: ApprovalRequest) => void) | undefined;
  /** Told when an open approval closes (answered by any approver, timed out, voided). */
  onApprovalSettled?: ((r: ApprovalRequest, o: Outcome) => void) | undefined;
  onEvent?: ((e: AgentEvent) => void) | undefined;
  /** Told of each new policy state, only once nothing of the old one runs. */
  onPolicy?: ((p: { generation: number; mode: SessionMode }) => void) | undefined;
  maxTurns?: number;
  sandbox?: SandboxKind;
  poolSize?: number;
  title?: string;
  /** MCP servers whose tools the agent gets as `mcp__SERVER__TOOL` (each a sandboxed worker of its own; needs the journal). */
  mcp?: Omit<HubOptions, "workspace" | "mode" | "journal"> | undefined;
}

/**
 * One agent session on the host: the model client, the broker that runs its
 * tools, the approval gate, the journal session. It owns the runs (the main
 * one and any task sub-agents) and the policy generation.
 */
export class AgentSession {
  readonly approvals: ApprovalGate;
  readonly journalSession: SessionWriter | undefined;
  readonly redactor: Redactor;
  private readonly broker: Broker;
  private readonly messages: Message[] = [];
  private generationNow = 1;
  private readonly runs = new Map<AbortController, Promise<unknown>>();
  private readonly taskBrokers = new Set<Broker>();
  private tasks = 0;
  /** The session's MCP servers, started before the first run and again after a mode change. */
  private hub: Promise<McpHub> | undefined;
  /** The mode switch under way, if any: the next waits for it. */
  private switching: Promise<unknown> = Promise.resolve();
  /**
   * Resolves once the agent's broker has walked the host tool's state it may write (Broker.ready); rejects with
   * the refusal. Whoever starts a session awaits it: a session whose state holds links does not start.
   */
  readonly ready: Promise<void>;

  constructor(private readonly opts: AgentSessionOptions) {
    this.redactor = opts.journal?.redactor ?? new Redactor();
    for (const s of opts.secrets ?? []) this.redactor.add(s);
    for (const s of opts.inject ?? []) this.redactor.add(s.value);
    this.journalSession = opts.journal?.startSession({ kind: "agent", title: opts.title ?? "agent session", workspace: opts.workspace });
    this.approvals = new ApprovalGate({ journal: this.journalSession, timeoutMs: opts.approvalTimeoutMs, onRequest: opts.onApproval, onSettle: opts.onApprovalSettled });
    this.broker = this.makeBroker("agent", opts.mode, opts.poolSize ?? 1, opts.inject);
    this.ready = this.broker.ready.then(() => {
      void this.journalSession?.append("policy.generation", { component: "host" }, 1, {
        generation: 1, mode: opts.mode, grants: opts.grants ?? {}, net: opts.net ? opts.net.allow.map((r) => r.text) : [], model: `${opts.model.provider}:${opts.model.model}`,
        approvals: opts.approvalRules ?? DEFAULT_APPROVAL_RULES,
      }).catch(() => {});
    });
    this.ready.catch(() => {});
  }

  get generation(): number {
    return this.generationNow;
  }

  get mode(): SessionMode {
    return this.broker.ceiling.mode;
  }

  /** What this session's agent can reach now (its task sub-agents hold at most this): for a person to read, never values. */
  reach(): SessionReach {
    const g = this.broker.ceiling.grants;
    return {
      workspace: this.opts.workspace, mode: this.mode, generation: this.generationNow,
      read: g.read ?? [], write: g.write ?? [], denyRead: g.denyRead ?? [], denyWrite: g.denyWrite ?? [], env: g.env ?? [],
      net: this.opts.net ? this.opts.net.allow.map((r) => r.text) : [],
      denyNet: this.opts.net ? this.opts.net.deny.map((r) => r.text) : [],
      secrets: (this.opts.inject ?? []).map((s) => ({ ref: s.ref, to: describeRecipient(s.recipient) })),
      mcp: (this.opts.mcp?.servers ?? []).map((x) => ({
        name: x.name, source: x.source, command: x.def.command,
        // A server's own mode is never wider than the session's.
        mode: this.mode === "read-only" ? "read-only" : x.def.mode,
        read: x.def.read, write: x.def.write, denyRead: x.def.deny_read, denyWrite: x.def.deny_write, net: x.def.net, denyNet: x.def.deny_net,
        env: [...x.def.env, ...Object.keys(x.def.set_env)], secrets: x.def.secrets.map((y) => ({ ref: y.ref, to: `env ${y.env}` })),
      })),
    };
  }

  private makeBroker(component: string, mode: SessionMode, poolSize: number, secrets?: readonly InjectedSecret[]): Broker {
    const b = new Broker({
      workspace: this.opts.workspace,
      mode,
      grants: this.opts.grants,
      net: this.opts.net,
      secrets,
      component,
      journal: this.journalSession,
      generation: this.generationNow,
      sandbox: this.opts.sandbox,
      poolSize,
      approvals: { gate: this.approvals, rules: this.opts.approvalRules ?? DEFAULT_APPROVAL_RULES },
      // Only the main agent's broker calls MCP tools, through whichever servers run now.
      mcp: component === "agent" && this.opts.mcp ? { call: async (op, signal) => (await this.mcpHub()).call(op, signal) } : undefined,
      // The provider key (and every value redacted everywhere) never enters a sandbox's environment.
      withheld: this.opts.secrets,
    });
    if (poolSize > 0) b.prewarm();
    return b;
  }

  private role(b: Broker): string {
    const p = b.ceiling;
    return `You are a coding agent. Your workspace is ${p.workspace}; paths are relative to it. Mode: ${p.mode}.`;
  }

  /** Starts the MCP servers if they are not running, under the session's current mode. */
  private mcpHub(): Promise<McpHub> {
    const o = this.opts.mcp;
    if (!o || !this.opts.journal) return Promise.reject(new Error("this session has no MCP servers"));
    this.hub ??= McpHub.start({ ...o, workspace: this.opts.workspace, mode: this.mode, journal: this.opts.journal, withheld: this.opts.secrets });
    return this.hub;
  }

  /** A sandbox with the agent's grants for a shell the host runs on a terminal (the web terminal); stopped with the agent's workers. */
  interactive(argv: string[], stop: () => Promise<void>): Promise<InteractiveSandbox> {
    return this.broker.interactive(argv, stop);
  }

  /** Runs the agent on one instruction from the user, to its end. */
  async run(prompt: string, signal?: AbortSignal): Promise<RunResult> {
    await this.ready;
    const hub = this.opts.mcp && this.opts.journal ? await this.mcpHub() : undefined;
    const ac = new AbortController();
    const stop = () => ac.abort(signal?.reason);
    signal?.addEventListener("abort", stop, { once: true });
    const run = runAgent(
      {
        component: "agent", model: this.opts.model, router: brokerRouter(this.broker, (args, s) => this.runTask(args, s), hub), journal: this.journalSession,
        generation: () => this.generationNow, redactor: this.redactor, maxTurns: this.opts.maxTurns ?? 50,
        onEvent: this.opts.onEvent, role: this.role(this.broker),
      },
      this.messages, prompt, ac.signal,
    );
    this.runs.set(ac, run);
    try {
      return await run;
    } finally {
      this.runs.delete(ac);
      signal?.removeEventListener("abort", stop);
    }
  }

  /** A task sub-agent: its own broker, with at most this session's grants, cancelled with its parent. */
  private async runTask(args: TaskArgs, parent: AbortSignal): Promise<RunResult> {
    const component = `agent/task-${++this.tasks}`;
    // Narrow, never widen: a read-only session's task is read-only whatever it asks for.
    const mode: SessionMode = this.mode === "read-only" || args.mode === "read-only" ? "read-only" : "workspace-write";
    const broker = this.makeBroker(component, mode, 0);
    this.taskBrokers.add(broker);
    try {
      await broker.ready;
    } catch (e) {
      this.taskBrokers.delete(broker);
      throw e;
    }
    const ac = new AbortController();
    const stop = () => ac.abort(parent.reason);
    if (parent.aborted) stop();
    parent.addEventListener("abort", stop, { once: true });
    const run = runAgent(
      {
        component, model: this.opts.model, router: brokerRouter(broker), journal: this.journalSession, generation: () => this.generationNow,
        redactor: this.redactor, maxTurns: this.opts.maxTurns ?? 50, onEvent: this.opts.onEvent, role: this.role(broker),
        // The task's instruction was written by the parent's model: sent fenced as model-written, and recorded as such.
        delegatedBy: { from: "agent", tool: "task", description: args.description, untrusted: true },
      },
      [], args.prompt, ac.signal,
    );
    this.runs.set(ac, run);
    try {
      return await run;
    } finally {
      this.runs.delete(ac);
      parent.removeEventListener("abort", stop);
      this.taskBrokers.delete(broker);
      await broker.close();
    }
  }

  /**
   * Changes the session's mode mid-run. In this order: open approvals are
   * denied, the main run and every task are cancelled, every worker of the
   * old generation is stopped, the runs have ended; only then is the new
   * generation recorded and reported. The journal's sequence proves it.
   */
  setMode(mode: SessionMode, reason = "the user changed the mode"): Promise<void> {
    // One at a time, in the order asked: a later switch does not overtake one whose state is still being walked.
    const done = this.switching.then(() => this.switchMode(mode, reason));
    this.switching = done.catch(() => {});
    return done;
  }

  private async switchMode(mode: SessionMode, reason: string): Promise<void> {
    await this.ready;
    // Refused before anything changes when the new mode's plan would write a host tool's state that holds links
    // (walked in slices: what runs meanwhile runs under the current mode, and is stopped below if the switch is made).
    for (const b of [this.broker, ...this.taskBrokers]) await b.assertMode(b === this.broker || mode === "read-only" ? mode : b.ceiling.mode);
    const previous = this.mode;
    const generation = ++this.generationNow;
    const actor = { component: "host" };
    const voided = this.approvals.setGeneration(generation);
    const cancelled = [...this.runs.keys()];
    for (const ac of cancelled) ac.abort(new Error(`policy changed: ${reason}`));
    // Queued now, so it precedes every worker's exit in the record; awaited below.
    const cancelledRecord = cancelled.length ? this.journalSession?.append("run.cancelled", actor, generation, { reason, runs: cancelled.length }) : undefined;
    // Each broker takes its old workers before its first await, so a worker the abort is already ending is still counted.
    const stopping = [
      ...[...this.taskBrokers].map((b) => b.setGeneration(generation, reason, { mode: mode === "read-only" ? "read-only" : b.ceiling.mode, record: false })),
      this.broker.setGeneration(generation, reason, { mode, record: false }),
    ];
    await cancelledRecord;
    const stopped = (await Promise.all(stopping)).reduce((a, b) => a + b, 0);
    // MCP servers started under the old mode stop with everything else; the next run starts them under the new one.
    const hub = this.hub;
    this.hub = undefined;
    if (hub) await hub.then((h) => h.close(), () => undefined);
    await Promise.allSettled([...this.runs.values()]);
    await this.journalSession?.append("policy.generation", actor, generation, {
      generation, previous: generation - 1, mode, previousMode: previous, reason,
      order: ["approvals-denied", "runs-cancelled", "workers-stopped", "runs-ended", "reported"],
      approvalsDenied: voided, runsCancelled: cancelled.length, workersStopped: stopped,
    });
    this.opts.onPolicy?.({ generation, mode });
  }

  async close(outcome = "ended"): Promise<void> {
    // The start's record is written, or its refusal made, before the end's.
    await this.ready.catch(() => {});
    for (const ac of this.runs.keys()) ac.abort(new Error("the session ended"));
    this.approvals.setGeneration(this.generationNow + 1);
    await Promise.allSettled([...this.runs.values()]);
    await this.broker.close();
    const hub = this.hub;
    this.hub = undefined;
    if (hub) await hub.then((h) => h.close(), () => undefined);
    if (this.journalSession) {
      await this.journalSession.end(outcome);
    }
  }
}
