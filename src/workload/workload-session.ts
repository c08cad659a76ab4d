import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { z } from "zod";
import { changedPath } from "./command-paths.js";
import { type AgentEvent, outcomeText, type RunResult, runAgent, runBuiltin, type ToolAnswer, type ToolRouter } from "../agent/agent.js";
import { ApprovalGate, type ApprovalRequest, type Outcome } from "../approvals/approval-gate.js";
import { Broker } from "../broker/broker.js";
import { findTool, toolJsonSchema } from "../broker/registry.js";
import type { EventKind } from "../journal/events.js";
import type { Journal } from "../journal/journal.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { Message, ModelClient, ToolSpec } from "../model/types.js";
import type { SandboxKind } from "../policy/plan.js";
import { hostFacts } from "../sandbox/host.js";
import { describeRecipient, type InjectedSecret } from "../secrets/grant.js";
import { Redactor } from "../secrets/redact.js";
import { resolveRef, parseRef, type SecretCommands, type SecretStore } from "../secrets/store.js";
import { KvStores } from "../stores/kv.js";
import { McpHub } from "../mcp/hub.js";
import { McpServerSchema } from "../policy/mcp-servers.js";
import { visible } from "../text/visible.js";
import { vakDirs } from "../policy/state.js";
import { RunningRecord } from "./running.js";
import { type ComponentPlan, loadSpec, type WorkloadPlan } from "./spec.js";

export interface WorkloadSessionOptions {
  model: ModelClient;
  journal?: Journal | undefined;
  /** The host's approver; without one, every op that asks is denied. */
  onApproval?: ((r: ApprovalRequest) => void) | undefined;
  /** Told when an open approval closes (answered by any approver, timed out, voided). */
  onApprovalSettled?: ((r: ApprovalRequest, o: Outcome) => void) | undefined;
  onEvent?: ((e: AgentEvent) => void) | undefined;
  approvalTimeoutMs?: number;
  sandbox?: SandboxKind;
  /** Where stores live (default: Vak's state directory). */
  storesDir?: string;
  secretStore?: SecretStore;
  secretCommands?: SecretCommands;
  env?: NodeJS.ProcessEnv;
  /** Values to redact everywhere (the provider key). */
  secrets?: readonly string[];
  /** The user's mode: no component may exceed it. */
  mode?: "read-only" | "workspace-write";
  /** Where an MCP component's stderr and Vak's notes about it go (a terminal-safe sink). */
  onLog?: ((line: string) => void) | undefined;
  /** CA files trusted for upstream servers where a component's gate terminates TLS ([egress] ca_files). */
  caFiles?: readonly string[];
}

const SEP = "__";
const StoreArgs = z
  .object({
    action: z.enum(["get", "put", "list", "delete"]),
    store: z.string(),
    key: z.string().max(512).optional(),
    value: z.string().optional(),
    prefix: z.string().max(512).optional(),
  })
  .strict();
const SearchArgs = z.object({ query: z.string().min(1).max(500) }).strict();
const STORE_SCHEMA = z.toJSONSchema(StoreArgs, { target: "draft-7" }) as Record<string, unknown>;
const SEARCH_SCHEMA = z.toJSONSchema(SearchArgs, { target: "draft-7" }) as Record<string, unknown>;

interface Live {
  plan: ComponentPlan;
  broker: Broker;
  scratch: string;
  /** For a command tool: its declared input, as a validator. */
  input?: z.ZodType | undefined;
  /** For an MCP component: its server, started before the harness first runs. */
  mcp?: Promise<McpHub> | undefined;
  hub?: McpHub | undefined;
  secrets: InjectedSecret[];
}

/**
 * A session of a workload: the harness (the model, holding no grant) and one
 * broker per tool component, each with exactly that component's grants,
 * secrets and stores. The harness can only ask a component to use its grant.
 * Stores and session_search are broker-owned capabilities run on the host.
 */
export class WorkloadSession {
  readonly approvals: ApprovalGate;
  readonly journalSession: SessionWriter | undefined;
  readonly redactor: Redactor;
  private live: Live[] = [];
  private plan: WorkloadPlan;
  private generationNow = 1;
  private readonly messages: Message[] = [];
  private readonly stores: KvStores;
  /** Spec hashes the user refused, so that one refusal is not asked again. */
  private readonly refusedSpecs = new Set<string>();
  /** Which spec this running workload was started from, for `vak audit` (running.ts). */
  private running: RunningRecord | undefined;
  /**
   * Resolves once every component's broker has walked the host tool's state it may write (Broker.ready); rejects
   * with the first refusal, everything stopped and the session's record ended as refused. Whoever starts a
   * session awaits it; send() does.
   */
  readonly ready: Promise<void>;

  constructor(plan: WorkloadPlan, private readonly opts: WorkloadSessionOptions) {
    this.plan = plan;
    this.redactor = opts.journal?.redactor ?? new Redactor();
    for (const s of opts.secrets ?? []) this.redactor.add(s);
    // The start names the spec and its content hash: what this session's first generation runs.
    this.journalSession = opts.journal?.startSession({ kind: `workload:${plan.id}`, title: `workload ${plan.name}`, workspace: plan.workspace, payload: { spec: plan.source, sha256: plan.hash } });
    this.approvals = new ApprovalGate({ journal: this.journalSession, timeoutMs: opts.approvalTimeoutMs, onRequest: opts.onApproval, onSettle: opts.onApprovalSettled });
    this.stores = new KvStores(plan.id, opts.storesDir);
    const refused = (e: unknown) => {
      this.stores.close();
      void this.journalSession?.end(`refused: ${(e as Error).message}`).catch(() => undefined);
      throw e;
    };
    try {
      this.live = this.start(plan);
    } catch (e) {
      refused(e);
    }
    this.ready = this.checked(this.live).then(() => {
      void this.journalSession?.append("policy.generation", { component: "host" }, 1, { generation: 1, spec: plan.source, hash: plan.hash, components: describe(plan) }).catch(() => {});
      if (opts.journal && plan.source !== "(library)")
        // Beside a journal file; for a journal that is not a file (PostgreSQL), in Vak's state directory.
        this.running = RunningRecord.start(opts.journal.location.startsWith("/") ? dirname(opts.journal.location) : vakDirs(opts.env ?? process.env).state, { session: this.journalSession?.id ?? null, name: plan.name, spec: plan.source, sha256: plan.hash, generation: 1 });
    }, (e: unknown) => {
      this.live = [];
      refused(e);
    });
    // Awaited by whoever starts the session; until then a refusal must not count as unhandled and kill the host.
    this.ready.catch(() => {});
  }

  get generation(): number {
    return this.generationNow;
  }

  get spec(): WorkloadPlan {
    return this.plan;
  }

  /** Resolves every component's secrets and starts its broker; a missing secret stops everything before it starts. */
  private start(plan: WorkloadPlan): Live[] {
    const resolved = plan.components.map((c) =>
      c.secrets.map((s): InjectedSecret => ({ ref: s.ref, recipient: s.recipient, value: resolveRef(parseRef(s.ref), { store: this.opts.secretStore, commands: this.opts.secretCommands, env: this.opts.env }) })),
    );
    for (const list of resolved) for (const s of list) this.redactor.add(s.value);
    const live: Live[] = [];
    try {
      for (const [i, c] of plan.components.entries()) live.push(this.startOne(c, resolved[i]!, plan.workspace));
    } catch (e) {
      void this.stop(live);
      throw e;
    }
    return live;
  }

  /** Waits for the walk of each component's state (Broker.ready); on a refusal, stops them all and throws it. */
  private async checked(live: Live[]): Promise<void> {
    try {
      await Promise.all(live.map((l) => l.broker.ready));
    } catch (e) {
      await this.stop(live);
      throw e;
    }
  }

  private startOne(c: ComponentPlan, secrets: InjectedSecret[], base: string): Live {
    // The component's sandbox workspace is an empty scratch folder: it starts with nothing but its grants.
    const scratch = mkdtempSync(join(tmpdir(), `vak-component-${c.name}-`));
    try {
      const broker = new Broker({
        workspace: scratch,
        base,
        mode: "workspace-write",
        // The command's own files (command-paths.ts) are read-only grants of its sandbox, beside the component's.
        grants: { read: [...c.read, ...c.commandPaths], write: c.write, denyRead: c.denyRead, denyWrite: c.denyWrite, noLinks: c.noLinks, env: c.env },
        net: c.net,
        secrets,
        caFiles: this.opts.caFiles,
        command: c.command,
        limits: c.limits,
        component: c.name,
        journal: this.journalSession,
        generation: this.generationNow,
        sandbox: this.opts.sandbox,
        host: this.opts.env ? hostFacts(this.opts.env) : undefined,
        approvals: { gate: this.approvals, rules: c.approval },
        // An MCP component's calls go to its own server, once the broker has checked, approved and recorded them.
        mcp: c.mcp ? { call: async (op, signal) => (await this.mcpOf(c.name)).call(op, signal) } : undefined,
        // The host's provider keys never enter a component's environment, by a grant or a secret.
        withheld: this.opts.secrets,
      });
      const input = c.input ? z.fromJSONSchema(c.input as Parameters<typeof z.fromJSONSchema>[0]) : undefined;
      return { plan: c, broker, scratch, input, secrets };
    } catch (e) {
      rmSync(scratch, { recursive: true, force: true });
      throw e;
    }
  }

  /** The MCP server of one component, started under its own grants (its sandbox workspace is its empty scratch folder). */
  private mcpOf(name: string): Promise<McpHub> {
    const l = this.live.find((x) => x.plan.name === name);
    if (!l?.plan.mcp) return Promise.reject(new Error(`${name} is not an MCP component`));
    const c = l.plan;
    const secrets = new Map(l.secrets.map((s) => [s.ref, s.value]));
    const def = McpServerSchema.parse({
      command: c.mcp, env: c.env, mode: c.write.length ? "workspace-write" : "read-only", read: [...c.read, ...c.commandPaths], write: c.write,
      deny_read: c.denyRead, deny_write: c.denyWrite, net: c.netText, deny_net: c.denyNetText,
      secrets: c.secrets.flatMap((s) => (s.recipient.kind === "env" ? [{ ref: s.ref, env: s.recipient.name }] : [])),
      ...(c.limits.maxProcs ? { max_procs: c.limits.maxProcs } : {}), ...(c.limits.maxMemoryBytes ? { max_memory: c.limits.maxMemoryBytes } : {}),
    });
    const journal = this.opts.journal;
    if (!journal) return Promise.reject(new Error("an MCP component needs the journal"));
    const changed = changedPath(c.commandPaths);
    if (changed) return Promise.reject(new Error(`${c.name}'s server command changed since the spec was checked: ${changed}; it was not started`));
    l.mcp ??= McpHub.start({
      servers: [{ name: c.name, def, source: this.plan.source }], workspace: l.scratch, mode: def.mode, journal,
      host: this.opts.env ? hostFacts(this.opts.env) : hostFacts(), secret: (ref) => secrets.get(ref) ?? "",
      // Its stderr and Vak's notes about it are hostile text: redacted (the host's redactor) and neutralised
      // (the one neutraliser) a bounded line at a time before any onLog sees them (src/mcp/stderr.ts).
      log: (line) => this.opts.onLog?.(line), neutralise: visible, withheld: this.opts.secrets,
    });
    return l.mcp;
  }

  private async stop(live: Live[]): Promise<void> {
    for (const l of live) {
      if (l.mcp) await l.mcp.then((h) => h.close(), () => undefined);
      await l.broker.close();
      rmSync(l.scratch, { recursive: true, force: true });
    }
  }

  /** The tools the harness sees: each component's, named component__tool; stores; session_search. */
  private router(): ToolRouter {
    const specs: ToolSpec[] = [];
    const routes = new Map<string, (args: unknown, signal: AbortSignal) => Promise<ToolAnswer>>();
    for (const l of this.live) {
      const c = l.plan;
      for (const name of c.builtin) {
        const def = findTool(name)!;
        specs.push({ name: `${c.name}${SEP}${name}`, description: `[${c.name}] ${def.description}`, parameters: toolJsonSchema(def) });
        routes.set(`${c.name}${SEP}${name}`, (args, signal) => runBuiltin(l.broker, name, args, signal));
      }
      if (c.command) {
        specs.push({ name: c.name, description: c.description, parameters: c.input ?? { type: "object" } });
        routes.set(c.name, async (args, signal) => {
          const changed = changedPath(c.commandPaths);
          if (changed) return { text: `refused (changed): ${c.name}'s command changed since the spec was checked: ${changed}; nothing ran (check the files it names, then start a new session)`, ok: false, code: "changed" };
          const checked = l.input?.safeParse(args);
          if (checked && !checked.success) return { text: `refused (bad-request): ${c.name}: ${checked.error.issues[0]!.path.join(".")}: ${checked.error.issues[0]!.message}`, ok: false, code: "bad-request" };
          const r = await l.broker.run({ kind: "tool", input: JSON.stringify(args) }, { signal });
          return { text: outcomeText(r), ok: r.ok, code: r.ok ? undefined : r.code, target: r.target };
        });
      }
      if (c.mcp && l.hub) {
        // The server's tools, as this component's: component__tool.
        const hub = l.hub;
        for (const t of hub.specs) {
          const name = `${c.name}${SEP}${t.name.slice(`mcp__${c.name}__`.length)}`;
          specs.push({ ...t, name, description: `[${c.name}] ${t.description}` });
          routes.set(name, async (args, signal) => {
            const op = hub.opFor(t.name, args)!;
            const r = await l.broker.run(op, { signal });
            return { text: outcomeText(r), ok: r.ok, code: r.ok ? undefined : r.code, target: r.target };
          });
        }
      }
      if (c.stores.length) {
        specs.push({
          name: `${c.name}${SEP}store`,
          description: `[${c.name}] Key-value stores this component holds (${c.stores.join(", ")}): get, put, list, delete.`,
          parameters: STORE_SCHEMA,
        });
        routes.set(`${c.name}${SEP}store`, (args) => this.store(c, args));
      }
    }
    specs.push({ name: "session_search", description: "Search the record of this workload's own past sessions.", parameters: SEARCH_SCHEMA });
    routes.set("session_search", (args) => this.search(args));
    return {
      specs,
      call: async (call, signal) => {
        const route = routes.get(call.name);
        if (!route) return { text: `refused (bad-request): there is no tool named ${JSON.stringify(call.name)}; the tools are ${[...routes.keys()].join(", ")}`, ok: false, code: "bad-request" };
        return route(call.args, signal);
      },
    };
  }

  /** A store op, checked against the component's grant, run by the host. */
  private async store(c: ComponentPlan, raw: unknown): Promise<ToolAnswer> {
    const actor = { component: c.name };
    const record = (kind: "op.requested" | "decision" | "tool.result", payload: Record<string, unknown>) =>
      this.journalSession?.append(kind, actor, this.generationNow, payload);
    const a = StoreArgs.safeParse(raw);
    if (!a.success) return { text: `refused (bad-request): store: ${a.error.issues[0]!.path.join(".")}: ${a.error.issues[0]!.message}`, ok: false, code: "bad-request" };
    const { action, store, key, value, prefix } = a.data;
    await record("op.requested", { op: `store.${action}`, args: { store, key: key ?? null } });
    if (!c.stores.includes(store)) {
      const reason = `${c.name} holds no grant for the store "${store}"; its stores are ${c.stores.join(", ") || "none"}`;
      await record("decision", { op: `store.${action}`, allowed: false, reason, target: store });
      return { text: `refused (denied): ${reason}`, ok: false, code: "denied", target: `store:${store}` };
    }
    await record("decision", { op: `store.${action}`, allowed: true, reason: `the store grant ${store}`, target: store });
    try {
      let text: string;
      if (action === "list") text = this.stores.list(store, prefix ?? "").join("\n");
      else if (!key) return { text: "refused (bad-request): store: this action needs a key", ok: false, code: "bad-request" };
      else if (action === "get") text = this.stores.get(store, key) ?? "(no such key)";
      else if (action === "delete") text = this.stores.delete(store, key) ? "deleted" : "(no such key)";
      else {
        if (value === undefined) return { text: "refused (bad-request): store put needs a value", ok: false, code: "bad-request" };
        this.stores.put(store, key, value);
        text = "stored";
      }
      await record("tool.result", { op: `store.${action}`, ok: true, bytes: Buffer.byteLength(text) });
      return { text, ok: true, target: `store:${store}` };
    } catch (e) {
      await record("tool.result", { op: `store.${action}`, ok: false, message: (e as Error).message });
      return { text: `refused (bad-request): ${(e as Error).message}`, ok: false, code: "bad-request", target: `store:${store}` };
    }
  }

  /** session_search: this workload's own sessions, and nothing else in the journal. */
  private async search(raw: unknown): Promise<ToolAnswer> {
    const a = SearchArgs.safeParse(raw);
    if (!a.success) return { text: `refused (bad-request): session_search: ${a.error.issues[0]!.message}`, ok: false, code: "bad-request" };
    const journal = this.opts.journal;
    if (!journal) return { text: "no record is kept in this session", ok: true };
    await journal.flush();
    const mine = (await journal.sessions()).filter((s) => s.kind === `workload:${this.plan.id}`);
    const hits = (await Promise.all(mine.map(async (s) => (await journal.search(a.data.query, { session: s.id, limit: 20 })).map((e) => ({ s, e }))))).flat();
    const text = hits
      .slice(0, 50)
      .map(({ s, e }) => `${s.id} ${e.time} ${e.actor.component} ${e.kind}: ${JSON.stringify(modelView(e.kind, e.payload)).slice(0, 300)}`)
      .join("\n");
    return { text: text || "(nothing found)", ok: true, target: `journal: workload ${this.plan.name}` };
  }

  /**
   * Checks the spec file for edits. A changed spec takes effect only once the
   * user approves it (bound to its content hash), as a new generation: every
   * component's broker is stopped and started anew with the new grants.
   */
  async reviewSpec(): Promise<"unchanged" | "applied" | "refused"> {
    if (this.plan.source === "(library)") return "unchanged";
    let next: WorkloadPlan;
    try {
      next = loadSpec(this.plan.source, { mode: this.opts.mode });
    } catch (e) {
      await this.journalSession?.append("decision", { component: "host" }, this.generationNow, { op: "spec", allowed: false, reason: `the edited spec is refused: ${(e as Error).message}` });
      return "refused";
    }
    if (next.hash === this.plan.hash) return "unchanged";
    if (this.refusedSpecs.has(next.hash)) return "refused";
    const outcome = await this.approvals.ask({
      digest: next.hash, generation: this.generationNow, component: "host", op: "spec", target: next.source,
      summary: `the workload spec ${next.source} changed; apply it? (${summarizeChange(this.plan, next)})`,
      scope: `this version of the spec (sha256 ${next.hash.slice(0, 16)}…) and no other; any further edit asks again`,
      view: next.text !== undefined ? { kind: "file", path: next.source, before: this.plan.text ?? null, after: next.text } : { kind: "text", text: summarizeChange(this.plan, next) },
    });
    if (outcome.answer === "deny") {
      this.refusedSpecs.add(next.hash);
      return "refused";
    }
    const generation = ++this.generationNow;
    this.approvals.setGeneration(generation);
    const old = this.live;
    this.live = [];
    await this.stop(old);
    this.plan = next;
    // The new brokers are born in the new generation; the old ones are gone. None is live before its state passed.
    const live = this.start(next);
    await this.checked(live);
    this.live = live;
    this.running?.update(generation, next.hash);
    await this.journalSession?.append("policy.generation", { component: "host" }, generation, { generation, spec: next.source, hash: next.hash, components: describe(next), reason: "the user approved the edited spec" });
    return "applied";
  }

  /** Sends the user's message to the harness and runs it to its end. */
  async send(message: string, signal?: AbortSignal): Promise<RunResult> {
    await this.ready;
    await this.reviewSpec();
    for (const l of this.live) if (l.plan.mcp) l.hub = await this.mcpOf(l.plan.name);
    const h = this.plan.harness;
    return runAgent(
      {
        component: "harness",
        model: this.opts.model,
        router: this.router(),
        journal: this.journalSession,
        generation: () => this.generationNow,
        redactor: this.redactor,
        maxTurns: h.maxTurns ?? 50,
        onEvent: this.opts.onEvent,
        role: `${h.instructions ? `${h.instructions}\n` : ""}You are the harness of the workload "${this.plan.name}". You hold no access yourself: each tool belongs to a component with its own grants (tool names are component${SEP}tool), and you can only ask a component to use its grant.`,
      },
      this.messages,
      message,
      signal ?? new AbortController().signal,
    );
  }

  async close(outcome = "ended"): Promise<void> {
    // A session refused at its start was stopped and its record ended then.
    if (await this.ready.then(() => false, () => true)) return;
    this.approvals.setGeneration(this.generationNow + 1);
    await this.stop(this.live);
    this.live = [];
    this.stores.close();
    this.running?.remove();
    if (this.journalSession) {
      await this.journalSession.end(outcome);
    }
  }
}

/**
 * What session_search shows the model of an event: the facts about what was
 * asked and decided, never what the host looked up (resolved addresses, pids,
 * mounts, canonical paths of other components). A kind not listed shows
 * nothing but its name.
 */
const MODEL_VIEW: Partial<Record<EventKind, readonly string[]>> = {
  message: ["role", "provenance", "text"],
  "op.requested": ["op", "args"],
  decision: ["op", "allowed", "rule", "reason"],
  "tool.result": ["op", "ok", "code", "message", "bytes"],
  "approval.asked": ["op", "summary"],
  "approval.answered": ["answer", "by"],
  "approval.voided": ["reason"],
  egress: ["method", "asked", "decision", "reason"],
  "session.started": ["kind", "title"],
  "session.ended": ["outcome"],
  "policy.generation": ["generation", "reason"],
  "model.call": ["ok", "toolCalls"],
  "secret.used": ["name", "recipient"],
  "run.cancelled": ["reason"],
};

function modelView(kind: EventKind, payload: Record<string, unknown>): Record<string, unknown> {
  const fields = Object.hasOwn(MODEL_VIEW, kind) ? (MODEL_VIEW[kind] ?? []) : [];
  return Object.fromEntries(fields.filter((f) => Object.hasOwn(payload, f)).map((f) => [f, payload[f]]));
}

/** What each component can reach, for the record and for `vak check`. */
export function describe(plan: WorkloadPlan): Record<string, unknown>[] {
  return plan.components.map((c) => ({
    component: c.name,
    tools: c.command ? [c.name] : c.mcp ? [`${c.name}__* (the MCP server's tools)`] : c.builtin,
    command: c.command ?? null,
    mcp: c.mcp ?? null,
    commandPaths: c.commandPaths,
    read: c.read,
    write: c.write,
    denyRead: c.denyRead,
    denyWrite: c.denyWrite,
    net: c.netText,
    env: c.env,
    secrets: c.secrets.map((s) => ({ ref: s.ref, to: describeRecipient(s.recipient) })),
    stores: c.stores,
    limits: c.limits,
    approval: c.approval,
  }));
}

function summarizeChange(a: WorkloadPlan, b: WorkloadPlan): string {
  const before = new Map(describe(a).map((d) => [d.component as string, JSON.stringify(d)]));
  const after = new Map(describe(b).map((d) => [d.component as string, JSON.stringify(d)]));
  const changed = [...new Set([...before.keys(), ...after.keys()])].filter((k) => before.get(k) !== after.get(k));
  return changed.length ? `components changed: ${changed.join(", ")}` : "no change in grants";
}
