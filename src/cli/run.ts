import { createInterface, type Interface } from "node:readline";
import type { LiveSession } from "../server/live-session.js";
import { AgentSession, type SessionMode } from "../agent/agent-session.js";
import type { RunResult } from "../agent/agent.js";
import { visible } from "../text/visible.js";
import { type AgentFlags, sessionOptions } from "./agent-options.js";
import { TerminalApprover } from "./approver.js";
import { fmt, own, type Output, processOutput } from "./output.js";
import { isRefusal, printSummary, transcriptPrinter } from "./transcript.js";

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
 * Runs one instruction to its end: Ctrl-C cancels it (a second one exits at
 * once), then the summary, and with json a one-line summary on stderr.
 */
async function runToEnd(run: (signal: AbortSignal) => Promise<RunResult>, io: { out: Output; err: Output }, session: string | undefined, json?: Record<string, unknown>): Promise<number> {
  const ac = new AbortController();
  const onSignal = () => (ac.signal.aborted ? process.exit(EXIT_CANCELLED) : ac.abort(new Error("interrupted")));
  process.on("SIGINT", onSignal);
  try {
    const r = await run(ac.signal);
    printSummary(io.out, r, session);
    if (json) io.err.json({ outcome: r.outcome, turns: r.turns, toolCalls: r.toolCalls, refused: r.refused, session: session ?? null, ...json });
    return exitFor(r);
  } finally {
    process.off("SIGINT", onSignal);
  }
}

/** `vak run "…"`: one instruction, the transcript as it happens, then what was refused. */
export async function runCommand(prompt: string, flags: AgentFlags & { json?: boolean; spec?: string }): Promise<number> {
  if (flags.spec) return runSpec(flags.spec, prompt, flags);
  const { options, journal } = await sessionOptions(flags);
  // The journal's redactor is the session's: it learns the provider key and every secret as the session starts.
  const io = processOutput(journal.redactor);
  const interactive = Boolean(process.stdin.isTTY && io.err.isTTY);
  let rl: Interface | undefined;
  let approver: TerminalApprover | undefined;
  let session: AgentSession | undefined = undefined;
  if (interactive) {
    approver = new TerminalApprover(() => session!.approvals, io.err);
    rl = createInterface({ input: process.stdin, terminal: false });
    rl.on("line", (l) => approver!.answer(l));
  }
  session = new AgentSession({ ...options, title: prompt.slice(0, 200), onEvent: transcriptPrinter(io.out), onApproval: approver?.request });
  const s = session;
  await s.ready;
  try {
    return await runToEnd((signal) => s.run(prompt, signal), io, s.journalSession?.id, flags.json ? {} : undefined);
  } finally {
    rl?.close();
    await session.close();
    await journal.close();
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
  const { options, journal } = await sessionOptions(flags);
  const { out } = processOutput(journal.redactor);
  let session: AgentSession | undefined = undefined;
  const approver = new TerminalApprover(() => session!.approvals, out);
  const printer = transcriptPrinter(out);
  const onPolicy = (p: { generation: number; mode: SessionMode }) => out.line(own(`\n[mode is now ${p.mode}; generation ${p.generation}: what ran under the old one was stopped]`));
  let live: LiveSession | undefined;
  let server: { close(): Promise<void> } | undefined;
  if (flags.serve) {
    const { startServer } = await import("../server/server.js");
    const { hostAgent } = await import("../server/hosted.js");
    const { loadUserConfig } = await import("../policy/config.js");
    const filter = (t: string) => visible(journal.redactor.text(t));
    const { err } = processOutput(journal.redactor);
    const running = await startServer({
      // The server's log lines are its own, with what it was sent already through the filter.
      config: loadUserConfig().server, port: flags.port, journal, filter, log: (l) => err.relayed(filter(l)),
      info: { workspace: options.workspace, model: `${options.model.provider}:${options.model.model}`, mode: options.mode, version: 1, single: true },
    });
    server = running;
    live = running.sessions.adopt((hooks) => {
      session = new AgentSession({ ...options, title: "interactive session", onEvent: hooks.onEvent, onApproval: hooks.onApproval, onApprovalSettled: hooks.onApprovalSettled, onPolicy: hooks.onPolicy });
      return hostAgent(session, "interactive session", options.workspace);
    });
    // A run the browser started ends here too: the model's last line is let out, and its summary shown (the terminal's own runs print theirs below).
    const ended = (r: RunResult, by: string) => void (by !== "terminal" && printSummary(out, r, undefined));
    live.watch({ event: printer, approval: approver.request, settled: (r, o) => approver.settled(r, o), policy: onPolicy, ended });
    out.line(fmt`the browser client: ${own(running.loginUrl ?? running.url)} (this session, live)`);
  } else {
    session = new AgentSession({ ...options, title: "interactive session", onEvent: printer, onApproval: approver.request, onPolicy });
  }
  const s = session!;
  await s.ready;
  const modeLine = () => fmt`vak · ${own(s.mode)} · generation ${own(String(s.generation))} · ${options.model.provider}:${options.model.model} · ${options.workspace}`;
  const rl = createInterface({ input: process.stdin, output: out.stream as NodeJS.WritableStream, terminal: Boolean(process.stdin.isTTY) });
  let running: { ac: AbortController; done: Promise<void> } | undefined;
  const piped = !process.stdin.isTTY;
  const queued: string[] = [];
  const prompt = () => {
    out.line(fmt`\n${modeLine()}`);
    rl.setPrompt("› ");
    rl.prompt();
  };
  out.line(own(HELP));
  prompt();
  rl.on("SIGINT", () => {
    if (running) running.ac.abort(new Error("interrupted"));
    else if (live?.cancel("the terminal")) return;
    else rl.close();
  });
  const command = async (line: string): Promise<void> => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === "/quit" || cmd === "/exit") return void rl.close();
    if (cmd === "/status") return void out.line(modeLine());
    if (cmd === "/mode" && (arg === "read-only" || arg === "workspace-write")) {
      if (live) await live.setMode(arg, "the terminal");
      else await s.setMode(arg as SessionMode);
      approver.forget();
      return;
    }
    out.line(own(HELP));
  };
  const submit = (line: string): void => {
    if (approver.waiting) return approver.answer(line);
    if (approver.late(line)) return;
    if (line.trim().startsWith("/"))
      return void command(line)
        .catch((e: Error) => out.line(fmt`vak: ${e.message}`))
        .then(() => !running && prompt());
    if (!line.trim()) return prompt();
    // Piped input is a script: its lines wait their turn. At a terminal, a person is told to wait.
    const busy = running || live?.state().running;
    if (running && piped) return void queued.push(line);
    if (busy) return void out.line(own("(the agent is still working; wait, or Ctrl-C to cancel it)"));
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
      .catch((e: Error) => void out.line(fmt`vak: the turn failed: ${e.message}`))
      .finally(() => {
        running = undefined;
        approver.forget();
        prompt();
        const next = queued.shift();
        if (next !== undefined) {
          out.line(fmt`${next}`);
          submit(next);
        }
      });
    running = { ac, done };
  };
  rl.on("line", submit);
  if (first !== undefined) {
    // As if typed at the prompt, so that it shows in the transcript where it would have been.
    out.line(fmt`${first}`);
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
  await journal.close();
  out.line(own(`\nsession ended; the record: vak journal show ${id}`));
  return 0;
}

/** `vak run --spec SPEC "…"`: a workload's harness and components, each with its own grants. */
async function runSpec(file: string, prompt: string, flags: AgentFlags & { json?: boolean }): Promise<number> {
  const { loadSpec } = await import("../workload/spec.js");
  const { WorkloadSession } = await import("../workload/workload-session.js");
  const { resolveModel } = await import("../model/providers.js");
  const { providerKeys } = await import("../model/provider-keys.js");
  const { loadUserConfig } = await import("../policy/config.js");
  const { openJournal } = await import("../journal/open.js");
  const mode = flags.mode === "read-only" ? "read-only" : "workspace-write";
  const config = loadUserConfig();
  const keys = providerKeys(config, process.env);
  const plan = loadSpec(file, { mode, providerKeys: keys });
  const model = resolveModel(flags.model ?? plan.harness.model, config);
  const journal = await openJournal({ config });
  const io = processOutput(journal.redactor);
  const interactive = Boolean(process.stdin.isTTY && io.err.isTTY);
  let session: InstanceType<typeof WorkloadSession> | undefined = undefined;
  const approver = interactive ? new TerminalApprover(() => session!.approvals, io.err) : undefined;
  const rl = approver ? createInterface({ input: process.stdin, terminal: false }) : undefined;
  rl?.on("line", (l) => approver!.answer(l));
  try {
    const started = new WorkloadSession(plan, {
      model: model.client, journal, mode, secrets: [...new Set([...(model.key ? [model.key] : []), ...keys.values])], secretCommands: config.secret_commands, caFiles: config.egress.ca_files,
      sandbox: flags.sandbox === "reduced" || flags.sandbox === "container" ? flags.sandbox : "namespaces",
      onEvent: transcriptPrinter(io.out), onApproval: approver?.request,
      // An MCP server's stderr, a line at a time, prefixed with its name (src/mcp/stderr.ts): hostile text, shown through the output.
      onLog: (line) => io.err.relayed(line),
    });
    // Refused (a component's state holds links): its record is ended, nothing to close.
    await started.ready;
    const ws = (session = started);
    return await runToEnd((signal) => ws.send(prompt, signal), io, ws.journalSession?.id, flags.json ? { workload: plan.name } : undefined);
  } finally {
    rl?.close();
    await session?.close();
    await journal.close();
  }
}
