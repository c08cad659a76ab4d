import { spawn } from "node:child_process";
import { userInfo } from "node:os";
import type { Actor } from "../journal/events.js";
import { pendingSpools, Spool } from "../journal/spool.js";
import type { Redactor } from "../secrets/redact.js";
import type { EgressEvent } from "../net/egress-gate.js";
import type { LaunchPlan } from "../policy/plan.js";
import { installation } from "../policy/install.js";
import type { LaunchResult } from "../sandbox/launcher.js";

/** A secret given to the command, by reference: never its value. */
export interface SecretUse {
  ref: string;
  recipient: string;
}

/** Runs waiting in the spool before a background `vak journal ingest` is started. */
const INGEST_AT = 16;

/**
 * The journal record of one `vak exec`: the policy and launch plan before the
 * command runs (durable, or nothing runs), egress attempts as they happen, and
 * the refusals, limits and exit afterwards. It goes through the journal's spool
 * (see src/journal/spool.ts), which keeps SQLite off this start-up path. A
 * failed write fails the run.
 */
export class ExecRecord {
  private failure: Error | undefined;
  onFailure: (e: Error) => void = () => {};

  private constructor(
    private readonly spool: Spool,
    private readonly actor: Actor,
  ) {}

  /** redactor: knows the values of the secrets the command was given, so that no path or host it chose records one. */
  static start(plan: LaunchPlan, secrets: readonly SecretUse[] = [], redactor?: Redactor): ExecRecord {
    const spool = Spool.start({ kind: "exec", title: plan.command.join(" "), workspace: plan.workspace }, { redactor });
    const actor: Actor = { component: "exec", identity: userInfo().username };
    spool.append("session.started", actor, 0, { kind: "exec", title: plan.command.join(" "), command: plan.command, cwd: plan.cwd, mode: plan.mode, sandbox: plan.sandbox }, false);
    spool.append("policy.generation", actor, 1, {
      generation: 1, mode: plan.mode, grants: plan.grants, limits: plan.limits, defaultMaxProcs: plan.defaultMaxProcs,
      network: plan.network.kind === "gate" ? { allow: plan.network.grants.allow.map((r) => r.text), deny: plan.network.grants.deny.map((r) => r.text) } : "none",
      trust: plan.mode === "full-access" ? "explicit --full-access: no sandbox" : null,
    }, false);
    for (const x of secrets) spool.append("secret.used", actor, 1, { name: x.ref, recipient: x.recipient, component: "exec" }, false);
    spool.append("worker.spawned", actor, 1, {
      sandbox: plan.sandbox, command: plan.command, cwd: plan.cwd,
      mounts: plan.mounts.map((m) => `${m.kind} ${m.path}`), protect: plan.protect.length, env: Object.keys(plan.env).sort(),
    });
    return new ExecRecord(spool, actor);
  }

  egress(e: EgressEvent): void {
    if (this.failure) return;
    const { component, generation, ...payload } = e;
    try {
      // Written now and made durable with the others of this turn of the loop (one fdatasync for all);
      // the gate waits for that sync before it connects anything.
      this.spool.append("egress", { component, identity: this.actor.identity }, generation, payload, false);
      // A secret the gate put into a request: one use, by reference and destination, never the value.
      if (e.decision === "allowed" && !e.outcome)
        for (const ref of e.secrets ?? []) this.spool.append("secret.used", { component, identity: this.actor.identity }, generation, { name: ref, recipient: `request headers to ${e.canonical}`, component }, false);
      this.sync().catch(() => undefined); // a failure is kept in this.failure and reported by onFailure
    } catch (err) {
      this.failure = err as Error;
      this.onFailure(this.failure);
    }
  }

  /** Makes the egress events so far durable (one fdatasync for all who ask in one turn of the loop). */
  async sync(): Promise<void> {
    if (this.failure) throw this.failure;
    try {
      await this.spool.sync();
    } catch (err) {
      if (!this.failure) {
        this.failure = err as Error;
        this.onFailure(this.failure);
      }
      throw this.failure;
    }
  }

  /** The error that stopped the run, if a journal write failed while it ran. */
  get failed(): Error | undefined {
    return this.failure;
  }

  /** Records how the run ended; throws a VakError if that cannot be recorded. */
  finish(result: LaunchResult | undefined, code: number, extra: Record<string, unknown> = {}): void {
    for (const d of result?.denied ?? [])
      this.spool.append("decision", this.actor, 1, { op: d.op, path: d.path, allowed: false, reason: d.reason, pid: d.pid }, false);
    this.spool.append("worker.exited", this.actor, 1, {
      code, timedOut: result?.timedOut ?? false, guardDied: result?.guardDied ?? false,
      setupError: result?.setupError ?? null, execError: result?.execError ?? null,
      limits: result?.limits ? { procs: result.limits.procs, procsHit: result.limits.procs_hit, oomKills: result.limits.oom_kills } : null,
      ...extra,
    }, false);
    this.spool.append("session.ended", { component: "host" }, 0, { outcome: code === 0 ? "ok" : `exit ${code}` });
    this.spool.close();
    if (pendingSpools().length >= INGEST_AT) {
      // Take the spool into the hash chain in the background; nothing waits for it.
      spawn(process.execPath, [installation().cli, "journal", "ingest"], { detached: true, stdio: "ignore", env: process.env }).unref();
    }
  }
}
