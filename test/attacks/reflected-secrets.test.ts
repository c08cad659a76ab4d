import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { beforeAll, describe, expect, it } from "vitest";
import type { EgressEvent } from "../../src/net/egress-log.js";
import { ENDPOINT_PREFIX, parseEndpoint } from "../../src/net/endpoint.js";
import { createRunCa, type RunCa } from "../../src/net/tls-ca.js";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { gateClient, type LenientRequest, listenLoopback, readLeniently, testGate } from "../support/net.js";
import { exchange, tlsThrough } from "../support/tls-client.js";
import { testCa, type TestCa } from "../support/tls.js";

// A host the gate sends a secret to may send it back (it reflects request headers, quotes the token in an
// error, redirects with it): the answer to a request carrying a gate-held secret must reach the command with
// each value put back as its placeholder, however the answer is cut (TCP reads, chunks, TLS records) and
// however it is framed. Each upstream here writes its answer in pieces, a pause between them, so that the
// gate reads each piece on its own. Loopback only.

const VALUE = `sk-test-${"0123456789abcdef".repeat(2)}`;
const PLACEHOLDER = "vak-placeholder-0123456789abcdef01234567";
const secret = (hosts: string[]) => ({ placeholders: [{ ref: "secret:t", placeholder: PLACEHOLDER, value: VALUE, hosts }] });

/** A loopback server (plain TCP, or TLS with a leaf from ca) that answers each request with pieces(r), written one by one 40 ms apart. */
async function piecesUpstream(ca: TestCa | undefined, pieces: (r: LenientRequest) => string[]) {
  const seen: LenientRequest[] = [];
  const onSocket = (s: Socket) => {
    s.on("error", () => {});
    s.setNoDelay(true);
    readLeniently(s, 0, (r) => {
      seen.push(r);
      const ps = pieces(r);
      const write = (i: number) => {
        if (i >= ps.length || s.destroyed) return;
        s.write(ps[i]!, "latin1");
        setTimeout(() => write(i + 1), 40);
      };
      write(0);
    });
  };
  let server: NetServer;
  if (ca) {
    const { key, cert } = await ca.issue(["api.test", "127.0.0.1"]);
    server = createTlsServer({ key, cert, ALPNProtocols: ["http/1.1"] }, onSocket) as unknown as NetServer;
  } else server = createNetServer(onSocket);
  const port = await listenLoopback(server);
  return { port, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A response as the client read it: status line, headers (lower-cased names), and the body with chunked framing taken off. */
function parse(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const end = raw.indexOf("\r\n\r\n");
  const lines = raw.slice(0, end).split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(":")).toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
  let body = raw.slice(end + 4);
  if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
    let out = "";
    for (let at = 0; ; ) {
      const nl = body.indexOf("\r\n", at);
      const size = parseInt(body.slice(at, nl), 16);
      if (!size) break;
      out += body.slice(nl + 2, nl + 2 + size);
      at = nl + 2 + size + 2;
    }
    body = out;
  }
  return { status: Number(lines[0]!.split(" ")[1]), headers, body };
}

const cl = (head: string, body: string) => `${head}Content-Length: ${Buffer.byteLength(body, "latin1")}\r\n\r\n${body}`;

describe.each(["plain HTTP", "terminated TLS"] as const)("a gate-held secret reflected by its host, over %s", (kind) => {
  let ca: TestCa;
  let run: RunCa;
  beforeAll(async () => {
    ca = await testCa();
    run = await createRunCa();
  });

  /** One request through the gate, the secret's placeholder in its Authorization header (or not); the raw answer and the gate's records. */
  async function through(pieces: (r: LenientRequest) => string[], opts: { path?: string; method?: string; extra?: string; withSecret?: boolean; version?: "1.0" | "1.1"; pipelined?: boolean } = {}) {
    const tls = kind === "terminated TLS";
    const up = await piecesUpstream(tls ? ca : undefined, pieces);
    const host = tls ? `api.test:${up.port}` : `127.0.0.1:${up.port}`;
    const g = await testGate(tls ? [host, `127.0.0.1:${up.port}`] : [host], {
      names: { "api.test": ["127.0.0.1"] },
      ...(tls ? { tls: { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) } } : {}),
      worker: secret([host]),
    });
    try {
      const target = tls ? (opts.path ?? "/") : `http://${host}${opts.path ?? "/"}`;
      const auth = opts.withSecret === false ? "" : `Authorization: Bearer ${PLACEHOLDER}\r\n`;
      const one = (close: boolean) => `${opts.method ?? "GET"} ${target} HTTP/${opts.version ?? "1.1"}\r\nHost: ${host}\r\n${auth}${opts.extra ?? ""}${close ? "Connection: close\r\n" : ""}\r\n`;
      // pipelined: a kept request, then one that closes, sent together (the gate reads the second once the first is answered).
      const req = opts.pipelined ? one(false) + one(true) : one(true);
      let raw: string;
      if (tls) {
        const t = await tlsThrough(g.gate.socketPath, g.token, host, { ca: run.certPem });
        expect(t.error).toBeUndefined();
        raw = await exchange(t.tls! as unknown as Socket, req);
      } else raw = await exchange(await gateClient(g.gate.socketPath, g.token, { allowHalfOpen: false }), req);
      await new Promise((r) => setTimeout(r, 50));
      const ends = g.events.filter((e: EgressEvent) => e.outcome !== undefined && e.method !== "CONNECT");
      return { raw, res: parse(raw), seen: up.seen, end: ends.at(-1), events: g.events };
    } finally {
      await g.close();
      await up.close();
    }
  }

  it("the value reaches the host, and a Content-Length answer echoing it in a header and in a body cut mid-value comes back with the placeholder", async () => {
    const body = `{"error":"invalid token: Bearer ${VALUE}"}`;
    const cut = body.indexOf(VALUE) + 7;
    const x = await through((r) => {
      const head = `HTTP/1.1 401 Unauthorized\r\nX-Echo: ${r.headers.authorization}\r\nContent-Length: ${body.length}\r\n\r\n`;
      return [head + body.slice(0, cut), body.slice(cut)];
    });
    expect(x.seen[0]!.headers.authorization).toBe(`Bearer ${VALUE}`);
    expect(x.raw).not.toContain(VALUE);
    expect(x.res.status).toBe(401);
    expect(x.res.headers["x-echo"]).toBe(`Bearer ${PLACEHOLDER}`);
    expect(x.res.body).toBe(`{"error":"invalid token: Bearer ${PLACEHOLDER}"}`);
    // Re-framed: a placeholder is not as long as the value, so the length the upstream gave would be wrong.
    expect(x.res.headers["content-length"]).toBeUndefined();
    expect(x.res.headers["transfer-encoding"]).toBe("chunked");
    expect(x.end?.reflected).toBe(2);
    expect(JSON.stringify(x.events)).not.toContain(VALUE);
  });

  it("a host that echoes the request base64-encoded (standard and URL-safe), or the token upper-cased, hands back no part of the value longer than two bytes at each end", async () => {
    for (const enc of ["base64", "base64url"] as const) {
      const x = await through((r) => {
        const echo = JSON.stringify({ headers: { authorization: r.headers.authorization, host: r.headers.host } });
        const body = `{"echo":"${Buffer.from(echo).toString(enc)}","shout":"${String(r.headers.authorization).toUpperCase()}"}`;
        return [cl("HTTP/1.1 200 OK\r\n", body)];
      });
      expect(x.seen[0]!.headers.authorization).toBe(`Bearer ${VALUE}`);
      const blob = /"echo":"([^"]*)"/.exec(x.res.body)![1]!;
      const decoded = blob.split(PLACEHOLDER).flatMap((p) => [0, 1, 2, 3].map((o) => Buffer.from(p.slice(o), "base64").toString("latin1"))).join(" ");
      for (const text of [decoded, x.res.body.replaceAll(PLACEHOLDER, " ")])
        for (let k = 0; k + 5 <= VALUE.length; k++) expect(text.toLowerCase(), `${enc} ${text}`).not.toContain(VALUE.slice(k, k + 5).toLowerCase());
      expect(x.end?.reflected).toBe(2);
    }
  });

  it("a chunked answer whose chunks cut the value, a byte at a time around it, comes back with the placeholder", async () => {
    const at = `token=${VALUE};`;
    const x = await through(() => {
      const parts = ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"];
      for (const c of [at.slice(0, 10), ...at.slice(10, 20).split(""), at.slice(20)]) parts.push(`${c.length.toString(16)}\r\n${c}\r\n`);
      parts.push("0\r\n\r\n");
      return parts;
    });
    expect(x.raw).not.toContain(VALUE);
    expect(x.res.body).toBe(`token=${PLACEHOLDER};`);
    expect(x.end?.reflected).toBe(1);
    expect(x.end?.outcome).toBe("completed");
  });

  it("an answer delimited by the upstream's close, the value in its last bytes, comes back with the placeholder", async () => {
    const x = await through(() => ["HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nfirst ", VALUE.slice(0, 3), VALUE.slice(3)]);
    expect(x.raw).not.toContain(VALUE);
    expect(x.res.body).toBe(`first ${PLACEHOLDER}`);
  });

  it("an HTTP/1.0 client gets the replaced body ended by the connection's close", async () => {
    const body = `v=${VALUE}`;
    const x = await through(() => [cl("HTTP/1.1 200 OK\r\n", body)], { version: "1.0" });
    expect(x.raw).not.toContain(VALUE);
    expect(x.res.headers["transfer-encoding"]).toBeUndefined();
    expect(x.res.body).toBe(`v=${PLACEHOLDER}`);
  });

  it("the request asks for an unencoded, whole answer: Accept-Encoding identity, no Range", async () => {
    const x = await through(() => [cl("HTTP/1.1 200 OK\r\n", "ok")], { extra: "Accept-Encoding: gzip, br\r\nRange: bytes=0-9\r\n" });
    expect(x.seen[0]!.headers["accept-encoding"]).toBe("identity");
    expect(x.seen[0]!.headers.range).toBeUndefined();
    expect(x.res.body).toBe("ok");
  });

  it("a gzip answer all the same is refused with a 502 that says why; its body never reaches the client", async () => {
    const x = await through(() => [cl("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n", `BODYMARK${VALUE}`)]);
    expect(x.res.status).toBe(502);
    expect(x.raw).toContain("vak egress gate");
    expect(x.raw).toMatch(/encoded \(gzip\)/);
    expect(x.raw).not.toContain(VALUE);
    expect(x.raw).not.toContain("BODYMARK");
  });

  it("a HEAD answer keeps its Content-Length and carries no body; its headers are searched", async () => {
    const x = await through((r) => [`HTTP/1.1 200 OK\r\nX-Echo: ${r.headers.authorization}\r\nContent-Length: 1234\r\n\r\n`], { method: "HEAD" });
    expect(x.res.headers["content-length"]).toBe("1234");
    expect(x.res.headers["x-echo"]).toBe(`Bearer ${PLACEHOLDER}`);
    expect(x.res.body).toBe("");
    expect(x.end?.reflected).toBe(1);
  });

  it("two searched answers on one kept connection: each replaced, each framed so the next request is read right", async () => {
    const body = `k=${VALUE}`;
    const x = await through(() => [cl("HTTP/1.1 200 OK\r\n", body)], { pipelined: true });
    expect(x.raw).not.toContain(VALUE);
    expect(x.raw.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    expect(x.raw.split(PLACEHOLDER)).toHaveLength(3);
    expect(x.seen).toHaveLength(2);
  });

  it("a request with no secret in it is passed on as it came: its Content-Length kept, nothing searched", async () => {
    const body = `${VALUE} is just text here`;
    const x = await through(() => [cl("HTTP/1.1 200 OK\r\n", body)], { withSecret: false });
    expect(x.seen[0]!.headers.authorization).toBeUndefined();
    expect(x.res.headers["content-length"]).toBe(String(body.length));
    expect(x.res.body).toBe(body);
    expect(x.end?.reflected).toBeUndefined();
  });
});

describe("a header secret through a provider endpoint (https, through Node's client)", () => {
  it("a host that echoes the key, cut across TLS records, gives the command its placeholder", async () => {
    const ca = await testCa();
    const run = await createRunCa();
    const up = await piecesUpstream(ca, (r) => {
      const body = `{"seen":"${r.headers["x-api-key"]}"}`;
      const cut = body.indexOf(VALUE) + 5;
      return [`HTTP/1.1 200 OK\r\nX-Echo: ${r.headers["x-api-key"]}\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, cut)}`, body.slice(cut)];
    });
    const endpoint = parseEndpoint(`API_BASE=https://api.test:${up.port}/v1`);
    const g = await testGate([`api.test:${up.port}`, `127.0.0.1:${up.port}`], {
      names: { "api.test": ["127.0.0.1"] },
      tls: { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) },
      worker: { endpoints: [endpoint], headers: [{ ref: "secret:k", header: "x-api-key", value: VALUE, hosts: [`api.test:${up.port}`], placeholder: PLACEHOLDER }] },
    });
    try {
      const raw = await exchange(
        await gateClient(g.gate.socketPath, g.token, { allowHalfOpen: false }),
        `GET ${ENDPOINT_PREFIX}${endpoint.variable}/echo HTTP/1.1\r\nHost: 127.0.0.1:3128\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n`,
      );
      expect(up.seen[0]?.headers["x-api-key"]).toBe(VALUE);
      expect(up.seen[0]?.headers["accept-encoding"]).toBe("identity");
      expect(raw).not.toContain(VALUE);
      const res = parse(raw);
      expect(res.status).toBe(200);
      expect(res.headers["x-echo"]).toBe(PLACEHOLDER);
      expect(res.body).toBe(`{"seen":"${PLACEHOLDER}"}`);
      await new Promise((r) => setTimeout(r, 50));
      expect(g.events.find((e) => e.outcome !== undefined)?.reflected).toBe(2);
    } finally {
      await g.close();
      await up.close();
    }
  });
});

describe("a WebSocket carrying a gate-held secret", () => {
  it("is refused before it is sent (403, secret-unsearched): its frames would not be searched", async () => {
    let connections = 0;
    const server = createNetServer((s) => {
      connections++;
      s.end("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    });
    const port = await listenLoopback(server);
    const g = await testGate([`127.0.0.1:${port}`], { worker: secret([`127.0.0.1:${port}`]) });
    try {
      const raw = await exchange(
        await gateClient(g.gate.socketPath, g.token, { allowHalfOpen: false }),
        `GET http://127.0.0.1:${port}/ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${PLACEHOLDER}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
      expect(parse(raw).status).toBe(403);
      expect(raw).toContain("vak egress gate: refused");
      expect(connections).toBe(0);
      expect(g.events.some((e) => e.code === "secret-unsearched" && e.decision === "denied")).toBe(true);
    } finally {
      await g.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

// A value with characters encoders disagree on (an AWS-style secret key holds "/", "+" and "="): a host that
// quotes it through Python's quote, Go's QueryEscape or PathEscape, or Go's HTML escaping writes it otherwise
// than encodeURIComponent or the usual HTML escaping, and must not hand it back all the same.
describe("a value with reserved characters, reflected by common encoders", () => {
  const KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfi(CY)EXAMPLE'KEY=";
  const pct = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`;
  const strict = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, pct);
  const forms: Record<string, string> = {
    "Python quote (safe '/')": strict(KEY).replace(/%2F/g, "/"),
    "Go QueryEscape": strict(KEY).replace(/%20/g, "+"),
    "Go PathEscape": strict(KEY).replace(/%(24|26|2B|3A|3D|40)/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))),
    "Go html/template": KEY.replace(/&/g, "&amp;").replace(/'/g, "&#39;").replace(/"/g, "&#34;").replace(/\+/g, "&#43;"),
  };

  it.each(Object.entries(forms))("%s: the command gets the placeholder", async (_name, form) => {
    const up = await piecesUpstream(undefined, () => {
      const body = `<p>bad key ${form}</p>`;
      return [`HTTP/1.1 302 Found\r\nLocation: /login?next=${form}\r\nContent-Length: ${body.length}\r\n\r\n${body}`];
    });
    const host = `127.0.0.1:${up.port}`;
    const g = await testGate([host], { worker: { placeholders: [{ ref: "secret:aws", placeholder: PLACEHOLDER, value: KEY, hosts: [host] }] } });
    try {
      const raw = await exchange(
        await gateClient(g.gate.socketPath, g.token, { allowHalfOpen: false }),
        `GET http://${host}/ HTTP/1.1\r\nHost: ${host}\r\nAuthorization: AWS ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`,
      );
      expect(up.seen[0]!.headers.authorization).toBe(`AWS ${KEY}`);
      expect(raw).not.toContain(form);
      const res = parse(raw);
      expect(res.headers.location).toBe(`/login?next=${PLACEHOLDER}`);
      expect(res.body).toBe(`<p>bad key ${PLACEHOLDER}</p>`);
    } finally {
      await g.close();
      await up.close();
    }
  });
});
