// A web server for egress tests, run inside a network namespace the test
// creates. Serves a directory (for git's dumb HTTP), echoes requests, and
// redirects on demand. Appends one line per request to the log file.
import { appendFileSync, readFileSync, statSync } from "node:fs";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { join, normalize } from "node:path";

const [host, ports, root, log, tlsFile] = process.argv.slice(2);
const tlsPorts = tlsFile ? JSON.parse(readFileSync(tlsFile, "utf8")) : [];

// HTTPS ports: each request logged with what a credential check needs (the SNI, the auth headers), and the
// wire shapes of the model providers' APIs, answered as their SDKs expect.
const PROVIDER = {
  "/v1/messages": () => ({ id: "msg_1", type: "message", role: "assistant", model: "claude-test", content: [{ type: "text", text: "pong from the test provider" }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 1, output_tokens: 5 } }),
  "/v1/chat/completions": () => ({ id: "c1", object: "chat.completion", created: 1, model: "gpt-test", choices: [{ index: 0, message: { role: "assistant", content: "pong from the test provider" }, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 5, total_tokens: 6 } }),
  "/v1/responses": () => ({ id: "resp_1", object: "response", created_at: 1, status: "completed", model: "gpt-test", output: [{ type: "message", id: "m1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "pong from the test provider", annotations: [] }] }], usage: { input_tokens: 1, output_tokens: 5, total_tokens: 6 } }),
};
const TEXT = "pong from the test provider";
/** The providers' streamed answers (server-sent events), as their SDKs and CLIs read them. */
function stream(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const [event, data] of events) res.write(`${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`);
  res.end();
}
const ANTHROPIC_STREAM = [
  ["message_start", { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "claude-test", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } }],
  ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
  ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: TEXT } }],
  ["content_block_stop", { type: "content_block_stop", index: 0 }],
  ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } }],
  ["message_stop", { type: "message_stop" }],
];
const RESPONSE = { id: "resp_1", object: "response", created_at: 1, status: "completed", model: "gpt-test", output: [{ type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: TEXT, annotations: [] }] }], usage: { input_tokens: 1, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 6 } };
const OPENAI_STREAM = [
  ["response.created", { type: "response.created", sequence_number: 0, response: { ...RESPONSE, status: "in_progress", output: [] } }],
  ["response.output_item.added", { type: "response.output_item.added", sequence_number: 1, output_index: 0, item: { type: "message", id: "msg_1", status: "in_progress", role: "assistant", content: [] } }],
  ["response.content_part.added", { type: "response.content_part.added", sequence_number: 2, item_id: "msg_1", output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }],
  ["response.output_text.delta", { type: "response.output_text.delta", sequence_number: 3, item_id: "msg_1", output_index: 0, content_index: 0, delta: TEXT }],
  ["response.output_text.done", { type: "response.output_text.done", sequence_number: 4, item_id: "msg_1", output_index: 0, content_index: 0, text: TEXT }],
  ["response.content_part.done", { type: "response.content_part.done", sequence_number: 5, item_id: "msg_1", output_index: 0, content_index: 0, part: { type: "output_text", text: TEXT, annotations: [] } }],
  ["response.output_item.done", { type: "response.output_item.done", sequence_number: 6, output_index: 0, item: RESPONSE.output[0] }],
  ["response.completed", { type: "response.completed", sequence_number: 7, response: RESPONSE }],
];
const GEMINI = { candidates: [{ content: { role: "model", parts: [{ text: TEXT }] }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 5, totalTokenCount: 6 }, modelVersion: "gemini-test" };

for (const t of tlsPorts) {
  const server = createHttpsServer({ key: t.key, cert: t.cert, ALPNProtocols: ["http/1.1"] }, (req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const h = req.headers;
      appendFileSync(log, `${t.port} ${req.method} ${req.url} host=${h.host} sni=${req.socket.servername} auth=${h.authorization ?? "-"} key=${h["x-api-key"] ?? h["x-goog-api-key"] ?? "-"} body=${body.slice(0, 200)}\n`);
      const path = req.url.split("?")[0];
      let json;
      try {
        json = JSON.parse(body);
      } catch {}
      if (json?.stream === true && path.endsWith("/v1/messages")) return stream(res, ANTHROPIC_STREAM);
      if (json?.stream === true && path.endsWith("/v1/responses")) return stream(res, OPENAI_STREAM);
      if (/^\/v1beta\/models\/[^/:]+:streamGenerateContent$/.test(path)) return stream(res, [["", GEMINI]]);
      if (path === "/v1/messages/count_tokens") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ input_tokens: 1 }));
      if (PROVIDER[path]) return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(PROVIDER[path]()));
      if (/^\/v1beta\/models\/[^/:]+:generateContent$/.test(path)) {
        // A request for JSON (Gemini CLI's model router and its other classifiers) gets JSON that their schemas take.
        const wantsJson = json?.generationConfig?.responseMimeType === "application/json";
        const text = wantsJson ? JSON.stringify({ complexity_reasoning: "trivial", complexity_score: 1, reasoning: "done", next_speaker: "user", model_choice: "flash" }) : TEXT;
        return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ candidates: [{ content: { role: "model", parts: [{ text }] }, finishReason: "STOP", index: 0 }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 5, totalTokenCount: 6 } }));
      }
      if (req.url === "/redirect-other") return res.writeHead(302, { location: "https://other.test/echo/redirected" }).end();
      if (req.url.startsWith("/big/")) {
        const n = Number(req.url.slice(5));
        res.writeHead(200, { "content-length": String(n) });
        const chunk = Buffer.alloc(65536, 120);
        let left = n;
        const more = () => {
          while (left > 0) {
            const c = chunk.subarray(0, Math.min(left, chunk.length));
            left -= c.length;
            if (!res.write(c)) return void res.once("drain", more);
          }
          res.end();
        };
        return more();
      }
      if (req.url === "/-/ping") return res.writeHead(200, { "content-type": "application/json" }).end("{}");
      // Files (for git's dumb HTTP over HTTPS), else an echo of the request.
      try {
        const file = normalize(join(root, decodeURIComponent(req.url.split("?")[0])));
        if (file.startsWith(root) && statSync(file).isFile()) return res.writeHead(200).end(readFileSync(file));
      } catch {}
      res.writeHead(200).end(`echo ${req.method} ${req.url} host=${h.host} auth=${h.authorization ?? "-"} body=${body}\n`);
    });
  });
  // A WebSocket that echoes raw bytes: enough to show the gate carries and counts an upgrade.
  server.on("upgrade", (req, socket) => {
    appendFileSync(log, `${t.port} UPGRADE ${req.url} host=${req.headers.host}\n`);
    if (!req.url.startsWith("/ws")) return void socket.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    socket.on("data", (d) => socket.write(d));
    socket.on("error", () => {});
  });
  server.listen(t.port, host, () => process.stdout.write(`listening ${t.port}\n`));
}
for (const port of ports.split(",").map(Number)) {
  createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      appendFileSync(log, `${port} ${req.method} ${req.url} host=${req.headers.host}\n`);
      if (req.url === "/redirect-meta") return res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
      if (req.url === "/redirect-loop") return res.writeHead(302, { location: "http://127.1:9/" }).end();
      if (req.url?.startsWith("/echo")) return res.writeHead(200).end(`echo ${req.method} ${req.url} host=${req.headers.host} body=${body}\n`);
      const path = normalize(join(root, decodeURIComponent(req.url.split("?")[0])));
      if (!path.startsWith(root)) return res.writeHead(403).end();
      try {
        if (statSync(path).isFile()) return res.writeHead(200).end(readFileSync(path));
      } catch {}
      res.writeHead(404).end("not found\n");
    });
  }).listen(port, host, () => process.stdout.write(`listening ${port}\n`));
}
