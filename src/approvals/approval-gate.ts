import { randomBytes } from "node:crypto";
import type { Actor } from "../journal/events.js";
import type { Op } from "../protocol/ops.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { ApprovalView } from "./approval-view.js";

/**
 * Host-owned approval gates. A request is bound to the op's digest, the
 * policy generation and a fresh nonce; an answer counts only if it names all
 * three and the request is still open. Everything else is void and recorded
 * as such. Timeouts, cancelled runs and policy changes deny. An approval is a
 * check inside the grant: the broker asks only about ops the grant already
 * allows, and runs them under that same grant.
 */
export type Answer = "allow" | "allow-session" | "deny";

export interface ApprovalRequest {
  nonce: string;
  digest: string;
  generation: number;
  component: string;
  /** What the op does, in one line, for the record and a list of requests (raw: show it through the neutraliser). */
  summary: string;
  op: string;
  target?: string | undefined;
  /** The whole op the digest covers (resolved target included), for an approver that shows all of it (a diff, the full command). */
  detail?: Op | undefined;
  /** What "allow for this session" would let run later without asking, said exactly. */
  scope: string;
  /** The whole op, for the person deciding (approval-view.ts): never clipped. */
  view: ApprovalView;
  /** Facts about the view for the record (the digest of the file content it was compared with). */
  shown?: Record<string, unknown> | undefined;
}

export interface ApprovalAnswer {
  nonce: string;
  digest: string;
  generation: number;
  answer: Answer;
  /** Who answered (for the record): "terminal", "web", "config", a test. */
  by?: string;
}

export type Outcome = { answer: Answer; by: string } | { answer: "deny"; by: "timeout" | "void" | "cancelled" | "policy-change" | "no-approver"; reason: string };

interface Open {
  request: ApprovalRequest;
  resolve: (o: Outcome) => void;
  timer: NodeJS.Timeout;
}

export interface ApprovalGateOptions {
  journal?: SessionWriter | undefined;
  generation?: number;
  timeoutMs?: number;
  /** Told of every new request; the host's approver (a terminal prompt, the web client) answers through answer(). */
  onRequest?: (r: ApprovalRequest) => void;
  /** Told when an open request closes, however (an answer from any approver, a timeout, a cancel, a policy change): other approvers retract it. */
  onSettle?: (r: ApprovalRequest, o: Outcome) => void;
}

export class ApprovalGate {
  private readonly open = new Map<string, Open>();
  private generationNow: number;
  /** Nonces already answered or voided: an answer that replays one is void. */
  private readonly closed = new Set<string>();

  constructor(private readonly opts: ApprovalGateOptions = {}) {
    this.generationNow = opts.generation ?? 1;
  }

  get generation(): number {
    return this.generationNow;
  }

  set onRequest(f: ((r: ApprovalRequest) => void) | undefined) {
    this.opts.onRequest = f;
  }

  set onSettle(f: ((r: ApprovalRequest, o: Outcome) => void) | undefined) {
    this.opts.onSettle = f;
  }

  pending(): ApprovalRequest[] {
    return [...this.open.values()].map((o) => o.request);
  }

  private record(kind: "approval.asked" | "approval.answered" | "approval.voided", component: string, payload: Record<string, unknown>): Promise<unknown> {
    const actor: Actor = { component };
    return this.opts.journal ? this.opts.journal.append(kind, actor, this.generationNow, payload) : Promise.resolve();
  }

  /** Opens a request and waits for its answer; never rejects: anything but a valid answer denies. */
  async ask(req: Omit<ApprovalRequest, "nonce">, signal?: AbortSignal): Promise<Outcome> {
    const nonce = randomBytes(16).toString("hex");
    const request: ApprovalRequest = { ...req, nonce };
    try {
      await this.record("approval.asked", req.component, { op: req.op, digest: req.digest, nonce, target: req.target ?? null, summary: req.summary, scope: req.scope, generation: req.generation, ...(req.shown ? { shown: req.shown } : {}) });
    } catch (e) {
      // Nothing is approved off the record.
      this.closed.add(nonce);
      return { answer: "deny", by: "void", reason: `the journal cannot be written (${(e as Error).message})` };
    }
    if (req.generation !== this.generationNow) return this.finish(request, { answer: "deny", by: "policy-change", reason: `the policy changed to generation ${this.generationNow}` });
    if (signal?.aborted) return this.finish(request, { answer: "deny", by: "cancelled", reason: "the run was cancelled" });
    if (!this.opts.onRequest) return this.finish(request, { answer: "deny", by: "no-approver", reason: "no one can answer approvals in this session (non-interactive); grant it in the config or with --approve" });
    const outcome = new Promise<Outcome>((resolve) => {
      const timeoutMs = this.opts.timeoutMs ?? 300_000;
      const timer = setTimeout(() => this.settle(nonce, { answer: "deny", by: "timeout", reason: `no answer within ${Math.round(timeoutMs / 1000)} s` }), timeoutMs);
      this.open.set(nonce, { request, resolve, timer });
      // A waiter must not keep a cancelled run alive.
      signal?.addEventListener("abort", () => this.settle(nonce, { answer: "deny", by: "cancelled", reason: "the run was cancelled" }), { once: true });
    });
    this.opts.onRequest(request);
    return outcome;
  }

  /** An approver's answer. Returns why it was void, if it was. */
  answer(a: ApprovalAnswer): { ok: true } | { ok: false; reason: string } {
    const o = this.open.get(a.nonce);
    const why = !o
      ? this.closed.has(a.nonce) ? "this request was already answered or closed (a replay)" : "no open request has this nonce"
      : a.digest !== o.request.digest ? "the answer is for a different op (digest mismatch)"
      : a.generation !== o.request.generation || a.generation !== this.generationNow ? `the answer is for policy generation ${a.generation}, not ${this.generationNow}`
      : !["allow", "allow-session", "deny"].includes(a.answer) ? "not an answer" : undefined;
    if (why) {
      void this.record("approval.voided", o?.request.component ?? "host", { nonce: a.nonce, digest: a.digest, generation: a.generation, reason: why, by: a.by ?? "unknown" }).catch(() => {});
      return { ok: false, reason: why };
    }
    this.settle(a.nonce, { answer: a.answer, by: a.by ?? "unknown" });
    return { ok: true };
  }

  /** A new policy generation: every open request is denied, and answers for older generations are void from now on. */
  setGeneration(generation: number): number {
    this.generationNow = generation;
    const open = [...this.open.keys()];
    for (const n of open) this.settle(n, { answer: "deny", by: "policy-change", reason: `the policy changed to generation ${generation}` });
    return open.length;
  }

  private settle(nonce: string, outcome: Outcome): void {
    const o = this.open.get(nonce);
    if (!o) return;
    this.open.delete(nonce);
    clearTimeout(o.timer);
    this.finish(o.request, outcome);
    o.resolve(outcome);
    this.opts.onSettle?.(o.request, outcome);
  }

  private finish(request: ApprovalRequest, outcome: Outcome): Outcome {
    this.closed.add(request.nonce);
    const voided = outcome.by === "policy-change" || outcome.by === "cancelled" || outcome.by === "void";
    void this.record(voided ? "approval.voided" : "approval.answered", request.component, voided
      ? { nonce: request.nonce, digest: request.digest, reason: "reason" in outcome ? outcome.reason : outcome.by }
      : { nonce: request.nonce, digest: request.digest, answer: outcome.answer, by: outcome.by, ...("reason" in outcome ? { reason: outcome.reason } : {}) }).catch(() => {});
    return outcome;
  }
}
