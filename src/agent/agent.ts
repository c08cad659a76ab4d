import { createHash } from "node:crypto";
import type { Broker, OpOutcome } from "../broker/broker.js";
import { TOOLS, toolCallToOp, toolJsonSchema } from "../broker/registry.js";
import { type Op, traitsOf } from "../protocol/ops.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { Redactor } from "../secrets/redact.js";
import { ModelError, type DelegatedFrom, type Message, type ModelClient, type ToolCallRequest, type ToolSpec } from "../model/types.js";
import { checkTurn } from "../model/reply-bounds.js";
import { UNTRUSTED_RULE } from "../model/untrusted.js";
import { TASK_TOOL, type TaskArgs, TaskArgsSchema } from "./task.js";

/** What a run shows as it goes: for a live transcript. */
export type AgentEvent =
  | { type: "text"; component: string; delta: string }
  | { type: "tool-call"; component: string; name: string; args: unknown }
  | { type: "tool-result"; component: string; name: string; ok: boolean; code?: string | undefined; text: string; target?: string | undefined };

export interface Refusal {
  component: string;
  tool: string;
  code: string;
  message: string;
}

export interface RunResult {
  text: string;
  turns: number;
  toolCalls: number;
  refused: Refusal[];
  /** too-large: the conversation grew past what a session holds (MAX_CONVERSATION_BYTES). */
  outcome: "done" | "cancelled" | "max-turns" | "model-error" | "too-large";
  error?: string | undefined;
}

/** Arguments nested deeper than this are refused before anything (the record, the transcript, a parser) walks them. */
const MAX_ARGS_DEPTH = 32;
/** What one turn's tool results may bring back to the model together; later calls of that turn are refused without running. */
const MAX_TURN_RESULT_BYTES = 8 * 1024 * 1024;
/** What a conversation may hold in all (it is sent again every turn); past it the run ends, saying so. */
const MAX_CONVERSATION_BYTES = 64 * 1024 * 1024;
/** The record keeps a model's text up to this, and each call's arguments up to RECORD_ARGS_BYTES; past them, their size, digest and start. */
const RECORD_TEXT_BYTES = 64 * 1024;
const RECORD_ARGS_BYTES = 4 * 1024;

/** A value for the record: as it is when small, else its size, its digest and its start. */
function recorded(v: unknown, max: number): unknown {
  const s = typeof v === "string" ? v : (JSON.stringify(v) ?? "null");
  const bytes = Buffer.byteLength(s);
  if (bytes <= max) return v;
  return { bytes, sha256: createHash("sha256").update(s).digest("hex"), head: s.slice(0, 1024), cut: `the record keeps the first 1024 characters of ${bytes} bytes` };
}

function messageBytes(m: Message): number {
  switch (m.role) {
    case "user": case "delegated": case "tool": return Buffer.byteLength(m.text);
    case "assistant": return Buffer.byteLength(m.text) + m.toolCalls.reduce((a, c) => a + Buffer.byteLength(typeof c.args === "string" ? c.args : (JSON.stringify(c.args) ?? "")), 0);
  }
}

/** How deep a JSON-like value nests, counted without recursion. */
function depthOf(v: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (!x || typeof x !== "object") continue;
    if (d + 1 > max) max = d + 1;
    if (max > MAX_ARGS_DEPTH) return max;
    for (const y of Object.values(x as object)) stack.push([y, d + 1]);
  }
  return max;
}

/** What a tool call came to, for the model and the record. */
export interface ToolAnswer {
  text: string;
  ok: boolean;
  code?: string | undefined;
  target?: string | undefined;
  /** What a sub-agent's own calls had refused (a task's answer is the task's; its refusals are the session's too). */
  refused?: Refusal[] | undefined;
}

/** The tools an agent has, and how a call reaches them (a broker, a sub-agent, a component). */
export interface ToolRouter {
  specs: ToolSpec[];
  call(call: ToolCallRequest, signal: AbortSignal): Promise<ToolAnswer>;
}

/** Everything one agent (the main one, a task's, a workload's harness) runs with. None of it reaches a worker. */
export interface AgentContext {
  component: string;
  model: ModelClient;
  router: ToolRouter;
  journal?: SessionWriter | undefined;
  generation: () => number;
  redactor: Redactor;
  maxTurns: number;
  /** Who this agent is and what it may do, for the system prompt. */
  role: string;
  /** For a sub-agent: its instruction was written by the model that started it, and is sent fenced as such, never as the user's words. */
  delegatedBy?: DelegatedFrom | undefined;
  onEvent?: ((e: AgentEvent) => void) | undefined;
}

function systemPrompt(ctx: AgentContext): string {
  return [ctx.role, "You act only through the tools given. Every tool call runs under grants you cannot change; a refused call says why.", UNTRUSTED_RULE].join("\n");
}

export function builtinSpecs(): ToolSpec[] {
  return TOOLS.map((t) => ({ name: t.name, description: t.description, parameters: toolJsonSchema(t) }));
}

/** The text a tool's outcome becomes for the model. */
export function outcomeText(r: OpOutcome): string {
  if (!r.ok) return `refused (${r.code}): ${r.message}`;
  if (traitsOf(r.op)?.effect !== "exec") return r.output;
  const d = r.data as { exitCode?: number | null; timedOut?: boolean } | undefined;
  return `${r.output}${r.output && !r.output.endsWith("\n") ? "\n" : ""}[exit code ${d?.exitCode ?? "none"}${d?.timedOut ? ", timed out" : ""}]`;
}

/** Tools beyond the built-in ones that are still broker ops (an MCP server's, as `mcp__SERVER__TOOL`). */
export interface ExtraTools {
  specs: readonly ToolSpec[];
  opFor(name: string, args: unknown): Op | undefined;
}

/** The built-in tools through one broker, the task tool when a sub-agent runner is given, and MCP tools when given. */
export function brokerRouter(broker: Broker, runTask?: (args: TaskArgs, signal: AbortSignal) => Promise<RunResult>, extra?: ExtraTools): ToolRouter {
  return {
    specs: [...builtinSpecs(), ...(runTask ? [TASK_TOOL] : []), ...(extra?.specs ?? [])],
    async call(call, signal) {
      const op = extra?.opFor(call.name, call.args);
      if (op) {
        // An MCP tool is an op like any other: checked, approved and recorded by the broker.
        const r = await broker.run(op, { signal });
        return { text: outcomeText(r), ok: r.ok, code: r.ok ? undefined : r.code, target: r.target };
      }
      if (call.name === TASK_TOOL.name) {
        if (!runTask) return { text: "refused (bad-request): a task cannot start further tasks", ok: false, code: "bad-request" };
        const args = TaskArgsSchema.safeParse(call.args);
        if (!args.success) return { text: `refused (bad-request): task: ${args.error.issues[0]!.path.join(".")}: ${args.error.issues[0]!.message}`, ok: false, code: "bad-request" };
        const r = await runTask(args.data, signal);
        const ok = r.outcome === "done";
        return { text: ok ? r.text : `the task ended: ${r.outcome}${r.error ? ` (${r.error})` : ""}\n${r.text}`, ok, code: ok ? undefined : r.outcome, target: `task: ${args.data.description}`, refused: r.refused };
      }
      return runBuiltin(broker, call.name, call.args, signal);
    },
  };
}

/** One built-in tool's call, as one op through a broker. */
export async function runBuiltin(broker: Broker, name: string, args: unknown, signal: AbortSignal): Promise<ToolAnswer> {
  const c = toolCallToOp(name, args);
  if (!c.ok) return { text: `refused (bad-request): ${c.message}`, ok: false, code: "bad-request" };
  const r = await broker.run(c.op, { signal });
  return { text: outcomeText(r), ok: r.ok, code: r.ok ? undefined : r.code, target: r.target };
}

/**
 * The harness loop: the model's tool calls go to the router (broker ops,
 * sub-agents, components); what comes back is untrusted content with its
 * provenance, kept apart from the user's instructions in the record and in
 * what the model is sent. The loop ends when the model stops calling tools,
 * at the turn limit, on a model error, or when the run is cancelled.
 */
export async function runAgent(ctx: AgentContext, messages: Message[], prompt: string, signal: AbortSignal): Promise<RunResult> {
  const actor = { component: ctx.component };
  const record = (kind: "message" | "model.call", payload: Record<string, unknown>) =>
    ctx.journal?.append(kind, actor, ctx.generation(), payload).catch(() => undefined);
  const result: RunResult = { text: "", turns: 0, toolCalls: 0, refused: [], outcome: "done" };
  if (ctx.delegatedBy) {
    messages.push({ role: "delegated", text: prompt, provenance: ctx.delegatedBy });
    await record("message", { role: "delegated", provenance: ctx.delegatedBy, text: recorded(prompt, RECORD_TEXT_BYTES) });
  } else {
    messages.push({ role: "user", text: prompt });
    await record("message", { role: "user", provenance: "user", text: recorded(prompt, RECORD_TEXT_BYTES) });
  }
  const redact = (t: string) => ctx.redactor.text(t);
  const tools = ctx.router.specs;
  const system = systemPrompt(ctx);

  for (;;) {
    if (signal.aborted) return { ...result, outcome: "cancelled" };
    if (result.turns >= ctx.maxTurns) return { ...result, outcome: "max-turns" };
    const held = messages.reduce((a, m) => a + messageBytes(m), 0);
    if (held > MAX_CONVERSATION_BYTES)
      return { ...result, outcome: "too-large", error: `the conversation holds ${held} bytes, more than ${MAX_CONVERSATION_BYTES}; start a new session` };
    result.turns += 1;
    const started = Date.now();
    let turn;
    try {
      turn = await ctx.model.complete({ system, messages, tools, signal, redact, onText: (delta) => ctx.onEvent?.({ type: "text", component: ctx.component, delta }) });
      // A model's arguments nested absurdly deep are replaced before anything walks them.
      for (const c of turn.toolCalls) if (depthOf(c.args) > MAX_ARGS_DEPTH) c.args = { refused: `arguments nested deeper than ${MAX_ARGS_DEPTH} levels` };
      // The same bounds whatever the client (the built-in ones stop reading there already).
      checkTurn(turn);
    } catch (e) {
      const cancelled = signal.aborted || (e instanceof ModelError && e.kind === "cancelled");
      await record("model.call", { provider: ctx.model.provider, model: ctx.model.model, ms: Date.now() - started, ok: false, error: recorded((e as Error).message, RECORD_ARGS_BYTES) });
      return { ...result, outcome: cancelled ? "cancelled" : "model-error", error: cancelled ? undefined : ctx.redactor.text((e as Error).message) };
    }
    await record("model.call", { provider: ctx.model.provider, model: ctx.model.model, ms: Date.now() - started, ok: true, stop: turn.stop, toolCalls: turn.toolCalls.length, usage: turn.usage ?? null });
    // The conversation sent back to the provider is redacted too (the calls run with what the model sent).
    messages.push({ role: "assistant", text: redact(turn.text), toolCalls: turn.toolCalls.map((c) => ({ ...c, name: redact(c.name), args: ctx.redactor.value(c.args) })) });
    await record("message", { role: "assistant", provenance: "model", text: recorded(turn.text, RECORD_TEXT_BYTES), toolCalls: turn.toolCalls.map((c) => ({ name: c.name, args: recorded(c.args, RECORD_ARGS_BYTES) })) });
    if (turn.text) result.text = turn.text;
    if (turn.toolCalls.length === 0) return result;

    let turnBytes = 0;
    for (const call of turn.toolCalls) {
      // Every call gets an answer, even after a cancel, so that the conversation stays well-formed.
      let answer: ToolAnswer;
      if (signal.aborted) answer = { text: "refused (cancelled): the run was cancelled", ok: false, code: "cancelled" };
      else if (turnBytes > MAX_TURN_RESULT_BYTES)
        answer = { text: `refused (too-large): this turn's tool results already hold more than ${MAX_TURN_RESULT_BYTES} bytes; it did not run: ask for less at once`, ok: false, code: "too-large" };
      else {
        ctx.onEvent?.({ type: "tool-call", component: ctx.component, name: call.name, args: call.args });
        answer = await ctx.router.call(call, signal);
      }
      result.toolCalls += 1;
      const text = ctx.redactor.text(answer.text);
      turnBytes += Buffer.byteLength(text);
      // Redacted here too: the summary and --json print what was refused.
      if (!answer.ok) result.refused.push({ component: ctx.component, tool: ctx.redactor.text(call.name), code: answer.code ?? "refused", message: text });
      // A sub-agent's own refusals (a task's), redacted like this call's.
      if (answer.refused) result.refused.push(...answer.refused.map((r) => ({ ...r, component: redact(r.component), tool: redact(r.tool), code: redact(r.code), message: redact(r.message) })));
      const target = answer.target === undefined ? undefined : ctx.redactor.text(answer.target);
      messages.push({ role: "tool", callId: call.id, name: call.name, text, isError: !answer.ok, provenance: { tool: call.name, target, untrusted: true } });
      await record("message", {
        role: "tool", provenance: { tool: call.name, target: target ?? null, untrusted: true },
        ok: answer.ok, bytes: Buffer.byteLength(text), sha256: createHash("sha256").update(text).digest("hex"),
      });
      ctx.onEvent?.({ type: "tool-result", component: ctx.component, name: call.name, ok: answer.ok, code: answer.code, text, target });
    }
  }
}
