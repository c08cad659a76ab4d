import type { AgentEvent, RunResult } from "../agent/agent.js";
import type { SessionMode } from "../agent/agent-session.js";
import type { ApprovalRequest, Outcome } from "../approvals/approval-gate.js";
import { approvalCard } from "./approval-card.js";
import { label, shown, type TextFilter } from "./browser-text.js";
import { ServerError } from "./errors.js";
import type { HostedSession, SessionHooks } from "./hosted.js";
import { Transcript } from "./transcript.js";
import type { ApprovalAnswerInput, ApprovalCard, LiveMessage, SessionState, TranscriptItem } from "./wire.js";

/**
 * One session the server hosts, watched by any number of browsers and, with
 * `vak --serve`, by the terminal it was started in. It owns what they share:
 * the transcript, the open approval cards, the one run at a time, and the
 * mode switch. An approval can be answered from any of them; the gate takes
 * the first answer and voids the rest, and every watcher is told the request
 * closed. The mode and generation shown are the ones last reported by the
 * session, which reports only once the old generation has stopped.
 */
export interface Watcher {
  event?(e: AgentEvent): void;
  approval?(r: ApprovalRequest): void;
  settled?(r: ApprovalRequest, o: Outcome): void;
  policy?(p: { generation: number; mode: SessionMode }): void;
  /** A run ended (by: who sent its instruction), so that a watcher can end what it was showing of it. */
  ended?(r: RunResult, by: string): void;
}

export interface LiveDeps {
  filter: TextFilter;
  /** The redactor alone (an approval's view is rendered exactly, after redaction: approval-screen.ts). */
  redact?: ((s: string) => string) | undefined;
  publish: (m: LiveMessage) => void;
  /** Whether this server offers the web terminal. */
  terminal: boolean;
  /** Stops what the server itself runs under the session's grants (its terminals) before a mode switch revokes the rest. */
  beforeRevoke?: ((session: string) => Promise<void>) | undefined;
}

export class LiveSession {
  readonly hosted: HostedSession;
  private readonly transcript: Transcript;
  private readonly cards = new Map<string, ApprovalCard>();
  private readonly watchers = new Set<Watcher>();
  private run: { ac: AbortController; done: Promise<RunResult> } | undefined;
  private switching = false;
  private closed = false;
  private reported: { mode: SessionMode | null; generation: number };

  constructor(make: (hooks: SessionHooks) => HostedSession, private readonly deps: LiveDeps) {
    let id: string | undefined;
    this.transcript = new Transcript(deps.filter, (item) => id && deps.publish({ type: "transcript", session: id, item }));
    this.hosted = make({
      onEvent: (e) => {
        this.transcript.event(e);
        for (const w of this.watchers) w.event?.(e);
      },
      onApproval: (r) => {
        const card = approvalCard(r, deps.filter, deps.redact);
        this.cards.set(r.nonce, card);
        deps.publish({ type: "approval", session: this.id, card });
        this.publishState();
        for (const w of this.watchers) w.approval?.(r);
      },
      onApprovalSettled: (r, o) => {
        this.cards.delete(r.nonce);
        deps.publish({ type: "approval-closed", session: this.id, nonce: r.nonce, answer: o.answer, by: label(deps.filter, o.by, 100) });
        this.publishState();
        for (const w of this.watchers) w.settled?.(r, o);
      },
      onPolicy: (p) => {
        this.reported = { mode: p.mode, generation: p.generation };
        this.transcript.add({ type: "notice", text: `mode is now ${p.mode}; generation ${p.generation}: what ran under the old one was stopped` });
        this.publishState();
        for (const w of this.watchers) w.policy?.(p);
      },
    });
    id = this.hosted.id;
    this.reported = { mode: this.hosted.mode, generation: this.hosted.generation };
  }

  get id(): string {
    return this.hosted.id;
  }

  watch(w: Watcher): () => void {
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  state(): SessionState {
    return {
      mode: this.reported.mode, generation: this.reported.generation, running: this.run !== undefined, switching: this.switching,
      pending: this.cards.size, canSwitchMode: this.hosted.setMode !== undefined, terminal: this.deps.terminal && this.hosted.interactive !== undefined,
    };
  }

  private publishState(): void {
    this.deps.publish({ type: "state", session: this.id, state: this.state() });
  }

  messages(): TranscriptItem[] {
    return this.transcript.all();
  }

  approvals(): ApprovalCard[] {
    return [...this.cards.values()];
  }

  /** Starts a run on one instruction; resolves when it ends. One run at a time. */
  send(text: string, by: string): Promise<RunResult> {
    if (this.closed) throw new ServerError("gone", "this session has ended");
    if (this.switching) throw new ServerError("conflict", "the mode is being switched; send again once it is done");
    if (this.run) throw new ServerError("conflict", "the agent is still working on the last instruction; wait, or cancel it");
    const ac = new AbortController();
    this.transcript.add({ type: "user", text: shown(this.deps.filter, text), by: label(this.deps.filter, by, 100) });
    this.transcript.add({ type: "run", state: "started" });
    const done = this.hosted.send(text, ac.signal).then(
      (r) => {
        this.transcript.add({ type: "run", state: "ended", outcome: r.outcome, error: r.error ? label(this.deps.filter, r.error) : null, refused: r.refused.length, toolCalls: r.toolCalls });
        return r;
      },
      (e: Error): RunResult => {
        this.transcript.add({ type: "run", state: "ended", outcome: "model-error", error: label(this.deps.filter, e.message), refused: 0, toolCalls: 0 });
        return { text: "", turns: 0, toolCalls: 0, refused: [], outcome: "model-error", error: e.message };
      },
    ).finally(() => {
      this.run = undefined;
      this.publishState();
    });
    void done.then((r) => {
      for (const w of this.watchers) w.ended?.(r, by);
    });
    this.run = { ac, done };
    this.publishState();
    return done;
  }

  cancel(by: string): boolean {
    if (!this.run) return false;
    this.run.ac.abort(new Error(`cancelled by ${by}`));
    return true;
  }

  answer(a: ApprovalAnswerInput, by: string): { ok: true } | { ok: false; reason: string } {
    return this.hosted.approvals.answer({ ...a, by });
  }

  /**
   * Switches the mode as `/mode` does: the server's own terminals first, then
   * the session (open approvals denied, runs cancelled, workers stopped, runs
   * ended, then reported). Resolves with the state once all of it is done.
   */
  async setMode(mode: SessionMode, by: string): Promise<SessionState> {
    const set = this.hosted.setMode;
    if (!set) throw new ServerError("unsupported", "this session's grants come from its workload spec; edit the spec to change them");
    if (this.closed) throw new ServerError("gone", "this session has ended");
    if (this.hosted.ceiling === "read-only" && mode !== "read-only") throw new ServerError("refused", "this server was started with --mode read-only: its sessions cannot be made writable");
    if (this.switching) throw new ServerError("conflict", "a mode switch is already under way");
    this.switching = true;
    this.publishState();
    try {
      await this.deps.beforeRevoke?.(this.id);
      await set(mode, `the user changed the mode (from ${by})`);
    } finally {
      this.switching = false;
    }
    this.publishState();
    return this.state();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancel("the server");
    await this.deps.beforeRevoke?.(this.id);
    await this.hosted.close();
    this.publishState();
  }
}
