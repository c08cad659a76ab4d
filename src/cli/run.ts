import { createInterface, type Interface } from "node:readline";
import type { ApprovalGate, ApprovalRequest, Outcome } from "../approvals/approval-gate.js";
import type { LiveSession } from "../server/live-session.js";
import { AgentSession, type SessionMode } from "../agent/agent-session.js";
import type { RunResult } from "../agent/agent.js";
import { type AgentFlags, sessionOptions } from "./agent-options.js";
import { isRefusal, prefix, printSummary, transcriptPrinter } from "./transcript.js";
import { visible } from "./visible.js";

const EXIT_CANCELLED = 130;
/** The agent did not finish: a model error, or the turn limit. */
const EXIT_UNFINISHED = 1;
/** The agent finished, but Vak refused one or more of its tool calls (outside the grants, not approved). */
export const EXIT_OPS_REFUSED = 3;

/** `vak run`'s exit status (documented in README.md and `vak run --help`). */
function exitFor(r: RunResult): number {
  if (r.outcome === "cancelled") return EXIT_CANCELLED;
  if (r.outcome !== "done") return EXIT_UNFINISHED;
  return r.refused.some((x) => isRefusal(x.code)) ? EXIT_OPS_REFUSED : 0;
}

/**
 * Answers approval requests from a terminal, one at a time. The answer
 * carries the request's nonce, digest and generation back to the gate, which
 * decides whether it still counts.
 */
class TerminalApprover {
  private queue: ApprovalRequest[] = [];
  private current: ApprovalRequest | undefined;
  /** The prompt another approver (the browser) answered just now: a y/a/n typed for it goes to the gate, which voids it. */
  private retracted: { request: ApprovalRequest; at: number } | undefined;

  constructor(
    private readonly gate: () => ApprovalGate,
    private readonly out: NodeJS.WritableStream,
    private readonly redact: (s: string) => string,
  ) {}

  get waiting(): boolean {
    return this.current !== undefined;
  }

  request = (r: ApprovalRequest): void => {
    this.queue.push(r);
    if (!this.current) this.next();
  };

  private next(): void {
    this.current = this.queue.shift();
    if (!this.current) return;
    const r = this.current;
    this.out.write(`\n? ${prefix(r.component)}${visible(this.redact(r.summary))}\n  allow? [y] once  [a] for this session (this exact ${r.op === "exec" ? "command" : r.op === "mcp" ? "tool" : "file"})  [n] no: `);
  }

  /** A line the user typed while a request was open. */
  answer(line: string): void {
    const r = this.current;
    if (!r) return;
    const a = line.trim().toLowerCase();
    const answer = a === "y" || a === "yes" ? "allow" : a === "a" || a === "always" ? "allow-session" : a === "n" || a === "no" || a === "" ? "deny" : undefined;
    if (!answer) {
      this.out.write("  y, a or n: ");
      return;
    }
    const res = this.gate().answer({ nonce: r.nonce, digest: r.digest, generation: r.generation, answer, by: "terminal" });
    if (!res.ok) this.out.write(`  (that answer no longer counts: ${res.reason})\n`);
    this.next();
  }

  /** A request closed by another approver (the browser with `vak --serve`): the prompt says so and moves on. */
  settled(r: ApprovalRequest, o: Outcome): void {
    if (o.by === "terminal") return;
    if (this.current?.nonce === r.nonce) {
      this.out.write(`\n  (answered from ${o.by === "web" ? "the browser" : visible(this.redact(o.by))}: ${o.answer})\n`);
      this.retracted = { request: r, at: Date.now() };
    }
    this.forget();
  }

  /** A line typed just after its prompt was answered elsewhere: sent anyway, so that the gate records it void. */
  late(line: string): boolean {
    const a = line.trim().toLowerCase();
    const r = this.retracted;
    if (!r || Date.now() - r.at > 5000 || !["y", "yes", "a", "always", "n", "no"].includes(a)) return false;
    this.retracted = undefined;
    const res = this.gate().answer({ nonce: r.request.nonce, digest: r.request.digest, generation: r.request.generation, answer: a.startsWith("y") ? "allow" : a.startsWith("a") ? "allow-session" : "deny", by: "terminal" });
    if (!res.ok) this.out.write(`  (that answer no longer counts: ${res.reason})\n`);
    return true;
  }

  /** Requests the gate closed by itself (timeout, cancel, policy change) leave the prompt. */
  forget(): void {
    const open = new Set(this.gate().pending().map((p) => p.nonce));
    this.queue = this.queue.filter((q) => open.has(q.nonce));
    if (this.current && !open.has(this.current.nonce)) this.next();
  }
}

/**
 * Runs one instruction to its end: Ctrl-C cancels it (a second one exits at
 * once), then the summary, and with json a one-line summary on stderr.
 */
async function runToEnd(run: (signal: AbortSignal) => Promise<RunResult>, session: string | undefined, json?: Record<string, unknown>): Promise<number> {
  const ac = new AbortController();
  const onSignal = () => (ac.signal.aborted ? process.exit(EXIT_CANCELLED) : ac.abort(new Error("interrupted")));
  process.on("SIGINT", onSignal);
  try {
    const r = await run(ac.signal);
    printSummary(process.stdout, r, session);
    if (json) process.stderr.write(`${JSON.stringify({ outcome: r.outcome, turns: r.turns, toolCalls: r.toolCalls, refused: r.refused, session: session ?? null, ...json })}\n`);
    return exitFor(r);
  } finally {
    process.off("SIGINT", onSignal);
  }
}

/** `vak run "…"`: one instruction, the transcript as it happens, then what was refused. */
export async function runCommand(prompt: string, flags: AgentFlags & { json?: boolean; spec?: string }): Promise<number> {
  if (flags.spec) return runSpec(flags.spec, prompt, flags);
  const { options, journal } = sessionOptions(flags);
  const interactive = Boolean(process.stdin.isTTY && process.stderr.isTTY);
  let rl: Interface | undefined;
  let approver: TerminalApprover | undefined;
  let session: AgentSession | undefined = undefined;
  if (interactive) {
    approver = new TerminalApprover(() => session!.approvals, process.stderr, (t) => session!.redactor.text(t));
    rl = createInterface({ input: process.stdin, terminal: false });
    rl.on("line", (l) => approver!.answer(l));
  }
  session = new AgentSession({ ...options, title: prompt.slice(0, 200), onEvent: transcriptPrinter(process.stdout, (t) => session!.redactor.text(t)), onApproval: approver?.request });
  const s = session;
  try {
    return await runToEnd((signal) => s.run(prompt, signal), s.journalSession?.id, flags.json ? {} : undefined);
  } finally {
    rl?.close();
    await session.close();
    journal.close();
  }
}

const HELP = `  /mode read-only | workspace-write   change the mode (revokes what runs now)
  /status                             the mode, generation and model
  /quit                               end the session (Ctrl-D too)
  Ctrl-C cancels a running turn; anything else is an instruction for the agent.`;

/**
 * `vak [MESSAGE]`: an interactive session in the terminal, with approval
 * prompts and a mode line; a message given on the command line is its first.
 * With --serve the same process also serves the browser client, which hosts
 * this very session: the browser and the terminal watch one transcript,
 * either can answer an approval (the first answer counts, the other is void),
 * send the next instruction, cancel, or switch the mode.
 */
export async function interactiveCommand(flags: AgentFlags & { serve?: boolean; port?: number }, first?: string): Promise<number> {
  const { options, journal } = sessionOptions(flags);
  const out = process.stdout;
  let session: AgentSession | undefined = undefined;
  const approver = new TerminalApprover(() => session!.approvals, out, (t) => session!.redactor.text(t));
  const printer = transcriptPrinter(out, (t) => session!.redactor.text(t));
  const onPolicy = (p: { generation: number; mode: SessionMode }) => out.write(`\n[mode is now ${p.mode}; generation ${p.generation}: what ran under the old one was stopped]\n`);
  let live: LiveSession | undefined;
  let server: { close(): Promise<void> } | undefined;
  if (flags.serve) {
    const { startServer } = await import("../server/server.js");
    const { hostAgent } = await import("../server/hosted.js");
    const { loadUserConfig } = await import("../policy/config.js");
    const filter = (t: string) => visible(journal.redactor.text(t));
    const running = await startServer({
      config: loadUserConfig().server, port: flags.port, journal, filter, log: (l) => process.stderr.write(`${filter(l)}\n`),
      info: { workspace: options.workspace, model: `${options.model.provider}:${options.model.model}`, mode: options.mode, version: 1, single: true },
    });
    server = running;
    live = running.sessions.adopt((hooks) => {
      session = new AgentSession({ ...options, title: "interactive session", onEvent: hooks.onEvent, onApproval: hooks.onApproval, onApprovalSettled: hooks.onApprovalSettled, onPolicy: hooks.onPolicy });
      return hostAgent(session, "interactive session", options.workspace);
    });
    live.watch({ event: printer, approval: approver.request, settled: (r, o) => approver.settled(r, o), policy: onPolicy });
    out.write(`the browser client: ${running.loginUrl ?? running.url} (this session, live)\n`);
  } else {
    session = new AgentSession({ ...options, title: "interactive session", onEvent: printer, onApproval: approver.request, onPolicy });
  }
  const s = session!;
  const modeLine = () => `vak · ${s.mode} · generation ${s.generation} · ${options.model.provider}:${options.model.model} · ${options.workspace}`;
  const rl = createInterface({ input: process.stdin, output: out, terminal: Boolean(process.stdin.isTTY) });
  let running: { ac: AbortController; done: Promise<void> } | undefined;
  const piped = !process.stdin.isTTY;
  const queued: string[] = [];
  const prompt = () => {
    out.write(`\n${modeLine()}\n`);
    rl.setPrompt("› ");
    rl.prompt();
  };
  out.write(`${HELP}\n`);
  prompt();
  rl.on("SIGINT", () => {
    if (running) running.ac.abort(new Error("interrupted"));
    else if (live?.cancel("the terminal")) return;
    else rl.close();
  });
  const command = async (line: string): Promise<void> => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === "/quit" || cmd === "/exit") return void rl.close();
    if (cmd === "/status") return void out.write(`${modeLine()}\n`);
    if (cmd === "/mode" && (arg === "read-only" || arg === "workspace-write")) {
      if (live) await live.setMode(arg, "the terminal");
      else await s.setMode(arg as SessionMode);
      approver.forget();
      return;
    }
    out.write(`${HELP}\n`);
  };
  const submit = (line: string): void => {
    if (approver.waiting) return approver.answer(line);
    if (approver.late(line)) return;
    if (line.trim().startsWith("/"))
      return void command(line)
        .catch((e: Error) => out.write(`vak: ${visible(s.redactor.text(e.message))}\n`))
        .then(() => !running && prompt());
    if (!line.trim()) return prompt();
    // Piped input is a script: its lines wait their turn. At a terminal, a person is told to wait.
    const busy = running || live?.state().running;
    if (running && piped) return void queued.push(line);
    if (busy) return void out.write("(the agent is still working; wait, or Ctrl-C to cancel it)\n");
    const ac = new AbortController();
    const run = live
      ? (() => {
          const p = live.send(line, "terminal");
          ac.signal.addEventListener("abort", () => live!.cancel("the terminal"), { once: true });
          return p;
        })()
      : s.run(line, ac.signal);
    const done = run
      .then((r) => printSummary(out, r, undefined))
      .catch((e: Error) => void out.write(`vak: the turn failed: ${visible(s.redactor.text(e.message))}\n`))
      .finally(() => {
        running = undefined;
        approver.forget();
        prompt();
        const next = queued.shift();
        if (next !== undefined) {
          out.write(`${visible(next)}\n`);
          submit(next);
        }
      });
    running = { ac, done };
  };
  rl.on("line", submit);
  if (first !== undefined) {
    // As if typed at the prompt, so that it shows in the transcript where it would have been.
    out.write(`${visible(first)}\n`);
    submit(first);
  }
  await new Promise<void>((resolve) => rl.on("close", resolve));
  // Ctrl-D at a terminal ends the session now; the end of piped input lets its instructions finish, one after another.
  while (running) {
    if (!piped) running.ac.abort(new Error("the session ended"));
    await running.done;
  }
  const id = s.journalSession?.id;
  if (server) await server.close();
  else await s.close();
  journal.close();
  out.write(`\nsession ended; the record: vak journal show ${id}\n`);
  return 0;
}

/** `vak run --spec SPEC "…"`: a workload's harness and components, each with its own grants. */
async function runSpec(file: string, prompt: string, flags: AgentFlags & { json?: boolean }): Promise<number> {
  const { loadSpec } = await import("../workload/spec.js");
  const { WorkloadSession } = await import("../workload/workload-session.js");
  const { resolveModel } = await import("../model/providers.js");
  const { loadUserConfig } = await import("../policy/config.js");
  const { Journal } = await import("../journal/journal.js");
  const mode = flags.mode === "read-only" ? "read-only" : "workspace-write";
  const plan = loadSpec(file, { mode });
  const config = loadUserConfig();
  const model = resolveModel(flags.model ?? plan.harness.model, config);
  const journal = Journal.open();
  const interactive = Boolean(process.stdin.isTTY && process.stderr.isTTY);
  let session: InstanceType<typeof WorkloadSession> | undefined = undefined;
  const approver = interactive ? new TerminalApprover(() => session!.approvals, process.stderr, (t) => session!.redactor.text(t)) : undefined;
  const rl = approver ? createInterface({ input: process.stdin, terminal: false }) : undefined;
  rl?.on("line", (l) => approver!.answer(l));
  try {
    session = new WorkloadSession(plan, {
      model: model.client, journal, mode, secrets: model.key ? [model.key] : [], secretCommands: config.secret_commands, caFiles: config.egress.ca_files,
      sandbox: flags.sandbox === "reduced" || flags.sandbox === "container" ? flags.sandbox : "namespaces",
      onEvent: transcriptPrinter(process.stdout, (t) => session!.redactor.text(t)), onApproval: approver?.request,
      onLog: (line) => void process.stderr.write(`${visible(session!.redactor.text(line))}\n`),
    });
    const ws = session;
    return await runToEnd((signal) => ws.send(prompt, signal), ws.journalSession?.id, flags.json ? { workload: plan.name } : undefined);
  } finally {
    rl?.close();
    await session?.close();
    journal.close();
  }
}
