import Anthropic from "@anthropic-ai/sdk";
import { parseArgs } from "./openai.js";
import { delegatedText, toolResultText } from "./untrusted.js";
import { unhandled } from "../protocol/unhandled.js";
import { describeSdkError } from "./errors.js";
import { ReplyMeter } from "./reply-bounds.js";
import { ModelError, type ModelClient, type ModelRequest, type ModelTurn } from "./types.js";

export interface AnthropicConfig {
  provider: string;
  model: string;
  baseURL: string;
  apiKey: string;
  maxRetries?: number;
  timeoutMs?: number;
}

type Param = Anthropic.Messages.MessageParam;
type Block = Anthropic.Messages.ContentBlockParam;

function toWire(req: ModelRequest): Param[] {
  const out: Param[] = [];
  // Tool results go back in a user turn; consecutive ones share it.
  const push = (role: "user" | "assistant", blocks: Block[]) => {
    const last = out[out.length - 1];
    if (last && last.role === role && Array.isArray(last.content)) (last.content as Block[]).push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of req.messages) {
    const role = m.role;
    if (m.role === "user") push("user", [{ type: "text", text: m.text }]);
    else if (m.role === "delegated") push("user", [{ type: "text", text: delegatedText(m, req.redact) }]);
    else if (m.role === "assistant")
      push("assistant", [
        ...(m.text ? [{ type: "text" as const, text: m.text }] : []),
        ...m.toolCalls.map((c) => ({ type: "tool_use" as const, id: c.id, name: c.name, input: (typeof c.args === "object" && c.args !== null ? c.args : { _raw: c.args }) as Record<string, unknown> })),
      ]);
    else if (m.role === "tool") push("user", [{ type: "tool_result", tool_use_id: m.callId, content: toolResultText(m, req.redact), is_error: m.isError }]);
    else unhandled(m, `message role ${role}`);
  }
  return out;
}

/** Anthropic Messages, streamed. */
export class AnthropicClient implements ModelClient {
  readonly provider: string;
  readonly model: string;
  private readonly client: Anthropic;

  constructor(private readonly cfg: AnthropicConfig) {
    this.provider = cfg.provider;
    this.model = cfg.model;
    // The key is always passed, so the SDK never looks for credentials elsewhere (environment, profiles on disk).
    this.client = new Anthropic({ apiKey: cfg.apiKey, baseURL: cfg.baseURL, maxRetries: cfg.maxRetries ?? 2, timeout: cfg.timeoutMs ?? 120_000, logLevel: "off" });
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    let text = "";
    const blocks = new Map<number, { id: string; name: string; json: string }>();
    let stop: string | null = null;
    let input = 0;
    let output = 0;
    const meter = new ReplyMeter();
    try {
      const stream = await this.client.messages.create(
        {
          model: this.model,
          max_tokens: req.maxTokens ?? 8192,
          system: req.system,
          messages: toWire(req),
          ...(req.tools.length
            ? { tools: req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: withoutSchemaKey(t.parameters) as Anthropic.Messages.Tool.InputSchema })) }
            : {}),
          stream: true,
        },
        { signal: req.signal },
      );
      for await (const ev of stream) {
        if (ev.type === "message_start") input = ev.message.usage?.input_tokens ?? 0;
        else if (ev.type === "content_block_start" && ev.content_block.type === "tool_use") {
          meter.addCall(ev.index, ev.content_block.name);
          blocks.set(ev.index, { id: ev.content_block.id, name: ev.content_block.name, json: "" });
        } else if (ev.type === "content_block_start" && ev.content_block.type === "text" && ev.content_block.text) {
          meter.addText(ev.content_block.text);
          text += ev.content_block.text;
          req.onText?.(ev.content_block.text);
        } else if (ev.type === "content_block_delta") {
          if (ev.delta.type === "text_delta") {
            meter.addText(ev.delta.text);
            text += ev.delta.text;
            req.onText?.(ev.delta.text);
          } else if (ev.delta.type === "input_json_delta") {
            const b = blocks.get(ev.index);
            if (b) {
              meter.addCall(ev.index, "", ev.delta.partial_json);
              b.json += ev.delta.partial_json;
            }
          }
        } else if (ev.type === "message_delta") {
          stop = ev.delta.stop_reason ?? stop;
          output = ev.usage?.output_tokens ?? output;
        }
      }
    } catch (e) {
      // Leaving the loop by a throw closes the stream: nothing more of an oversized reply is read.
      if (e instanceof ModelError) throw e;
      throw describeSdkError(Anthropic, e, this.cfg);
    }
    const toolCalls = [...blocks.entries()].sort(([a], [b]) => a - b).map(([, b]) => ({ id: b.id, name: b.name, args: parseArgs(b.json) }));
    return {
      text,
      toolCalls,
      stop: stop === "tool_use" || toolCalls.length ? "tool_use" : stop === "max_tokens" ? "length" : stop === "end_turn" || stop === "stop_sequence" ? "end" : "other",
      usage: { input, output },
    };
  }
}

function withoutSchemaKey(s: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _, ...rest } = s;
  return rest;
}
