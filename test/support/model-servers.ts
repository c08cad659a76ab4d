import { createServer, type IncomingMessage, type Server } from "node:http";
import { closeDestroying } from "./net.js";

/**
 * A loopback server that speaks the OpenAI Chat Completions and Anthropic
 * Messages wire protocols, streaming, and answers each request with the next
 * scripted turn. It keeps every request it got, for checking what the host
 * sent (and did not send) to a model.
 */
export interface WireTurn {
  text?: string;
  toolCalls?: { name: string; args: unknown }[];
  /** Answer with this HTTP status and an error body instead. */
  status?: number;
  /** Stream text without end (OpenAI wire only), until the client goes away: a reply of any size. */
  endless?: boolean;
  /** Characters per streamed piece (default: 7 of text, 5 of arguments, as small as real servers send). */
  piece?: number;
}

export interface SeenRequest {
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
  raw: string;
}

export interface WireServer {
  baseURL: string;
  seen: SeenRequest[];
  /** For each endless reply, how many bytes were sent before the client went away. */
  endlessSent: number[];
  close(): Promise<void>;
}

function pieces(s: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

const sse = (event: string | undefined, data: unknown) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;

function openaiStream(turn: WireTurn, model: string): string {
  const base = { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model };
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => sse(undefined, { ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
  let out = chunk({ role: "assistant", content: "" });
  // Split text and arguments into pieces, as real servers do.
  for (const piece of pieces(turn.text ?? "", turn.piece ?? 7)) out += chunk({ content: piece });
  (turn.toolCalls ?? []).forEach((c, i) => {
    out += chunk({ tool_calls: [{ index: i, id: `call_${i}`, type: "function", function: { name: c.name, arguments: "" } }] });
    for (const piece of pieces(JSON.stringify(c.args), turn.piece ?? 5)) out += chunk({ tool_calls: [{ index: i, function: { arguments: piece } }] });
  });
  out += chunk({}, turn.toolCalls?.length ? "tool_calls" : "stop");
  out += sse(undefined, { ...base, choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
  return `${out}data: [DONE]\n\n`;
}

function anthropicStream(turn: WireTurn, model: string): string {
  let out = sse("message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", content: [], model, stop_reason: null, stop_sequence: null, usage: { input_tokens: 11, output_tokens: 1 } } });
  let index = 0;
  if (turn.text) {
    out += sse("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } });
    for (const piece of pieces(turn.text, turn.piece ?? 7)) out += sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text: piece } });
    out += sse("content_block_stop", { type: "content_block_stop", index });
    index += 1;
  }
  for (const [i, c] of (turn.toolCalls ?? []).entries()) {
    out += sse("content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: `toolu_${i}`, name: c.name, input: {} } });
    for (const piece of pieces(JSON.stringify(c.args), turn.piece ?? 5)) out += sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: piece } });
    out += sse("content_block_stop", { type: "content_block_stop", index });
    index += 1;
  }
  out += sse("message_delta", { type: "message_delta", delta: { stop_reason: turn.toolCalls?.length ? "tool_use" : "end_turn", stop_sequence: null }, usage: { output_tokens: 7 } });
  return out + sse("message_stop", { type: "message_stop" });
}

export async function wireServer(turns: WireTurn[], opts: { key?: string } = {}): Promise<WireServer> {
  const seen: SeenRequest[] = [];
  const endlessSent: number[] = [];
  let next = 0;
  const server: Server = createServer((req, res) => {
    let raw = "";
    req.on("data", (d: Buffer) => (raw += d.toString()));
    req.on("end", () => {
      const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      seen.push({ path: req.url ?? "", headers: req.headers, body, raw });
      const anthropic = req.url === "/v1/messages";
      const openai = req.url === "/v1/chat/completions";
      if (!anthropic && !openai) return void res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "no such route", type: "not_found" } }));
      // Anthropic's SDK sends the key as x-api-key or as a bearer token, depending on its version.
      const bearer = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
      const given = anthropic ? (req.headers["x-api-key"] ?? bearer) : bearer;
      if (opts.key && given !== opts.key) {
        const body = anthropic ? { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } } : { error: { message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key" } };
        return void res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify(body));
      }
      const turn = turns[next++] ?? { text: "(the wire server's script is over)" };
      if (turn.status) {
        const body = anthropic ? { type: "error", error: { type: "rate_limit_error", message: `status ${turn.status}` } } : { error: { message: `status ${turn.status}`, type: "error" } };
        return void res.writeHead(turn.status, { "content-type": "application/json", "retry-after-ms": "10" }).end(JSON.stringify(body));
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      if (turn.endless && openai) {
        const piece = `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: body.model, choices: [{ index: 0, delta: { content: "e".repeat(4096) }, finish_reason: null }] })}\n\n`;
        let sent = 0;
        const more = () => {
          while (!res.destroyed && res.write(piece)) sent += piece.length;
          if (!res.destroyed) res.once("drain", more);
        };
        res.on("close", () => endlessSent.push(sent));
        return more();
      }
      res.end(anthropic ? anthropicStream(turn, String(body.model)) : openaiStream(turn, String(body.model)));
    });
  });
  const close = closeDestroying(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return { baseURL: `http://127.0.0.1:${port}`, seen, endlessSent, close };
}
