import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { closeDestroying } from "./net.js";

/**
 * A loopback server that speaks what the agent CLIs speak to their providers,
 * streamed as they read it: OpenAI's Responses API (Codex), Anthropic's
 * Messages API (Claude Code) and Gemini's generateContent (Gemini CLI). With
 * a command, the first answer asks the CLI's own shell tool to run it
 * (exec_command, Bash, run_shell_command), and the answer after the tool's
 * result says "done" with what came back; without one, it says "pong".
 */
export const PONG = "pong from the test provider";

export interface FakeRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
}

export interface AgentFake {
  port: number;
  url: string;
  seen: FakeRequest[];
  close(): Promise<void>;
}

const sse = (event: string | undefined, data: unknown) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

function responses(body: Record<string, unknown>, command: string | undefined): string {
  const input = Array.isArray(body.input) ? (body.input as Record<string, unknown>[]) : [];
  const result = input.find((i) => i.type === "function_call_output");
  const item = command && !result
    ? { type: "function_call", id: "fc_1", call_id: "call_1", name: "exec_command", arguments: JSON.stringify({ cmd: command }), status: "completed" }
    : { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: result ? `done: ${JSON.stringify(result.output).slice(0, 300)}` : PONG, annotations: [] }] };
  const response = { id: "resp_1", object: "response", created_at: 1, status: "completed", model: String(body.model), output: [item], usage: { input_tokens: 1, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 6 } };
  return sse("response.created", { type: "response.created", response: { ...response, status: "in_progress", output: [] } })
    + sse("response.output_item.added", { type: "response.output_item.added", output_index: 0, item })
    + sse("response.output_item.done", { type: "response.output_item.done", output_index: 0, item })
    + sse("response.completed", { type: "response.completed", response });
}

function messages(body: Record<string, unknown>, command: string | undefined): string {
  const msgs = Array.isArray(body.messages) ? (body.messages as { content: unknown }[]) : [];
  const result = msgs.flatMap((m) => (Array.isArray(m.content) ? (m.content as Record<string, unknown>[]) : [])).find((c) => c.type === "tool_result");
  const useTool = Boolean(command && !result && Array.isArray(body.tools) && (body.tools as { name: string }[]).some((t) => t.name === "Bash"));
  let out = sse("message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } });
  if (useTool) {
    out += sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "toolu_1", name: "Bash", input: {} } });
    out += sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify({ command, description: "run the test's command" }) } });
  } else {
    out += sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
    out += sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: result ? `done: ${JSON.stringify(result.content).slice(0, 300)}` : PONG } });
  }
  out += sse("content_block_stop", { type: "content_block_stop", index: 0 });
  out += sse("message_delta", { type: "message_delta", delta: { stop_reason: useTool ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } });
  return out + sse("message_stop", { type: "message_stop" });
}

function gemini(body: Record<string, unknown>): Record<string, unknown> {
  // Gemini CLI's classifiers ask for JSON: give them JSON their schemas take.
  const wantsJson = (body.generationConfig as Record<string, unknown> | undefined)?.responseMimeType === "application/json";
  const text = wantsJson ? JSON.stringify({ complexity_reasoning: "trivial", complexity_score: 1, reasoning: "done", next_speaker: "user", model_choice: "flash" }) : PONG;
  return { candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 5, totalTokenCount: 6 }, modelVersion: "gemini-test" };
}

export async function agentFake(opts: { command?: string } = {}): Promise<AgentFake> {
  const seen: FakeRequest[] = [];
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d: Buffer) => (raw += d.toString()));
    req.on("end", () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        // not JSON
      }
      const path = (req.url ?? "").split("?")[0]!;
      seen.push({ method: req.method ?? "", path, headers: req.headers, body });
      const stream = (text: string) => res.writeHead(200, { "content-type": "text/event-stream" }).end(text);
      const json = (v: unknown) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(v));
      if (req.method === "POST" && path.endsWith("/responses")) return stream(responses(body, opts.command));
      if (req.method === "POST" && path.endsWith("/v1/messages/count_tokens")) return json({ input_tokens: 1 });
      if (req.method === "POST" && path.endsWith("/v1/messages")) {
        if (body.stream) return stream(messages(body, opts.command));
        return json({ id: "msg_1", type: "message", role: "assistant", model: body.model, content: [{ type: "text", text: PONG }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 5 } });
      }
      if (/:streamGenerateContent$/.test(path)) return stream(sse(undefined, gemini(body)));
      if (/:generateContent$/.test(path)) return json(gemini(body));
      if (/:countTokens$/.test(path)) return json({ totalTokens: 1 });
      // A WebSocket upgrade (Codex tries one first) and anything else: not here.
      res.writeHead(404, { "content-type": "application/json" }).end("{}");
    });
  });
  const close = closeDestroying(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, url: `http://127.0.0.1:${port}`, seen, close };
}
