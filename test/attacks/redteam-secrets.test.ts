import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { httpsUpstream, testCa, type HttpsUpstream, type TestCa } from "../support/tls.js";
import { baseEnv, sandboxSh } from "../support/vak.js";

/**
 * A secret the gate puts into request headers is meant never to be held by the command. A granted host
 * that reflects request headers (a debug endpoint, httpbin's /headers, an error page quoting the token it
 * refused) sends the value back through the gate, which must give the command its placeholder instead. Only loopback
 * servers: nothing leaves the machine.
 */
describe("a gate-held secret does not come back to the command through the answer", () => {
  const VALUE = `sk-reflected-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  let s: Scratch;
  let plain: Server;
  let plainPort = 0;
  let ca: TestCa;
  let https: HttpsUpstream;
  const seen: string[] = [];

  beforeAll(async () => {
    s = scratch();
    plain = createServer((req, res) => {
      seen.push(JSON.stringify(req.headers));
      // Reflects every request header, in a header and in the body.
      res.writeHead(401, { "content-type": "application/json", "x-echo": String(req.headers.authorization ?? "") });
      res.end(JSON.stringify({ error: `invalid token: ${req.headers.authorization}`, headers: req.headers }) + "\n");
    });
    await new Promise<void>((r) => plain.listen(0, "127.0.0.1", () => r()));
    plainPort = (plain.address() as { port: number }).port;
    ca = await testCa();
    https = await httpsUpstream(ca, ["127.0.0.1"], (req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(req.headers) + "\n");
      return true;
    });
  }, 60_000);
  afterAll(async () => {
    await new Promise((r) => plain?.close(r));
    await https?.close();
    s?.cleanup();
  });

  const env = () => baseEnv({ REAL_TOKEN: VALUE });

  it("the value reaches its host in the header (the secret works)", async () => {
    const r = await sandboxSh(s.ws, `curl -s -o /dev/null -H "Authorization: Bearer $TOKEN" http://127.0.0.1:${plainPort}/; echo "env=$TOKEN"`, [
      "--allow-net", `127.0.0.1:${plainPort}`, "--secret", `TOKEN=env:REAL_TOKEN@127.0.0.1:${plainPort}`,
    ], { env: env() });
    expect(r.stdout).toMatch(/env=vak-placeholder-/);
    expect(seen.join("\n")).toContain(`Bearer ${VALUE}`);
  });

  // The answer to a request the gate put a secret into goes through src/net/reflected.ts, the value replaced
  // by its placeholder in the headers and the body (cut across reads, chunks and TLS records:
  // reflected-secrets.test.ts), not through the engine's splice.
  it("over plain HTTP, a host that reflects headers does not hand the command the value", async () => {
    const r = await sandboxSh(s.ws, `curl -s -i -H "Authorization: Bearer $TOKEN" http://127.0.0.1:${plainPort}/`, [
      "--allow-net", `127.0.0.1:${plainPort}`, "--secret", `TOKEN=env:REAL_TOKEN@127.0.0.1:${plainPort}`,
    ], { env: env() });
    expect(seen.join("\n")).toContain(VALUE);
    expect(r.stdout).toContain("invalid token");
    expect(r.stdout).not.toContain(VALUE);
  });

  it("over terminated HTTPS, a host that reflects headers does not hand the command the value", async () => {
    const r = await sandboxSh(s.ws, `curl -s -H "X-Api-Key: $TOKEN" https://127.0.0.1:${https.port}/`, [
      "--allow-net", `127.0.0.1:${https.port}`, "--ca-file", ca.file, "--secret", `TOKEN=env:REAL_TOKEN@127.0.0.1:${https.port}`,
    ], { env: env() });
    expect(https.requests.at(-1)?.headers["x-api-key"]).toBe(VALUE);
    expect(r.stdout).toContain("x-api-key");
    expect(r.stdout).not.toContain(VALUE);
  });
});
