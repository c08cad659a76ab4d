import OpenAI from "openai";
import { delegatedText, toolResultText } from "./untrusted.js";
import { unhandled } from "../protocol/unhandled.js";
import { describeSdkError } from "./errors.js";
import { ReplyMeter } from "./reply-bounds.js";
import { ModelError, type ModelClient, type ModelRequest, type ModelTurn, type ToolCallRequest } from "./types.js";

export interface OpenAIConfig {
  /** The name this provider has in the user's config ("openai", "ollama", ...). */
  provider: string;
  model: string;
  baseURL: string;
  apiKey: string | undefined;
  maxRetries?: number;
  timeoutMs?: number;
}

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

function toWire(req: ModelRequest): ChatMessage[] {
  const out: ChatMessage[] = [{ role: "system", content: req.system }];
  for (const m of req.messages) {
    const role = m.role;
    if (m.role === "user") out.push({ role: "user", content: m.text });
    else if (m.role === "delegated") out.push({ role: "user", content: delegatedText(m, req.redact) });
    else if (m.role === "assistant")
      out.push({
        role: "assistant",
        content: m.text || null,
        ...(m.toolCalls.length
          ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: "function" as const, function: { name: c.name, arguments: typeof c.args === "string" ? c.args : JSON.stringify(c.args) } })) }
          : {}),
      });
    else if (m.role === "tool") out.push({ role: "tool", tool_call_id: m.callId, content: toolResultText(m, req.redact) });
    else unhandled(m, `message role ${role}`);
  }
  return out;
}

export function parseArgs(text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** OpenAI-compatible Chat Completions (OpenAI, Ollama, llama.cpp server, vLLM), streamed. */
export class OpenAIChatClient implements ModelClient {
  readonly provider: string;
  readonly model: string;
  private readonly client: OpenAI;

  constructor(private readonly cfg: OpenAIConfig) {
    this.provider = cfg.provider;
    this.model = cfg.model;
    // Everything explicit: the SDK would otherwise read OPENAI_BASE_URL and friends itself.
    this.client = new OpenAI({
      apiKey: cfg.apiKey ?? "no-key",
      baseURL: cfg.baseURL,
      organization: null,
      project: null,
      maxRetries: cfg.maxRetries ?? 2,
      timeout: cfg.timeoutMs ?? 120_000,
    });
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    let text = "";
    const calls = new Map<number, { id: string; name: string; args: string }>();
    let finish: string | null = null;
    let usage: ModelTurn["usage"];
    const meter = new ReplyMeter();
    try {
      const stream = await this.client.chat.completions.create(
        {
          model: this.model,
          messages: toWire(req),
          ...(req.tools.length ? { tools: req.tools.map((t) => ({ type: "function" as const, function: { name: t.name, description: t.description, parameters: t.parameters } })) } : {}),
          ...(req.maxTokens ? { max_tokens: req.maxTokens } : {}),
          stream: true,
          stream_options: { include_usage: true },
        },
        { signal: req.signal },
      );
      for await (const chunk of stream) {
        if (chunk.usage) usage = { input: chunk.usage.prompt_tokens, output: chunk.usage.completion_tokens };
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const d = choice.delta;
        if (d?.content) {
          meter.addText(d.content);
          text += d.content;
          req.onText?.(d.content);
        }
        for (const tc of d?.tool_calls ?? []) {
          meter.addCall(tc.index, tc.function?.name ?? "", tc.function?.arguments ?? "");
          const cur = calls.get(tc.index) ?? { id: "", name: "", args: "" };
          if (tc.id) cur.id = tc.id;
          if (tc.function?.name) cur.name += tc.function.name;
          if (tc.function?.arguments) cur.args += tc.function.arguments;
          calls.set(tc.index, cur);
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    } catch (e) {
      // Leaving the loop by a throw closes the stream: nothing more of an oversized reply is read.
      if (e instanceof ModelError) throw e;
      throw describeSdkError(OpenAI, e, this.cfg);
    }
    const toolCalls: ToolCallRequest[] = [...calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([i, c]) => ({ id: c.id || `call_${i}`, name: c.name, args: parseArgs(c.args) }));
    const stop = finish === "tool_calls" || toolCalls.length ? "tool_use" : finish === "length" ? "length" : finish === "stop" ? "end" : "other";
    return { text, toolCalls, stop, usage };
  }
}
