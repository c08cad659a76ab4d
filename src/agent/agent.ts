import { createHash } from "node:crypto";
import type { Broker, OpOutcome } from "../broker/broker.js";
import { TOOLS, toolCallToOp, toolJsonSchema } from "../broker/registry.js";
import { type Op, traitsOf } from "../protocol/ops.js";
import type { SessionWriter } from "../journal/session-writer.js";
import type { Redactor } from "../secrets/redact.js";
import { ModelError, type Message, type ModelClient, type ToolCallRequest, type ToolSpec } from "../model/types.js";
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
  outcome: "done" | "cancelled" | "max-turns" | "model-error";
  error?: string | undefined;
}

/** Arguments nested deeper than this are refused before anything (the record, the transcript, a parser) walks them. */
const MAX_ARGS_DEPTH = 32;

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
  /** Where the instruction came from: the user (default), or for a sub-agent, the model that started it. */
  promptProvenance?: unknown;
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
  messages.push({ role: "user", text: prompt });
  await record("message", { role: "user", provenance: ctx.promptProvenance ?? "user", text: prompt });
  const tools = ctx.router.specs;
  const system = systemPrompt(ctx);

  for (;;) {
    if (signal.aborted) return { ...result, outcome: "cancelled" };
    if (result.turns >= ctx.maxTurns) return { ...result, outcome: "max-turns" };
    result.turns += 1;
    const started = Date.now();
    let turn;
    try {
      turn = await ctx.model.complete({ system, messages, tools, signal, onText: (delta) => ctx.onEvent?.({ type: "text", component: ctx.component, delta }) });
      // A model's arguments nested absurdly deep are replaced before anything walks them.
      for (const c of turn.toolCalls) if (depthOf(c.args) > MAX_ARGS_DEPTH) c.args = { refused: `arguments nested deeper than ${MAX_ARGS_DEPTH} levels` };
    } catch (e) {
      const cancelled = signal.aborted || (e instanceof ModelError && e.kind === "cancelled");
      await record("model.call", { provider: ctx.model.provider, model: ctx.model.model, ms: Date.now() - started, ok: false, error: (e as Error).message });
      return { ...result, outcome: cancelled ? "cancelled" : "model-error", error: cancelled ? undefined : ctx.redactor.text((e as Error).message) };
    }
    await record("model.call", { provider: ctx.model.provider, model: ctx.model.model, ms: Date.now() - started, ok: true, stop: turn.stop, toolCalls: turn.toolCalls.length, usage: turn.usage ?? null });
    messages.push({ role: "assistant", text: turn.text, toolCalls: turn.toolCalls });
    await record("message", { role: "assistant", provenance: "model", text: turn.text, toolCalls: turn.toolCalls.map((c) => ({ name: c.name, args: c.args })) });
    if (turn.text) result.text = turn.text;
    if (turn.toolCalls.length === 0) return result;

    for (const call of turn.toolCalls) {
      // Every call gets an answer, even after a cancel, so that the conversation stays well-formed.
      let answer: ToolAnswer;
      if (signal.aborted) answer = { text: "refused (cancelled): the run was cancelled", ok: false, code: "cancelled" };
      else {
        ctx.onEvent?.({ type: "tool-call", component: ctx.component, name: call.name, args: call.args });
        answer = await ctx.router.call(call, signal);
      }
      result.toolCalls += 1;
      if (!answer.ok) result.refused.push({ component: ctx.component, tool: call.name, code: answer.code ?? "refused", message: answer.text });
      if (answer.refused) result.refused.push(...answer.refused);
      const text = ctx.redactor.text(answer.text);
      messages.push({ role: "tool", callId: call.id, name: call.name, text, isError: !answer.ok, provenance: { tool: call.name, target: answer.target, untrusted: true } });
      await record("message", {
        role: "tool", provenance: { tool: call.name, target: answer.target ?? null, untrusted: true },
        ok: answer.ok, bytes: Buffer.byteLength(text), sha256: createHash("sha256").update(text).digest("hex"),
      });
      ctx.onEvent?.({ type: "tool-result", component: ctx.component, name: call.name, ok: answer.ok, code: answer.code, text, target: answer.target });
    }
  }
}
