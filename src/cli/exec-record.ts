import { userInfo } from "node:os";
import type { Actor, EventKind, Payload } from "../journal/events.js";
import type { Journal } from "../journal/journal.js";
import type { SessionWriter } from "../journal/session-writer.js";
import { pendingSpools, Spool } from "../journal/spool.js";
import { VakError } from "../policy/errors.js";
import { Redactor } from "../secrets/redact.js";
import type { EgressEvent } from "../net/egress-gate.js";
import type { LaunchPlan } from "../policy/plan.js";
import { installation } from "../policy/install.js";
import type { LaunchResult } from "../sandbox/launcher.js";

/** A secret given to the command, by reference: never its value. */
export interface SecretUse {
  ref: string;
  recipient: string;
}

/** How long an egress event nobody waits for may stay unsynced (see ExecRecord.syncSoon). */
const SYNC_SOON_MS = 20;

/** Runs waiting in the spool before a background `vak journal ingest` is started. */
const INGEST_AT = 16;

/**
 * Where one run's record goes. In-process, the spool (src/journal/spool.ts),
 * which keeps SQLite off the start-up path: a line is written at once, and
 * durable with the next sync. In the resident host, the journal the host holds
 * open: an event is queued into its group commit, and durable when that
 * commit returns; no spool file. Either way sync() resolves once every event
 * appended so far is durable, and rejects if one cannot be.
 */
interface RunLog {
  append(kind: EventKind, actor: Actor, generation: number, payload: Payload): void;
  /** `now`: nothing more is appended this turn; the spool syncs at once instead of at the end of the turn. */
  sync(now?: boolean): Promise<void>;
  /** Everything durable, the record closed. */
  close(): Promise<void>;
}

class SpoolLog implements RunLog {
  constructor(private readonly spool: Spool) {}
  append(kind: EventKind, actor: Actor, generation: number, payload: Payload): void {
    this.spool.append(kind, actor, generation, payload, false);
  }
  sync(now = false): Promise<void> {
    return this.spool.sync(now);
  }
  async close(): Promise<void> {
    // The last lines are written: their sync goes to the thread pool at once.
    await this.spool.sync(true);
    this.spool.close();
    if (pendingSpools().length >= INGEST_AT) {
      // Take the spool into the hash chain in the background; nothing waits for it.
      process.getBuiltinModule("node:child_process").spawn(process.execPath, [installation().cli, "journal", "ingest"], { detached: true, stdio: "ignore", env: process.env }).unref();
    }
  }
}

class JournalLog implements RunLog {
  /** The last append: commits are in order, so once it settles every earlier one has. */
  private last: Promise<unknown> = Promise.resolve();
  private failure: Error | undefined;

  constructor(
    private readonly writer: SessionWriter,
    private readonly location: string,
    /** The run's secrets' values: removed before the journal sees them, as the spool does (the journal's own redactor then takes credential shapes). */
    private readonly redactor: Redactor,
  ) {}

  append(kind: EventKind, actor: Actor, generation: number, payload: Payload): void {
    if (this.failure) throw this.failure;
    const known = (t: string) => this.redactor.knownOnly(t);
    this.last = this.writer.append(kind, this.redactor.value(actor, 0, known), generation, this.redactor.value(payload, 0, known)).catch((e: unknown) => {
      this.failure ??= new VakError("journal", `the journal ${this.location} could not take this run's record (${(e as Error).message}); nothing runs unrecorded`);
      throw this.failure;
    });
    this.last.catch(() => undefined);
  }

  async sync(): Promise<void> {
    if (this.failure) throw this.failure;
    await this.last;
  }

  close(): Promise<void> {
    return this.sync();
  }
}

/**
 * The journal record of one `vak exec`: the policy and launch plan before the
 * command runs (durable, or nothing runs), egress attempts as they happen, and
 * the refusals, limits and exit afterwards. In-process it goes through the
 * journal's spool, which keeps SQLite off this start-up path; in the resident
 * host straight into the journal the host holds open. A failed write fails the run.
 */
export class ExecRecord {
  private failure: Error | undefined;
  onFailure: (e: Error) => void = () => {};

  private constructor(
    private readonly log: RunLog,
    private readonly actor: Actor,
  ) {}

  /**
   * Resolves once the run's start is durable; rejects (a VakError) when it cannot be, and then nothing may run.
   * See open() for the arguments.
   */
  static async start(plan: LaunchPlan, secrets: readonly SecretUse[] = [], redactor: Redactor = new Redactor(), journal?: Journal, servedBy?: Payload): Promise<ExecRecord> {
    const { record, durable } = ExecRecord.open(plan, secrets, redactor, journal, servedBy);
    await durable;
    return record;
  }

  /**
   * The run's start, written (or queued into the journal's commit) now; durable once `durable` resolves, which
   * rejects (a VakError) when it cannot be: the sandbox may be built meanwhile, but the command must not start
   * before (the launcher's --go-fd holds it). `durable` never rejects unobserved.
   * redactor: knows the values of the secrets the command was given, so that no path or host it chose records one.
   * journal: the resident host's, which takes the record directly; without one, the spool. servedBy: the host, as
   * its session.started names it (so that a host started after its death can close the run: src/resident/orphans.ts).
   */
  static open(plan: LaunchPlan, secrets: readonly SecretUse[] = [], redactor: Redactor = new Redactor(), journal?: Journal, servedBy?: Payload): { record: ExecRecord; durable: Promise<void> } {
    const { log, actor } = ExecRecord.begin(plan, redactor, journal, servedBy);
    for (const x of secrets) log.append("secret.used", actor, 1, { name: x.ref, recipient: x.recipient, component: "exec" });
    log.append("worker.spawned", actor, 1, {
      sandbox: plan.sandbox, command: plan.command, cwd: plan.cwd,
      mounts: plan.mounts.map((m) => `${m.kind} ${m.path}`), protect: plan.protect.length, env: Object.keys(plan.env).sort(),
    });
    const durable = log.sync(true);
    durable.catch(() => undefined);
    return { record: new ExecRecord(log, actor), durable };
  }

  /**
   * A run refused after it was planned, before anything was started: its start, its policy, the decision that
   * refused it, and its end, durable when it resolves (rejects, a VakError, when it cannot be).
   */
  static async refused(plan: LaunchPlan, decision: Payload & { op: string; reason: string }, redactor: Redactor = new Redactor(), journal?: Journal, servedBy?: Payload): Promise<void> {
    const { log, actor } = ExecRecord.begin(plan, redactor, journal, servedBy);
    log.append("decision", actor, 1, { ...decision, allowed: false });
    log.append("session.ended", { component: "host" }, 0, { outcome: `refused: ${decision.reason}` });
    await log.close();
  }

  /** The run's start and its policy, on its log. */
  private static begin(plan: LaunchPlan, redactor: Redactor, journal: Journal | undefined, servedBy: Payload | undefined): { log: RunLog; actor: Actor } {
    const title = plan.command.join(" ");
    const actor: Actor = { component: "exec", identity: userInfo().username };
    const started = { kind: "exec", title, command: plan.command, cwd: plan.cwd, mode: plan.mode, sandbox: plan.sandbox, ...(servedBy ? { servedBy } : {}) };
    let log: RunLog;
    if (journal) {
      const known = (t: string) => redactor.knownOnly(t);
      const writer = journal.startSession({ kind: "exec", title: known(title), workspace: plan.workspace, actor, payload: redactor.value(started, 0, known) });
      log = new JournalLog(writer, journal.location, redactor);
    } else {
      const spool = Spool.start({ kind: "exec", title, workspace: plan.workspace }, { redactor });
      spool.append("session.started", actor, 0, started, false);
      log = new SpoolLog(spool);
    }
    log.append("policy.generation", actor, 1, {
      generation: 1, mode: plan.mode, grants: plan.grants, limits: plan.limits, defaultMaxProcs: plan.defaultMaxProcs,
      network: plan.network.kind === "gate" ? { allow: plan.network.grants.allow.map((r) => r.text), deny: plan.network.grants.deny.map((r) => r.text) } : "none",
      trust: plan.mode === "full-access" ? "explicit --full-access: no sandbox" : null,
    });
    return { log, actor };
  }

  egress(e: EgressEvent): void {
    if (this.failure) return;
    const { component, generation, ...payload } = e;
    try {
      // Written (or queued) now and made durable with the others of this turn of the loop (one fdatasync or
      // one commit for all); the gate waits for that before it connects anything.
      this.log.append("egress", { component, identity: this.actor.identity }, generation, payload);
      // A secret the gate put into a request: one use, by reference and destination, never the value.
      if (e.decision === "allowed" && !e.outcome)
        for (const ref of e.secrets ?? []) this.log.append("secret.used", { component, identity: this.actor.identity }, generation, { name: ref, recipient: `request headers to ${e.canonical}`, component });
      this.syncSoon();
    } catch (err) {
      this.failure = err as Error;
      this.onFailure(this.failure);
    }
  }

  private soon: NodeJS.Timeout | undefined;
  /**
   * Events nobody waits for (how a request ended; a repeat of a decision already durable on its connection, see
   * src/net/proxy.ts) are made durable within SYNC_SOON_MS, together: an fdatasync per event on the main thread
   * was most of a small request's cost. A decision the gate waits for is synced at once (sync()).
   */
  private syncSoon(): void {
    this.soon ??= setTimeout(() => {
      this.soon = undefined;
      this.sync().catch(() => undefined); // a failure is kept in this.failure and reported by onFailure
    }, SYNC_SOON_MS);
  }

  /** Makes the egress events so far durable (one fdatasync, or one commit, for all who ask in one turn of the loop). */
  async sync(): Promise<void> {
    if (this.failure) throw this.failure;
    try {
      await this.log.sync();
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

  /** Records how the run ended, durable when it resolves; rejects with a VakError if that cannot be recorded. */
  async finish(result: LaunchResult | undefined, code: number, extra: Record<string, unknown> = {}): Promise<void> {
    if (this.soon) clearTimeout(this.soon);
    for (const d of result?.denied ?? [])
      this.log.append("decision", this.actor, 1, { op: d.op, path: d.path, allowed: false, reason: d.reason, pid: d.pid });
    this.log.append("worker.exited", this.actor, 1, {
      code, timedOut: result?.timedOut ?? false, guardDied: result?.guardDied ?? false,
      setupError: result?.setupError ?? null, execError: result?.execError ?? null,
      limits: result?.limits ? { procs: result.limits.procs, procsHit: result.limits.procs_hit, oomKills: result.limits.oom_kills } : null,
      ...extra,
    });
    this.log.append("session.ended", { component: "host" }, 0, { outcome: code === 0 ? "ok" : `exit ${code}` });
    await this.log.close();
  }
}
