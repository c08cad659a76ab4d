import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { Actor, Payload } from "../journal/events.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { Grants, Mode } from "../policy/grants.js";
import type { Limits } from "../policy/limits.js";
import { decide, type HostFacts, type LaunchPlan, type SandboxKind } from "../policy/plan.js";
import { installation } from "../policy/install.js";
import { isWithin } from "../policy/paths.js";
import { hostFacts } from "../sandbox/host.js";
import type { ApprovalGate } from "../approvals/approval-gate.js";
import { canonicalJson, sha256 } from "../approvals/digest.js";
import { type ApprovalRules, capabilityOf, needsApproval, summarizeOp } from "../approvals/approval-rules.js";
import type { NetGrants } from "../policy/net-grants.js";
import type { HeaderSecret } from "../net/egress-gate.js";
import { describeRecipient, type InjectedSecret, placeholderFor } from "../secrets/grant.js";
import { BrokerEgress } from "./egress.js";
import { OP_TRAITS, type Op, OpSchema, unhandled } from "../protocol/ops.js";
import { PROTOCOL_VERSION } from "../protocol/worker-protocol.js";
import { type GrantView, resolveTarget } from "./path-rules.js";
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
}

export type OpOutcome = (WorkerOutcome & { op: Op["kind"]; target?: string | undefined; ms: number });

/** How long a command may run when its component sets no limit. */
const COMMAND_TIMEOUT_MS = 10 * 60_000;

type PlanKey = "read" | "write";

export class Broker {
  private generationNow: number;
  private readonly pool = new Map<PlanKey, WorkerProcess[]>();
  private readonly inflight = new Set<WorkerProcess>();
  /** Journal writes that follow an op (a worker's exit), awaited by close(). */
  private readonly pending = new Set<Promise<unknown>>();
  private readonly plans = new Map<PlanKey, LaunchPlan>();
  private grants: GrantView;
  private mode: Exclude<Mode, "full-access">;
  private grantInput: Partial<Grants>;
  /** "Allow for this session" answers: exact capabilities, forgotten on a policy change. */
  private readonly allowances = new Set<string>();
  private readonly egress: BrokerEgress;
  private readonly host: HostFacts;
  private readonly runtime: string;
  private readonly actor: Actor;
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  private journalFailure: Error | undefined;
  private closed = false;
  /** Reduced mode has no private mounts: TMPDIR and HOME are a host directory of the broker's, removed on close. */
  private readonly scratch: { tmp: string; home: string } | undefined;

  constructor(private readonly opts: BrokerOptions) {
    this.generationNow = opts.generation ?? 1;
    this.mode = opts.mode;
    this.grantInput = opts.grants ?? {};
    this.host = opts.host ?? hostFacts();
    this.runtime = installation().workerDir;
    if (!existsSync(join(this.runtime, "worker.cjs"))) throw new Error(`the worker bundle is missing (${this.runtime}); run npm ci`);
    this.actor = { component: opts.component ?? "tools" };
    // Egress is recorded durably before the gate connects anything; if it cannot be, the gate refuses the
    // request. Appends are batched: the gate waits for the commit that holds the latest one, so requests
    // made together share one commit.
    let latest: Promise<unknown> = Promise.resolve();
    const append = (kind: "egress" | "secret.used", generation: number, payload: Payload) => {
      const p = this.opts.journal?.append(kind, this.actor, generation, payload);
      if (!p) return;
      p.catch(() => undefined); // a refusal or an end that cannot be recorded stops nothing; an allowed request waits on it
      latest = p;
    };
    this.egress = new BrokerEgress(
      this.actor.component,
      (e) => {
        const { time: _t, generation, ...fields } = e;
        append("egress", generation, fields);
        if (e.decision === "allowed" && !e.outcome)
          for (const ref of e.secrets ?? []) {
            const sec = this.opts.secrets?.find((x) => x.ref === ref);
            if (sec) append("secret.used", generation, { name: ref, recipient: `${describeRecipient(sec.recipient)} (${e.canonical})`, component: this.actor.component });
          }
      },
      () => latest.then(() => undefined),
    );
    if (opts.sandbox === "reduced") {
      const root = mkdtempSync(join(tmpdir(), "vak-scratch-"));
      mkdirSync(join(root, "tmp"), { mode: 0o700 });
      mkdirSync(join(root, "home"), { mode: 0o700 });
      this.scratch = { tmp: join(root, "tmp"), home: join(root, "home") };
    }
    const write = this.plan("write");
    this.grants = { ...write.grants, stateDirs: this.host.stateDirs };
  }

  get generation(): number {
    return this.generationNow;
  }

  /** What this broker may reach now: its mode and grants (a sub-agent's broker may hold at most this). */
  get ceiling(): { mode: Exclude<Mode, "full-access">; grants: Partial<Grants>; workspace: string } {
    return { mode: this.mode, grants: this.grantInput, workspace: this.opts.workspace };
  }

  /** The launch plan for a worker of this kind (or for an exec command). */
  private plan(key: PlanKey, command?: string[]): LaunchPlan {
    const cached = !command && this.plans.get(key);
    if (cached) return cached;
    const g = this.grantInput;
    // Reads run read-only whatever the mode; in read-only mode nothing is written, explicit write grants included.
    const readOnly = key === "read" || this.mode === "read-only";
    const plan = decide(
      {
        mode: readOnly ? "read-only" : this.mode,
        sandbox: this.opts.sandbox ?? "namespaces",
        workspace: this.opts.workspace,
        // Commands start where relative paths point, when the grants let them see it.
        cwd: this.opts.base && [...(g.read ?? []), ...(g.write ?? [])].some((p) => isWithin(this.opts.base!, p)) ? this.opts.base : undefined,
        grants: {
          read: [...(g.read ?? []), ...(readOnly ? (g.write ?? []) : [])],
          write: readOnly ? [] : [...(g.write ?? [])],
          denyRead: g.denyRead ?? [], denyWrite: g.denyWrite ?? [], env: g.env ?? [],
        },
        limits: command ? (this.opts.limits ?? {}) : { timeoutMs: this.opts.opTimeoutMs ?? 120_000 },
        command: command ?? [process.execPath, join(this.runtime, "worker-boot.cjs")],
        runtime: command ? [] : [this.runtime],
        scratch: this.scratch,
        net: command ? this.opts.net : undefined,
      },
      this.host,
    );
    if (!command) this.plans.set(key, plan);
    return plan;
  }

  /** Starts workers ahead of time, so that the next ops need not wait for one. */
  prewarm(): void {
    for (const key of ["read", "write"] as const) this.refill(key);
  }

  private refill(key: PlanKey): void {
    const size = this.opts.poolSize ?? 0;
    const idle = this.pool.get(key) ?? [];
    this.pool.set(key, idle);
    while (!this.closed && idle.length < size) {
      const w = new WorkerProcess(this.plan(key), this.generationNow);
      idle.push(w);
      // A warm worker that dies waiting (killed, drained) leaves the pool.
      void w.done.then(() => {
        const i = idle.indexOf(w);
        if (i >= 0) idle.splice(i, 1);
      });
    }
  }

  /** A worker from the pool if one is waiting; it is refilled once the op is done, off the op's path. */
  private takeWorker(key: PlanKey): { worker: WorkerProcess; fromPool: boolean } {
    const w = this.pool.get(key)?.shift();
    if (w) return { worker: w, fromPool: true };
    return { worker: new WorkerProcess(this.plan(key), this.generationNow), fromPool: false };
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

  /** Runs one op; never throws for the op's own failures, which come back as outcomes. */
  async run(input: unknown, opts: { signal?: AbortSignal } = {}): Promise<OpOutcome> {
    const started = Date.now();
    const parsed = OpSchema.safeParse(input);
    const kindOf = (input as { kind?: unknown })?.kind;
    const fail = (code: string, message: string, target?: string): OpOutcome => ({
      ok: false, code, message, op: (parsed.success ? parsed.data.kind : String(kindOf)) as Op["kind"], target, ms: Date.now() - started,
    });
    if (this.closed) return fail("closed", "the broker is closed");
    if (this.journalFailure) return fail("journal", `refused: the journal cannot be written (${this.journalFailure.message})`);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      return fail("bad-request", `malformed op at ${i.path.join(".") || "(top level)"}: ${i.message}`);
    }
    const op = parsed.data;
    const generation = this.generationNow;
    const records: Promise<unknown>[] = [this.record("op.requested", { op: op.kind, args: summarize(op) })];

    // The path rules, before any worker starts.
    let resolved: Op = op;
    let target: string | undefined;
    if (op.kind === "tool" && !this.opts.command) {
      records.push(this.record("decision", { op: op.kind, allowed: false, reason: "this component has no command" }));
      await Promise.allSettled(records);
      return fail("bad-request", "this component has no command to run");
    }
    const traits = OP_TRAITS[op.kind];
    if (traits.effect !== "exec") {
      const base = this.opts.base ?? this.opts.workspace;
      const raw = "path" in op && op.path ? op.path : base;
      const access = traits.effect;
      const t = resolveTarget(base, this.grants, raw, access, traits.creates);
      if (!t.ok) {
        records.push(this.record("decision", { op: op.kind, allowed: false, reason: t.message, rule: t.rule, asked: raw }));
        await Promise.allSettled(records);
        return fail("denied", t.message);
      }
      target = t.path;
      resolved = { ...op, path: t.path } as Op;
      records.push(this.record("target.resolved", { asked: raw, resolved: t.path }));
    }
    if (op.kind === "tool") target = this.opts.command!.join(" ");
    records.push(this.record("decision", { op: op.kind, allowed: true, reason: traits.effect === "exec" ? "the command runs under the component's grants" : `inside the grant ${target}`, target }));

    if (this.opts.approvals && needsApproval(this.opts.approvals.rules, resolved)) {
      const refused = await this.approve(resolved, target, generation, opts.signal);
      if (refused) {
        records.push(this.record("tool.result", { op: op.kind, ok: false, code: refused.code, message: refused.message }));
        await Promise.allSettled(records);
        return { ...refused, op: op.kind, target, ms: Date.now() - started };
      }
    }

    await this.slot();
    // An op that waited for a slot across a policy change does not start under the old grants.
    if (generation !== this.generationNow || this.closed) {
      this.release();
      const r = this.closed ? { ok: false as const, code: "closed", message: "the broker closed before this op started" } : revoked(this.generationNow);
      records.push(this.record("tool.result", { op: op.kind, ok: false, code: r.code, message: r.message }));
      await Promise.allSettled(records);
      return { ...r, op: op.kind, target, ms: Date.now() - started };
    }
    let outcome: WorkerOutcome;
    // A model may ask for less time than the component's limit, never more. Commands may run longer than file ops by default.
    const commands = traits.effect === "exec";
    const limitMs = this.opts.limits?.timeoutMs ?? (commands ? COMMAND_TIMEOUT_MS : (this.opts.opTimeoutMs ?? 120_000));
    const timeoutMs = op.kind === "exec" && op.timeoutMs ? Math.min(op.timeoutMs, limitMs) : limitMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let worker: WorkerProcess | undefined;
    let refill: PlanKey | undefined;
    try {
      if (commands) {
        const plan = this.plan("write", op.kind === "exec" ? ["/bin/sh", "-c", op.command] : [...this.opts.command!]);
        const headers: HeaderSecret[] = [];
        for (const sec of this.opts.secrets ?? []) {
          if (sec.recipient.kind === "env") {
            plan.env[sec.recipient.name] = sec.value;
            records.push(this.record("secret.used", { name: sec.ref, recipient: describeRecipient(sec.recipient), component: this.actor.component }));
          } else {
            // The gate adds the value on the way out; the command sees at most a placeholder. Its use is recorded by the gate.
            headers.push({ ref: sec.ref, header: sec.recipient.header, value: sec.value, hosts: sec.recipient.hosts });
            if (sec.recipient.placeholderEnv) plan.env[sec.recipient.placeholderEnv] = placeholderFor(sec.ref);
          }
        }
        const gate = plan.network.kind === "gate" ? await this.egress.link(plan.network.grants, generation, headers) : undefined;
        worker = new WorkerProcess(plan, generation, gate?.link);
        if (gate) void worker.done.finally(gate.release).catch(() => {});
      } else {
        // Ops that only read run in a read-only sandbox, whatever the session's mode.
        const key = traits.effect === "read" ? "read" : "write";
        const taken = this.takeWorker(key);
        worker = taken.worker;
        if (taken.fromPool) refill = key;
      }
      this.inflight.add(worker);
      // Its exit is recorded when it is reaped (a worker is stopped as soon as its answer is in).
      const w = worker;
      this.background(
        w.done
          .finally(() => this.inflight.delete(w))
          .then((r) => this.record("worker.exited", { op: op.kind, pid: w.pid, code: r.code, denied: r.denied.map((d) => `${d.op} ${d.path}: ${d.reason}`) })),
      );
      records.push(this.record("worker.spawned", { sandbox: worker.plan.sandbox, op: op.kind, mode: worker.plan.mode, pid: worker.pid, warm: refill !== undefined }));
      outcome =
        commands
          ? await worker.runCommand(signal, op.kind === "tool" ? op.input : undefined)
          : await worker.run({ v: PROTOCOL_VERSION, id: randomBytes(8).toString("hex"), op: resolved }, signal);
      if (!outcome.ok && outcome.code === "cancelled" && timeout.aborted && !opts.signal?.aborted)
        outcome = { ok: false, code: "timeout", message: `timed out after ${timeoutMs} ms; the worker and everything it started were stopped` };
    } catch (e) {
      outcome = { ok: false, code: "sandbox-setup", message: (e as Error).message };
    } finally {
      this.release();
    }
    if (refill) setImmediate(() => this.refill(refill));
    if (generation !== this.generationNow) outcome = revoked(this.generationNow);
    records.push(
      this.record("tool.result", outcome.ok
        ? { op: op.kind, ok: true, bytes: Buffer.byteLength(outcome.output), digest: createHash("sha256").update(outcome.output).digest("hex"), truncated: outcome.truncated, data: outcome.data ?? null, ms: Date.now() - started }
        : { op: op.kind, ok: false, code: outcome.code, message: outcome.message, ms: Date.now() - started }),
    );
    // Nothing is returned that is not on the record.
    const written = await Promise.allSettled(records);
    if (written.some((r) => r.status === "rejected")) return fail("journal", `the journal cannot be written; the result is withheld (${(this.journalFailure as Error | undefined)?.message})`, target);
    // A result is not delivered once the policy has changed under it, even if it came in just before.
    if (outcome.ok && generation !== this.generationNow) {
      const r = revoked(this.generationNow);
      outcome = r;
      await this.record("tool.result", { op: op.kind, ok: false, code: r.code, message: r.message }).catch(() => {});
    }
    return { ...outcome, op: op.kind, target, ms: Date.now() - started };
  }

  /** Asks the host's approvers about an allowed op; returns the refusal, if it is not approved. */
  private async approve(op: Op, target: string | undefined, generation: number, signal?: AbortSignal): Promise<{ ok: false; code: string; message: string } | undefined> {
    const capability = capabilityOf(op, target);
    if (!this.allowances.has(capability)) {
      const digest = sha256(canonicalJson({ component: this.actor.component, generation, op }));
      const summary = summarizeOp(op, target);
      const outcome = await this.opts.approvals!.gate.ask({ digest, generation, component: this.actor.component, summary, op: op.kind, target }, signal);
      if (outcome.answer === "deny")
        return { ok: false, code: "not-approved", message: `not approved (${"reason" in outcome ? outcome.reason : `denied by ${outcome.by}`}): ${summary}` };
      if (outcome.answer === "allow-session" && generation === this.generationNow) this.allowances.add(capability);
    } else await this.record("decision", { op: op.kind, allowed: true, reason: "approved earlier for this session (this exact capability)", target });
    if (generation !== this.generationNow) return revoked(this.generationNow);
    return undefined;
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
    if (change.grants) this.grantInput = change.grants;
    this.plans.clear();
    this.allowances.clear();
    await this.egress.setGeneration(generation);
    this.grants = { ...this.plan("write").grants, stateDirs: this.host.stateDirs };
    const stopping: Promise<unknown>[] = [];
    for (const idle of this.pool.values()) for (const w of idle.splice(0)) (w.cancel(), stopping.push(w.done));
    for (const w of this.inflight) if (w.generation < generation) (w.cancel(), stopping.push(w.done));
    await Promise.allSettled(stopping);
    await Promise.allSettled([...this.pending]);
    // A caller that changes more than this broker (a session) records the change itself, once all of it is done.
    if (change.record !== false) await this.record("policy.generation", { generation, previous: old, reason, mode: this.mode, previousMode, stopped: stopping.length });
    if ((this.opts.poolSize ?? 0) > 0) this.prewarm();
    return stopping.length;
  }

  async close(): Promise<void> {
    this.closed = true;
    const stopping: Promise<unknown>[] = [];
    for (const idle of this.pool.values()) for (const w of idle.splice(0)) (w.cancel(), stopping.push(w.done));
    for (const w of this.inflight) (w.cancel(), stopping.push(w.done));
    await Promise.allSettled(stopping);
    await Promise.allSettled([...this.pending]);
    await this.egress.close();
    if (this.scratch) rmSync(dirname(this.scratch.tmp), { recursive: true, force: true });
  }
}

function revoked(generation: number): { ok: false; code: string; message: string } {
  return { ok: false, code: "revoked", message: `revoked: the policy changed to generation ${generation} while this op ran; its result is withheld` };
}

/** What the journal keeps of an op's arguments: everything but file contents, which become a length and a digest. */
export function summarize(op: Op): Record<string, unknown> {
  const digest = (s: string) => ({ bytes: Buffer.byteLength(s), sha256: createHash("sha256").update(s).digest("hex") });
  switch (op.kind) {
    case "write": return { path: op.path, content: digest(op.content) };
    case "tool": return { input: op.input.slice(0, 500), ...digest(op.input) };
    case "edit": return { path: op.path, old: op.old.slice(0, 200), new: op.new.slice(0, 200), replaceAll: op.replaceAll ?? false };
    case "read": case "list": case "glob": case "grep": case "exec": return { ...op };
    default: return unhandled(op, "op kind");
  }
}
