import { userInfo } from "node:os";
import type { Actor, EventKind, Payload } from "../journal/events.js";
import type { Journal } from "../journal/journal.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { EgressEvent } from "../net/egress-gate.js";
import type { LaunchPlan } from "../policy/plan.js";
import type { LaunchResult } from "../sandbox/launcher.js";
import type { Side } from "./messages.js";
import type { RelayRecord } from "./relay.js";

/**
 * The journal record of one `vak mcp` connection, in the hash-chained journal
 * itself (a connection lives long enough that SQLite's start-up cost does not
 * matter, and its calls are searchable while it runs): the policy and plan,
 * committed before the server starts; every tools/call, committed before the
 * server sees it (calls made in one turn of the event loop share one commit);
 * results, listings, approvals, egress and dropped messages as they happen;
 * and how it ended. A failed write fails the connection.
 */
export interface McpRecordInfo {
  server: string;
  plan: LaunchPlan;
  tools: { deny: readonly string[]; ask: readonly string[] | "all" };
  secrets: readonly { ref: string; recipient: string }[];
}

/** Dropped messages of one kind recorded one by one; past this they are counted. */
const DROPS_RECORDED = 50;

export class McpRecord implements RelayRecord {
  private failure: Error | undefined;
  onFailure: (e: Error) => void = () => {};
  private latest: Promise<unknown> = Promise.resolve();
  private readonly drops = new Map<string, number>();

  private constructor(
    private readonly session: SessionWriter,
    private readonly actor: Actor,
    private readonly server: string,
  ) {}

  /** Starts the record; resolves once the policy and the plan are committed, before the server is started. */
  static async start(journal: Journal, info: McpRecordInfo): Promise<McpRecord> {
    const actor: Actor = { component: "mcp", identity: userInfo().username };
    const p = info.plan;
    const session = journal.startSession({
      kind: "mcp", title: `mcp ${info.server}`, workspace: p.workspace, actor,
      payload: { server: info.server, command: p.command, cwd: p.cwd, mode: p.mode, sandbox: p.sandbox },
    });
    const first = [session.started, session.append("policy.generation", actor, 1, {
      generation: 1, mode: p.mode, grants: p.grants, limits: p.limits, defaultMaxProcs: p.defaultMaxProcs,
      network: p.network.kind === "gate" ? { allow: p.network.grants.allow.map((r) => r.text), deny: p.network.grants.deny.map((r) => r.text) } : "none",
      tools: { deny: [...info.tools.deny], ask: info.tools.ask === "all" ? "all" : [...info.tools.ask] },
    })];
    for (const x of info.secrets) first.push(session.append("secret.used", actor, 1, { name: x.ref, recipient: x.recipient, component: "mcp" }));
    first.push(session.append("worker.spawned", actor, 1, {
      sandbox: p.sandbox, command: p.command, cwd: p.cwd, server: info.server,
      mounts: p.mounts.map((m) => `${m.kind} ${m.path}`), protect: p.protect.length, env: Object.keys(p.env).sort(),
    }));
    await Promise.all(first);
    return new McpRecord(session, actor, info.server);
  }

  get failed(): Error | undefined {
    return this.failure;
  }

  private append(kind: EventKind, payload: Payload): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const p = this.session.append(kind, this.actor, 1, payload).then(
      () => undefined,
      (e: Error) => {
        if (!this.failure) {
          this.failure = e;
          this.onFailure(e);
        }
        throw e;
      },
    );
    this.latest = p.catch(() => undefined);
    return p;
  }

  private note(kind: EventKind, payload: Payload): void {
    this.append(kind, payload).catch(() => undefined); // kept in this.failure and reported through onFailure
  }

  call(payload: Record<string, unknown>): Promise<void> {
    return this.append("mcp.call", payload);
  }

  result(payload: Record<string, unknown>): void {
    this.note("mcp.result", payload);
  }

  initialized(payload: Record<string, unknown>): void {
    this.note("mcp.initialized", payload);
  }

  tools(payload: Record<string, unknown>): void {
    this.note("mcp.tools", payload);
  }

  approval(kind: "approval.asked" | "approval.answered", payload: Record<string, unknown>): void {
    this.note(kind, payload);
  }

  dropped(from: Side, problem: string, detail: Record<string, unknown>): void {
    const k = `${from}\0${problem}`;
    const n = (this.drops.get(k) ?? 0) + 1;
    this.drops.set(k, n);
    if (n <= DROPS_RECORDED) this.note("mcp.dropped", { server: this.server, from, problem, ...detail });
  }

  /** How many messages were dropped, by side and problem, for the summary. */
  dropCounts(): { from: string; problem: string; count: number }[] {
    return [...this.drops].map(([k, count]) => {
      const [from, problem] = k.split("\0") as [string, string];
      return { from, problem, count };
    });
  }

  egress(e: EgressEvent): void {
    const { time: _t, generation: _g, ...fields } = e;
    this.note("egress", fields);
  }

  /** Settles once everything appended so far is durable (the egress gate waits on it before it connects). */
  durable(): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    return this.latest.then(() => {
      if (this.failure) throw this.failure;
    });
  }

  /** Records how the connection ended, with the counts of what was dropped past the first of each kind. */
  async finish(result: LaunchResult | undefined, code: number, extra: Record<string, unknown> = {}): Promise<void> {
    for (const d of result?.denied ?? []) this.note("decision", { op: d.op, path: d.path, allowed: false, reason: d.reason, pid: d.pid });
    const over = this.dropCounts().filter((d) => d.count > DROPS_RECORDED);
    if (this.failure) return;
    this.note("worker.exited", {
      code, timedOut: result?.timedOut ?? false, guardDied: result?.guardDied ?? false, setupError: result?.setupError ?? null,
      limits: result?.limits ? { procs: result.limits.procs, procsHit: result.limits.procs_hit, oomKills: result.limits.oom_kills } : null,
      ...(over.length ? { droppedNotRecorded: over.map((d) => ({ ...d, count: d.count - DROPS_RECORDED })) } : {}),
      ...extra,
    });
    try {
      await this.session.end(code === 0 ? "ok" : `exit ${code}`);
    } catch {
      // the failure is on stderr already
    }
  }
}
