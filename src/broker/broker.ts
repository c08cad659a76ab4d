import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Actor } from "../journal/events.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { Grants, Mode } from "../policy/grants.js";
import { DEFAULT_COMMAND_LIMITS, type Limits } from "../policy/limits.js";
import { stateRefusal } from "../policy/state-entries.js";
import { VakError } from "../policy/errors.js";
import { MAX_EDIT_FILE_BYTES } from "../protocol/edit-op.js";
import { decide, type HeldAhead, heldAhead, type HostFacts, type LaunchPlan, type PlanInput, type SandboxKind } from "../policy/plan.js";
import { installation } from "../policy/install.js";
import { canonicalGrant, isWithin } from "../policy/paths.js";
import { hostFacts } from "../sandbox/host.js";
import type { ApprovalGate } from "../approvals/approval-gate.js";
import { type ApprovalRules, needsApproval } from "../approvals/approval-rules.js";
import { OpApprovals } from "./approval-request.js";
import { needsInspection, type NetGrants } from "../policy/net-grants.js";
import type { RunTls } from "../net/tls-run.js";
import type { InjectedSecret } from "../secrets/grant.js";
import type { GateLink } from "../sandbox/launcher.js";
import { type BrokerEgress, recordedEgress } from "./egress.js";
import { type Refusal, resultPayload, revoked, summarize } from "./op-record.js";
import { OP_TRAITS, type Op, OpSchema } from "../protocol/ops.js";
import { unhandled } from "../protocol/unhandled.js";
import { PROTOCOL_VERSION } from "../protocol/worker-protocol.js";
import { type GrantView, resolveTarget } from "./path-rules.js";
import { injectSecrets, withheldIn } from "./secret-injection.js";
import { type PlanKey, WarmPool } from "./warm-pool.js";
import { type WorkerOutcome, WorkerProcess } from "./worker-process.js";

/**
 * The broker: every tool call becomes one op, checked against one component's
 * grants, run in a disposable sandboxed worker, bounded, and recorded. It owns
 * cancellation and policy generations; workers own nothing.
 */
export interface BrokerOptions {
  workspace: string;
  mode: Exclude<Mode, "full-access">;
  sandbox?: SandboxKind;
  grants?: Partial<Grants>;
  /** The component whose grants these are; it names the actor in the journal. */
  component?: string;
  /** Limits for exec commands (timeout, output, processes, memory). */
  limits?: Limits;
  opTimeoutMs?: number;
  journal?: SessionWriter;
  host?: HostFacts;
  /** Workers started ahead of time per kind of op (0: none). */
  poolSize?: number;
  maxConcurrent?: number;
  generation?: number;
  /** Network grants for exec commands, through an egress gate the broker starts on first use. */
  net?: NetGrants | undefined;
  /** A component's own command, for "tool" ops: run in the sandbox with the op's input on stdin. */
  command?: readonly string[] | undefined;
  /** Where relative op paths resolve (default: the workspace). A component's sandbox workspace may be an empty scratch directory while its paths are the project's. */
  base?: string | undefined;
  /** Secrets this component's commands get, resolved by the host (env form here; headers through the gate). */
  secrets?: readonly InjectedSecret[] | undefined;
  /** Host-owned approvals for allowed ops that the rules say to ask about. */
  approvals?: { gate: ApprovalGate; rules: ApprovalRules } | undefined;
  /** The host's MCP client for "mcp" ops (src/mcp/ sandboxes, pins and records each server); without it they are refused. */
  mcp?: McpCaller | undefined;
  /** CA files trusted for upstream servers, besides the system store, when the gate terminates TLS. */
  caFiles?: readonly string[] | undefined;
  /**
   * Values no sandbox's environment may hold: the host's model provider keys.
   * A broker whose commands would get one (an env grant, a secret) refuses to
   * start, naming the grant.
   */
  withheld?: readonly string[] | undefined;
}

/** Makes one MCP tool call on the host, for an op the broker has admitted, checked and had approved. */
export interface McpCaller {
  call(op: Extract<Op, { kind: "mcp" }>, signal: AbortSignal): Promise<WorkerOutcome>;
}

export type OpOutcome = (WorkerOutcome & { op: Op["kind"]; target?: string | undefined; ms: number });

/**
 * A sandbox for an interactive command the host runs on a terminal of its
 * own (the web terminal's shell): this component's plan, a gate token when it
 * has network grants, and the two ends of its record. The broker stops it
 * with its other workers on a policy change or close, through stop().
 */
export interface InteractiveSandbox {
  plan: LaunchPlan;
  gate?: GateLink | undefined;
  generation: number;
  /** Records the start (call once the launcher runs). */
  started(pid: number): void;
  /** Records the end and gives the gate token back. */
  exited(code: number, denied: string[]): void;
}

/** The limits given, without keys set to undefined (which would hide a default). */
function definedOnly(l: Limits): Limits {
  return Object.fromEntries(Object.entries(l).filter(([, v]) => v !== undefined)) as Limits;
}

/** The largest file a worker may write: what an edit may make, with room. */
const WORKER_MAX_FILE_BYTES = 2 * MAX_EDIT_FILE_BYTES;

/** How long a command may run when its component sets no limit. */
const COMMAND_TIMEOUT_MS = 10 * 60_000;

export class Broker {
  private generationNow: number;
  private readonly pool: WarmPool;
  private readonly inflight = new Set<WorkerProcess>();
  /** Interactive sandboxes the host runs itself (interactive()): their generation and how to stop one. */
  private readonly interactives = new Set<{ generation: number; stop: () => Promise<void> }>();
  /** Journal writes that follow an op (a worker's exit), awaited by close(). */
  private readonly pending = new Set<Promise<unknown>>();
  private readonly plans = new Map<PlanKey, LaunchPlan>();
  /** The write plan's held-path walk for the current mode and grants, done in slices (heldAhead): every plan takes it. */
  private ahead: HeldAhead | undefined;
  /** That walk, under way or done; a new generation starts its own (heldWalked waits for the newest). */
  private walking: Promise<void>;
  private grants: GrantView;
  private mode: Exclude<Mode, "full-access">;
  private grantInput: Partial<Grants>;
  /** Each read and write grant where it resolved when it was given (pinned()); every later plan must find it there. */
  private pins: NonNullable<Grants["confined"]>;
  /** Asks about allowed ops, and remembers "for this session" answers (exact capabilities) until a policy change. */
  private readonly asker: OpApprovals | undefined;
  private readonly egress: BrokerEgress;
  /** TLS at this broker's gate (its own CA and trust bundle), made on the first command that needs it. */
  private tls: Promise<RunTls | undefined> | undefined;
  private readonly needsTls: boolean;
  private readonly host: HostFacts;
  private readonly runtime: string;
  private readonly actor: Actor;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private journalFailure: Error | undefined;
  private closed = false;
  /** Reduced mode has no private mounts: TMPDIR and HOME are a host directory of the broker's, removed on close. */
  private readonly scratch: { tmp: string; home: string } | undefined;
  /** The walk of this component's state, started by the constructor: its refusal, or undefined once it passed. */
  private readonly stateChecked: Promise<string | undefined>;
  /** Set when that walk refused: every op is refused with it (the broker is closed). */
  private unsafe: string | undefined;
  /**
   * Resolves once the walk of this component's state (a host tool's state it may write: state-entries.ts) has
   * passed, in slices (a process hosting many components serves the others meanwhile); rejects with the refusal,
   * the broker closed. Nothing of the component runs before: its ops, terminals and warm workers wait for it.
   */
  readonly ready: Promise<void>;

  constructor(private readonly opts: BrokerOptions) {
    this.generationNow = opts.generation ?? 1;
    this.mode = opts.mode;
    this.grantInput = opts.grants ?? {};
    this.pins = pinned(this.grantInput, opts.workspace);
    this.host = opts.host ?? hostFacts();
    this.runtime = installation().workerDir;
    this.pool = new WarmPool(() => this.opts.poolSize ?? 0, (key) => this.plan(key), () => this.generationNow, () => this.closed);
    if (!existsSync(join(this.runtime, "worker.cjs"))) throw new Error(`the worker bundle is missing (${this.runtime}); run npm ci`);
    this.actor = { component: opts.component ?? "tools" };
    // A grant that must see inside HTTPS, or a secret the gate puts in headers, needs the gate to terminate TLS.
    this.needsTls = Boolean(opts.net) && (needsInspection(opts.net!) || (opts.secrets ?? []).some((s) => s.recipient.kind !== "env"));
    this.asker = opts.approvals
      ? new OpApprovals(opts.approvals.gate, this.actor.component, () => this.generationNow, (kind, payload) => this.record(kind, payload), (path, s) => this.readCurrent(path, s))
      : undefined;
    this.egress = recordedEgress(this.actor, this.opts.journal, this.opts.secrets ?? [], async () => ({ tls: (await this.sessionTls())?.gate }));
    if (opts.sandbox === "reduced") {
      const root = mkdtempSync(join(tmpdir(), "vak-scratch-"));
      mkdirSync(join(root, "tmp"), { mode: 0o700 });
      mkdirSync(join(root, "home"), { mode: 0o700 });
      this.scratch = { tmp: join(root, "tmp"), home: join(root, "home") };
    }
    // The plan's grants and environment, without its held paths: those are walked below, in slices (a process
    // hosting many components serves the others meanwhile), and the path rules take them before any op runs.
    const write = decide({ ...this.input("write"), held: [] }, this.host);
    this.grants = { ...write.grants, stateDirs: this.host.stateDirs, held: [] };
    // A component whose commands would get a provider key in their environment does not start.
    const leak = withheldIn(decide({ ...this.input("write", ["/bin/true"]), held: [] }, this.host).env, this.opts.secrets ?? [], this.opts.withheld ?? [], this.actor.component);
    if (leak) throw new VakError("bad-input", leak);
    this.walking = this.walkHeld();
    // A host tool's state that already holds what its tool would follow: the component does not start (state-entries.ts).
    let refused: Error | undefined;
    const checked = this.walking.then(
      () => stateRefusal(write.grants.noLinks, write.grants.write).catch((e: Error) => `a host tool's state (state_dirs, state_files) could not be checked: ${e.message}`),
      // Writable trees larger than the held-path walk's budget: refused as a plan made in one piece refuses them.
      (e: Error) => ((refused = e), e.message),
    );
    this.stateChecked = checked.then(async (unsafe) => {
      if (unsafe) (this.unsafe = unsafe), await this.close();
      return unsafe;
    });
    this.ready = this.stateChecked.then((unsafe) => {
      if (unsafe) throw refused ?? new VakError("unsafe-state", unsafe);
    });
    // Awaited by whoever starts the component; until then a refusal must not count as unhandled and kill the host.
    this.ready.catch(() => {});
  }

  /**
   * Refuses a switch to mode when this component's write plan in it would open a host tool's state that already
   * holds links (state-entries.ts): a component started read-only scanned nothing there. The plan is made in the
   * other mode and the current one's put back before the walk's first slice, so no op sees the other mode's plan:
   * what starts during the walk runs under the current mode, and the switch itself (setGeneration, after this
   * resolves) stops it.
   */
  async assertMode(mode: Exclude<Mode, "full-access">): Promise<void> {
    if (mode === "read-only" || mode === this.mode) return;
    const mode0 = this.mode;
    let input: PlanInput;
    try {
      this.mode = mode;
      input = this.input("write");
    } finally {
      this.mode = mode0;
    }
    // Its grants only: the switch (setGeneration) walks the held paths of the mode it switches to.
    const write = decide({ ...input, held: [] }, this.host);
    const unsafe = await stateRefusal(write.grants.noLinks, write.grants.write);
    if (unsafe) throw new VakError("unsafe-state", `the mode stays ${mode0}: ${unsafe}`);
    if (this.closed) throw new Error("the broker closed while its state was checked");
  }

  get generation(): number {
    return this.generationNow;
  }

  /** What this broker may reach now: its mode and grants (a sub-agent's broker may hold at most this). */
  get ceiling(): { mode: Exclude<Mode, "full-access">; grants: Partial<Grants>; workspace: string } {
    return { mode: this.mode, grants: this.grantInput, workspace: this.opts.workspace };
  }

  /** The launch plan for a worker of this kind (or for an exec command). */
  /** This broker's TLS (its CA, the trust bundle), once, when its grants need it. */
  private sessionTls(): Promise<RunTls | undefined> {
    if (!this.needsTls) return Promise.resolve(undefined);
    this.tls ??= import("../net/tls-run.js").then((m) => m.prepareRunTls({ terminate: true, caFiles: this.opts.caFiles ?? [] }));
    return this.tls;
  }

  private plan(key: PlanKey, command?: string[], extra: readonly string[] = []): LaunchPlan {
    const cached = !command && this.plans.get(key);
    if (cached) return cached;
    const plan = decide(this.input(key, command, extra), this.host);
    if (!command) this.plans.set(key, plan);
    return plan;
  }

  /**
   * Walks the held paths of the write plan for the current mode and grants, in slices; then makes that plan, and
   * the path rules from it. A newer generation's walk supersedes it.
   */
  private async walkHeld(): Promise<void> {
    const generation = this.generationNow;
    const ahead = await heldAhead(this.input("write"), this.host);
    if (generation !== this.generationNow) return;
    this.ahead = ahead;
    this.plans.delete("write");
    const write = this.plan("write");
    this.grants = { ...write.grants, stateDirs: this.host.stateDirs, held: write.held };
  }

  /** Until the newest held-path walk is done (an op asked during a policy change plans with its result); its refusal is the plans'. */
  private async heldWalked(): Promise<void> {
    for (let w; w !== this.walking; ) await (w = this.walking).catch(() => {});
  }

  /** What decide() takes for a worker of this kind (or for an exec command). */
  private input(key: PlanKey, command?: string[], extra: readonly string[] = []): PlanInput {
    const g = this.grantInput;
    // Reads run read-only whatever the mode; in read-only mode nothing is written, explicit write grants included.
    const readOnly = key === "read" || this.mode === "read-only";
    return {
      mode: readOnly ? "read-only" : this.mode,
      sandbox: this.opts.sandbox ?? "namespaces",
      workspace: this.opts.workspace,
      // Commands start where relative paths point, when the grants let them see it.
      cwd: this.opts.base && [...(g.read ?? []), ...(g.write ?? [])].some((p) => isWithin(this.opts.base!, p)) ? this.opts.base : undefined,
      grants: {
        read: [...(g.read ?? []), ...(readOnly ? (g.write ?? []) : [])],
        write: readOnly ? [] : [...(g.write ?? [])],
        denyRead: g.denyRead ?? [], denyWrite: g.denyWrite ?? [], noLinks: g.noLinks ?? [], env: g.env ?? [], confined: [...(g.confined ?? []), ...this.pins],
      },
      // A model-written command gets a file-size ceiling even when its component sets none (a sparse file cannot fill a disk's worth of offsets);
      // a worker can write at most what an edit may make.
      limits: command ? { ...DEFAULT_COMMAND_LIMITS, ...definedOnly(this.opts.limits ?? {}) } : { timeoutMs: this.opts.opTimeoutMs ?? 120_000, maxFileBytes: WORKER_MAX_FILE_BYTES },
      command: command ?? [process.execPath, join(this.runtime, "worker-boot.cjs")],
      runtime: command ? [...extra] : [this.runtime],
      scratch: this.scratch,
      net: command ? this.opts.net : undefined,
      // A command runs with the write plan's grants: what that plan found on disk holds for it too.
      held: command && !readOnly ? this.plans.get("write")?.held : undefined,
      heldAhead: readOnly ? undefined : this.ahead,
    };
  }

  /** Starts workers ahead of time, so that the next ops need not wait for one (once the component's state passed). */
  prewarm(): void {
    void this.stateChecked.then((unsafe) => unsafe === undefined && this.pool.prewarm());
  }

  private async slot(): Promise<void> {
    if (this.running < (this.opts.maxConcurrent ?? 8)) {
      this.running += 1;
      return;
    }
    await new Promise<void>((r) => this.waiting.push(r));
    this.running += 1;
  }

  private release(): void {
    this.running -= 1;
    this.waiting.shift()?.();
  }

  private record(kind: Parameters<SessionWriter["append"]>[0], payload: Record<string, unknown>): Promise<unknown> {
    if (!this.opts.journal) return Promise.resolve();
    const p = this.opts.journal.append(kind, this.actor, this.generationNow, payload).catch((e: Error) => {
      this.journalFailure ??= e;
      throw e;
    });
    // Awaited later (with allSettled); until then a failure must not count as unhandled and kill the host.
    p.catch(() => {});
    return p;
  }

  /**
   * Runs one op; never throws for the op's own failures, which come back as
   * outcomes. In order: admit it, check it against the path rules, ask about
   * it if the approval rules say so, wait for a slot, run it in a sandbox, and
   * return only what is on the record.
   */
  async run(input: unknown, opts: { signal?: AbortSignal } = {}): Promise<OpOutcome> {
    const started = Date.now();
    const parsed = OpSchema.safeParse(input);
    const kind = (parsed.success ? parsed.data.kind : String((input as { kind?: unknown })?.kind)) as Op["kind"];
    const outcome = (r: WorkerOutcome, target?: string): OpOutcome => ({ ...r, op: kind, target, ms: Date.now() - started });

    const inadmissible = this.admit(parsed);
    if (inadmissible) return outcome(inadmissible);
    const op = (parsed as { data: Op }).data;
    const generation = this.generationNow;
    // Nothing runs before the walk of the component's state passed (an op asked meanwhile waits; after a refusal, admit refuses).
    if (await this.stateChecked) return outcome({ ok: false, code: "unsafe-state", message: `refused: ${this.unsafe}` });
    await this.heldWalked();
    const records: Promise<unknown>[] = [this.record("op.requested", { op: op.kind, args: summarize(op) })];
    /** Refuses an op the path rules allowed: its result is the refusal, on the record. */
    const refuse = async (r: Refusal, target: string | undefined): Promise<OpOutcome> => {
      records.push(this.record("tool.result", resultPayload(op.kind, r)));
      await Promise.allSettled(records);
      return outcome(r, target);
    };

    const checked = this.checkPathRules(op, records);
    if (!checked.ok) {
      await Promise.allSettled(records);
      return outcome(checked);
    }
    const { resolved, target } = checked;

    /** For an approved write or edit, the file as the person was shown it: the worker writes nothing if it is otherwise. */
    let base: string | null | undefined;
    if (this.opts.approvals && needsApproval(this.opts.approvals.rules, resolved)) {
      const approved = await this.asker!.approve(resolved, target, generation, opts.signal);
      if (!approved.ok) return refuse(approved, target);
      base = approved.base;
    }

    await this.slot();
    // An op that waited for a slot across a policy change does not start under the old grants.
    if (generation !== this.generationNow || this.closed) {
      this.release();
      return refuse(this.closed ? { ok: false, code: "closed", message: "the broker closed before this op started" } : revoked(this.generationNow), target);
    }
    let result = op.kind === "mcp" ? await this.runMcp(op, opts.signal) : op.kind === "fetch" ? await this.fetchOnHost(op, generation, records) : await this.runInSandbox(op, resolved, generation, records, opts.signal, base);
    if (generation !== this.generationNow) result = revoked(this.generationNow);
    records.push(this.record("tool.result", resultPayload(op.kind, result, Date.now() - started)));
    // Nothing is returned that is not on the record.
    const written = await Promise.allSettled(records);
    if (written.some((r) => r.status === "rejected"))
      return outcome({ ok: false, code: "journal", message: `the journal cannot be written; the result is withheld (${(this.journalFailure as Error | undefined)?.message})` }, target);
    // A result is not delivered once the policy has changed under it, even if it came in just before.
    if (result.ok && generation !== this.generationNow) {
      result = revoked(this.generationNow);
      await this.record("tool.result", resultPayload(op.kind, result)).catch(() => {});
    }
    // A fetched page is labelled with where it came from in the end, not where it was asked for.
    const landed = op.kind === "fetch" && result.ok && typeof result.data?.url === "string" ? result.data.url : target;
    return outcome(result, landed);
  }

  /** Why an op cannot even be considered (nothing is recorded for it), or undefined. */
  private admit(parsed: ReturnType<typeof OpSchema.safeParse>): Refusal | undefined {
    if (this.unsafe) return { ok: false, code: "unsafe-state", message: `refused: ${this.unsafe}` };
    if (this.closed) return { ok: false, code: "closed", message: "the broker is closed" };
    if (this.journalFailure) return { ok: false, code: "journal", message: `refused: the journal cannot be written (${this.journalFailure.message})` };
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      return { ok: false, code: "bad-request", message: `malformed op at ${i.path.join(".") || "(top level)"}: ${i.message}` };
    }
    return undefined;
  }

  /**
   * The path rules, before any worker starts: a path op's target resolved and
   * checked against the grants (path-rules.ts), a command op checked to have a
   * command. Records the decision either way, and the resolved target.
   */
  private checkPathRules(op: Op, records: Promise<unknown>[]): { ok: true; resolved: Op; target: string | undefined } | Refusal {
    if (op.kind === "tool" && !this.opts.command) {
      records.push(this.record("decision", { op: op.kind, allowed: false, reason: "this component has no command" }));
      return { ok: false, code: "bad-request", message: "this component has no command to run" };
    }
    const traits = OP_TRAITS[op.kind];
    let resolved: Op = op;
    let target: string | undefined;
    if (traits.effect === "net") {
      // No path: the destination is decided by the network grants, hop by hop, when the host makes the request.
      if (!this.opts.net) {
        const message = "this component has no network grant, so web_fetch reaches nothing; grant the hosts with net = [...] (or --allow-net)";
        records.push(this.record("decision", { op: op.kind, allowed: false, reason: message }));
        return { ok: false, code: "denied", message };
      }
      target = "url" in op ? op.url.slice(0, 4096) : undefined;
      records.push(this.record("decision", { op: op.kind, allowed: true, reason: "the host fetches it under the component's network grants, each hop checked", target }));
      return { ok: true, resolved, target };
    }
    if (traits.effect !== "exec") {
      const base = this.opts.base ?? this.opts.workspace;
      const raw = "path" in op && op.path ? op.path : base;
      const t = resolveTarget(base, this.grants, raw, traits.effect, traits.creates);
      if (!t.ok) {
        records.push(this.record("decision", { op: op.kind, allowed: false, reason: t.message, rule: t.rule, asked: raw }));
        return { ok: false, code: "denied", message: t.message };
      }
      target = t.path;
      resolved = { ...op, path: t.path } as Op;
      records.push(this.record("target.resolved", { asked: raw, resolved: t.path }));
    }
    if (op.kind === "tool") target = this.opts.command!.join(" ");
    if (op.kind === "mcp") {
      if (!this.opts.mcp) {
        records.push(this.record("decision", { op: op.kind, allowed: false, reason: "this session has no MCP servers" }));
        return { ok: false, code: "bad-request", message: "this session has no MCP servers ([mcp_servers] in your config)" };
      }
      target = `mcp ${op.server} ${op.tool}`;
    }
    records.push(this.record("decision", { op: op.kind, allowed: true, reason: traits.effect === "exec" ? "the command runs under the component's grants" : `inside the grant ${target}`, target }));
    return { ok: true, resolved, target };
  }

  /** How long an op may run: a model may ask for less time than the component's limit, never more. Commands may run longer than file ops by default. */
  private timeoutFor(op: Op): number {
    const command = OP_TRAITS[op.kind].effect === "exec";
    const limitMs = this.opts.limits?.timeoutMs ?? (command ? COMMAND_TIMEOUT_MS : (this.opts.opTimeoutMs ?? 120_000));
    return op.kind === "exec" && op.timeoutMs ? Math.min(op.timeoutMs, limitMs) : limitMs;
  }

  /** What an exec-effect op runs, and what it gets on stdin. */
  private commandOf(op: Op): { argv: string[]; stdin?: string } {
    switch (op.kind) {
      case "exec": return { argv: ["/bin/sh", "-c", op.command] };
      case "tool": return { argv: [...this.opts.command!], stdin: op.input };
      case "mcp": throw new Error("an MCP call is not a command");
      case "read": case "list": case "glob": case "grep": case "write": case "edit": case "fetch": throw new Error(`${op.kind} is not a command`);
      default: return unhandled(op, "op kind");
    }
  }

  /** A sandbox for one command: its plan, its secrets where their recipients say, and a gate token when it has network grants. */
  private async startCommand(argv: string[], generation: number, records: Promise<unknown>[]): Promise<WorkerProcess> {
    const tls = this.opts.net ? await this.sessionTls() : undefined;
    const plan = this.plan("write", argv, tls ? [tls.dir] : []);
    if (tls && plan.network.kind === "gate") Object.assign(plan.env, tls.env);
    const { headers, placeholders, envUses } = injectSecrets(plan.env, this.opts.secrets ?? [], this.actor.component);
    for (const use of envUses) records.push(this.record("secret.used", { ...use }));
    const gate = plan.network.kind === "gate" ? await this.egress.link(plan.network.grants, generation, headers, { placeholders }) : undefined;
    await tls?.warm(); // once per session: its first request then waits for nothing
    const worker = new WorkerProcess(plan, generation, gate?.link);
    if (gate) void worker.done.finally(gate.release).catch(() => {});
    return worker;
  }

  /** An MCP call, through the host's MCP client, under the same time limit as a command; holds the slot taken before it. */
  private async runMcp(op: Extract<Op, { kind: "mcp" }>, caller?: AbortSignal): Promise<WorkerOutcome> {
    const timeoutMs = this.timeoutFor(op);
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = caller ? AbortSignal.any([caller, timeout]) : timeout;
    try {
      return await this.opts.mcp!.call(op, signal);
    } catch (e) {
      if (timeout.aborted && !caller?.aborted) return { ok: false, code: "timeout", message: `timed out after ${timeoutMs} ms` };
      if (signal.aborted) return { ok: false, code: "cancelled", message: "cancelled" };
      return { ok: false, code: "mcp", message: (e as Error).message };
    } finally {
      this.release();
    }
  }

  /**
   * web_fetch: the host makes the request (no worker: there is nothing to
   * sandbox, and no sandbox needs a CA), under the component's own network
   * grants, every hop recorded as an egress event. Holds the slot taken before
   * it and gives it back.
   */
  private async fetchOnHost(op: Extract<Op, { kind: "fetch" }>, generation: number, records: Promise<unknown>[]): Promise<WorkerOutcome> {
    try {
      const { runWebFetch, webFetchResultText } = await import("../net/web-fetch-tool.js");
      const r = await runWebFetch({ url: op.url, maxChars: op.maxChars }, {
        grants: this.opts.net!, component: this.actor.component, generation,
        onEvent: (e) => {
          const { time: _t, generation: _g, ...fields } = e;
          records.push(this.record("egress", fields));
        },
        timeoutMs: Math.min(this.timeoutFor(op), 60_000),
        caFiles: this.opts.caFiles,
      });
      if (!r.ok) return { ok: false, code: "denied", message: webFetchResultText(r) };
      return { ok: true, output: webFetchResultText(r), truncated: r.truncated, data: { url: r.url, status: r.status, hops: r.hops.length } };
    } catch (e) {
      return { ok: false, code: "fetch", message: (e as Error).message };
    } finally {
      this.release();
    }
  }

  /**
   * Runs an admitted, allowed op: a command under the launcher, or a path op
   * in a worker (a warm one when the pool has it) sandboxed for its effect.
   * Holds the slot taken before it and gives it back.
   */
  private async runInSandbox(op: Op, resolved: Op, generation: number, records: Promise<unknown>[], caller?: AbortSignal, base?: string | null): Promise<WorkerOutcome> {
    const effect = OP_TRAITS[op.kind].effect;
    const timeoutMs = this.timeoutFor(op);
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = caller ? AbortSignal.any([caller, timeout]) : timeout;
    let refill: PlanKey | undefined;
    let outcome: WorkerOutcome;
    try {
      let worker: WorkerProcess;
      let command: { argv: string[]; stdin?: string } | undefined;
      if (effect === "exec") {
        command = this.commandOf(op);
        worker = await this.startCommand(command.argv, generation, records);
      } else {
        // Ops that only read run in a read-only sandbox, whatever the session's mode.
        const key = effect === "read" ? "read" : "write";
        const taken = this.pool.take(key);
        worker = taken.worker;
        if (taken.fromPool) refill = key;
      }
      this.inflight.add(worker);
      // Its generation was revoked while it was set up (setGeneration took the in-flight workers before it was one).
      if (worker.generation < this.generationNow || this.closed) worker.cancel();
      // Its exit is recorded when it is reaped (a worker is stopped as soon as its answer is in).
      const w = worker;
      this.background(
        w.done
          .finally(() => this.inflight.delete(w))
          .then((r) => this.record("worker.exited", { op: op.kind, pid: w.pid, code: r.code, denied: r.denied.map((d) => `${d.op} ${d.path}: ${d.reason}`) })),
      );
      records.push(this.record("worker.spawned", { sandbox: worker.plan.sandbox, op: op.kind, mode: worker.plan.mode, pid: worker.pid, warm: refill !== undefined }));
      outcome = command
        ? await worker.runCommand(signal, command.stdin)
        : await worker.run({ v: PROTOCOL_VERSION, id: randomBytes(8).toString("hex"), op: resolved, ...(base !== undefined ? { base } : {}) }, signal);
      if (!outcome.ok && outcome.code === "cancelled" && timeout.aborted && !caller?.aborted)
        outcome = { ok: false, code: "timeout", message: `timed out after ${timeoutMs} ms; the worker and everything it started were stopped` };
    } catch (e) {
      outcome = { ok: false, code: "sandbox-setup", message: (e as Error).message };
    } finally {
      this.release();
    }
    if (refill) {
      const key = refill;
      setImmediate(() => this.pool.refill(key));
    }
    return outcome;
  }

  /**
   * An interactive command under this component's grants, exactly as an exec
   * op's command would run (the same plan, secrets and gate), for the host to
   * start itself on a terminal. Not an op: a person types into it, so it is
   * offered only where the user turned it on, and it is on the record as a
   * worker that starts and exits.
   */
  async interactive(argv: string[], stop: () => Promise<void>): Promise<InteractiveSandbox> {
    if (this.unsafe) throw new VakError("unsafe-state", this.unsafe);
    if (this.closed) throw new Error("the broker is closed");
    const generation = this.generationNow;
    // Registered before the first await, so that a policy change or a close while it starts reaches it.
    const entry = { generation, stop };
    this.interactives.add(entry);
    let gate: { link: GateLink; release(): void } | undefined;
    let plan: LaunchPlan;
    try {
      if (await this.stateChecked) throw new VakError("unsafe-state", this.unsafe!);
      await this.heldWalked();
      const records: Promise<unknown>[] = [];
      plan = this.plan("write", argv);
      const { headers, envUses } = injectSecrets(plan.env, this.opts.secrets ?? [], this.actor.component);
      for (const use of envUses) records.push(this.record("secret.used", { ...use }));
      if (plan.network.kind === "gate") gate = await this.egress.link(plan.network.grants, generation, headers);
      await Promise.allSettled(records);
      // Revoked while it was being set up: the plan is the old generation's, and nothing would stop what it starts.
      if (this.closed || this.generationNow !== generation)
        throw new VakError("sandbox-setup", "the session's policy changed while the terminal was starting; open it again");
    } catch (e) {
      this.interactives.delete(entry);
      gate?.release();
      throw e;
    }
    return {
      plan, gate: gate?.link, generation,
      started: (pid) => this.background(this.record("worker.spawned", { sandbox: plan.sandbox, op: "terminal", command: argv, mode: plan.mode, pid, warm: false })),
      exited: (code, denied) => {
        this.interactives.delete(entry);
        gate?.release();
        this.background(this.record("worker.exited", { op: "terminal", code, denied }));
      },
    };
  }

  /** The file a write or edit would change, as it is now, read by a read-only worker (for the approval's diff). */
  private async readCurrent(path: string, signal?: AbortSignal): Promise<WorkerOutcome> {
    const { worker, fromPool } = this.pool.take("read");
    this.inflight.add(worker);
    try {
      return await worker.run({ v: PROTOCOL_VERSION, id: randomBytes(8).toString("hex"), op: { kind: "read", path, limit: 100_000 } }, signal);
    } finally {
      this.inflight.delete(worker);
      if (fromPool) setImmediate(() => this.pool.refill("read"));
    }
  }

  private background(p: Promise<unknown>): void {
    const tracked = p.catch(() => {}).finally(() => this.pending.delete(tracked));
    this.pending.add(tracked);
  }

  /**
   * A new policy generation, perhaps with a new mode or grants: the pool is
   * drained and every worker of an older generation is stopped (and its exit
   * recorded) before this resolves, so the caller may report the new state
   * knowing that nothing of the old one still runs.
   */
  async setGeneration(generation: number, reason = "policy changed", change: { mode?: Exclude<Mode, "full-access">; grants?: Partial<Grants>; record?: boolean } = {}): Promise<number> {
    if (generation <= this.generationNow) throw new Error(`generation ${generation} is not newer than ${this.generationNow}`);
    const old = this.generationNow;
    const previousMode = this.mode;
    this.generationNow = generation;
    if (change.mode) this.mode = change.mode;
    if (change.grants) (this.grantInput = change.grants), (this.pins = pinned(change.grants, this.opts.workspace));
    this.plans.clear();
    this.asker?.forget();
    // The old generation's workers are taken before the first await: one a caller's abort is already ending still counts.
    const stopping: Promise<unknown>[] = this.pool.drain();
    for (const w of this.inflight) if (w.generation < generation) (w.cancel(), stopping.push(w.done));
    for (const i of this.interactives) if (i.generation < generation) stopping.push(i.stop());
    await this.egress.setGeneration(generation);
    this.ahead = undefined;
    this.walking = this.walkHeld();
    await this.walking;
    await Promise.allSettled(stopping);
    await Promise.allSettled([...this.pending]);
    // A caller that changes more than this broker (a session) records the change itself, once all of it is done.
    if (change.record !== false) await this.record("policy.generation", { generation, previous: old, reason, mode: this.mode, previousMode, stopped: stopping.length });
    if ((this.opts.poolSize ?? 0) > 0) this.prewarm();
    return stopping.length;
  }

  async close(): Promise<void> {
    this.closed = true;
    const stopping: Promise<unknown>[] = this.pool.drain();
    for (const w of this.inflight) (w.cancel(), stopping.push(w.done));
    for (const i of this.interactives) stopping.push(i.stop());
    await Promise.allSettled(stopping);
    await Promise.allSettled([...this.pending]);
    await this.egress.close();
    (await this.tls?.catch(() => undefined))?.close();
    if (this.scratch) rmSync(dirname(this.scratch.tmp), { recursive: true, force: true });
  }
}

/**
 * A component's read and write grants as they resolve now, each pinned there: its commands may write the workspace,
 * and one that renames a grant's parent and leaves a link in its place would otherwise have the next plan resolve
 * the same string somewhere else (bind the resolved resource, not the string). One that does not resolve is left
 * to the plan, which refuses it.
 */
function pinned(g: Partial<Grants>, workspace: string): NonNullable<Grants["confined"]> {
  const out: NonNullable<Grants["confined"]> = [];
  for (const [list, flag] of [[g.read, "--allow-read"], [g.write, "--allow-write"]] as const)
    for (const path of list ?? []) {
      try {
        out.push({ path, root: canonicalGrant(path, workspace, flag), what: "a grant of this session, given as" });
      } catch {
        // refused by the plan, with its own message
      }
    }
  return out;
}
