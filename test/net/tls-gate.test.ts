import { connect, createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRunCa, type RunCa } from "../../src/net/tls-ca.js";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { gateClient, listenLoopback, rawGate, statusOf, testGate, until } from "../support/net.js";
import { exchange, tlsThrough } from "../support/tls-client.js";
import { httpsUpstream, type HttpsUpstream, testCa, type TestCa } from "../support/tls.js";

// The gate terminating TLS for grants that must see inside, against a loopback HTTPS server signed by a test CA.
describe("TLS at the gate", () => {
  let ca: TestCa;
  let run: RunCa;
  let server: HttpsUpstream;
  beforeAll(async () => {
    ca = await testCa();
    run = await createRunCa();
    server = await httpsUpstream(ca, ["api.test", "127.0.0.1"]);
  });
  afterAll(() => server?.close());

  const gateFor = (allow: string[], worker = {}) =>
    // The names resolve to loopback: reaching it needs the literal granted too.
    gateWith([...allow, `127.0.0.1:${server.port}`], worker);
  const gateWith = (allow: string[], worker = {}) =>
    testGate(allow, { names: { "api.test": ["127.0.0.1"] }, tls: { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) }, worker });

  it("a read: grant is held inside HTTPS: GET passes, POST is refused before the server sees it", async () => {
    const g = await gateFor([`read:api.test:${server.port}`]);
    try {
      const before = server.requests.length;
      const get = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      expect(get.error).toBeUndefined();
      const got = await exchange(get.tls!, `GET /hello HTTP/1.1\r\nHost: api.test:${server.port}\r\nConnection: close\r\n\r\n`);
      expect(got).toMatch(/^HTTP\/1\.1 200/);
      expect(got).toContain("ok GET /hello");
      const post = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      const refused = await exchange(post.tls!, `POST /write HTTP/1.1\r\nHost: api.test:${server.port}\r\nContent-Length: 2\r\n\r\nhi`);
      expect(refused).toMatch(/^HTTP\/1\.1 403/);
      expect(server.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual(["GET /hello"]);
      expect(g.events.some((e) => e.method === "CONNECT" && e.tls === "terminated")).toBe(true);
    } finally {
      await g.close();
    }
  });

  it("the upstream connection a terminated tunnel opens early carries nothing undecided, serves the first request, and goes with a tunnel that fails", async () => {
    // Every connection the server accepts, and whether it is still open.
    const sessions: { open: boolean }[] = [];
    const onTcp = (s: import("node:net").Socket) => {
      const x = { open: true };
      sessions.push(x);
      s.once("close", () => (x.open = false));
    };
    server.server.on("connection", onTcp);
    const settle = () => new Promise((r) => setTimeout(r, 300));
    const g = await gateFor([`read:api.test:${server.port}`]);
    try {
      const before = server.requests.length;
      // Plain bytes inside the CONNECT: refused, and nothing is opened upstream for them.
      // (sent a while after the tunnel is open: time enough for an upstream connection, were one opened for them).
      const c = await gateClient(g.gate.socketPath, g.token, { allowHalfOpen: false });
      let plain = "";
      c.on("data", (d: Buffer) => (plain += d.toString("latin1")));
      const closed = new Promise((r) => c.once("close", r));
      c.write(`CONNECT api.test:${server.port} HTTP/1.1\r\nHost: api.test:${server.port}\r\n\r\n`);
      await until(() => plain.includes("200 Connection Established"), "the tunnel is open");
      await settle();
      c.write("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n");
      await closed;
      expect(plain).toContain("HTTP/1.1 403");
      await settle();
      expect(sessions, "plain bytes open no upstream connection").toHaveLength(0);
      // A wrong SNI: refused in the handshake; the connection opened for it is closed, with nothing sent on it.
      const sni = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem, servername: "other.test" });
      expect(sni.error).toBeDefined();
      // A POST the read: grant refuses: nothing reaches the server, and the tunnel's connection goes with it.
      const post = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      expect(await exchange(post.tls!, `POST /w HTTP/1.1\r\nHost: api.test:${server.port}\r\nContent-Length: 1\r\n\r\nx`)).toMatch(/^HTTP\/1\.1 403/);
      await settle();
      await until(() => sessions.every((x) => !x.open), "every connection opened for a refused tunnel is closed");
      expect(server.requests.length).toBe(before);
      // Two requests in one tunnel: both on the one connection opened with it.
      const opened = sessions.length;
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      const two = await exchange(t.tls!, `GET /a HTTP/1.1\r\nHost: api.test:${server.port}\r\n\r\nGET /b HTTP/1.1\r\nHost: api.test:${server.port}\r\nConnection: close\r\n\r\n`);
      expect(two.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
      expect(server.requests.slice(before).map((r) => r.url)).toEqual(["/a", "/b"]);
      expect(sessions.length - opened).toBe(1);
    } finally {
      server.server.off("connection", onTcp);
      await g.close();
    }
  });

  it("a read-only grant of an address lets no write reach it through a name, inside a terminated tunnel", async () => {
    // The path rule makes api.test's tunnel terminated; the name resolves to loopback, which only read:127.0.0.1 names.
    const g = await gateWith([`read:127.0.0.1:${server.port}`, `api.test:${server.port}/x/*`]);
    try {
      const before = server.requests.length;
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      expect(t.error).toBeUndefined();
      const post = await exchange(t.tls!, `POST /x/w HTTP/1.1\r\nHost: api.test:${server.port}\r\nContent-Length: 1\r\n\r\nx`);
      expect(post).toMatch(/^HTTP\/1\.1 403/);
      expect(post).toContain("reachable only by a grant for POST naming that exact address");
      const t2 = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      const get = await exchange(t2.tls!, `GET /x/r HTTP/1.1\r\nHost: api.test:${server.port}\r\nConnection: close\r\n\r\n`);
      expect(get).toMatch(/^HTTP\/1\.1 200/);
      expect(server.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual(["GET /x/r"]);
    } finally {
      await g.close();
    }
  });

  it("a placeholder is replaced in headers for its host only", async () => {
    const placeholders = [{ ref: "secret:k", placeholder: "vak-placeholder-abc", value: "real-key-123", hosts: ["api.test"] }];
    const g = await gateFor([`api.test:${server.port}`], { placeholders });
    try {
      const before = server.requests.length;
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      expect(t.error).toBeUndefined();
      const got = await exchange(t.tls!, `GET /k?x=vak-placeholder-abc HTTP/1.1\r\nHost: api.test:${server.port}\r\nAuthorization: Bearer vak-placeholder-abc\r\nConnection: close\r\n\r\n`);
      expect(got).toMatch(/^HTTP\/1\.1 200/);
      const seen = server.requests.slice(before)[0]!;
      expect(seen.headers.authorization).toBe("Bearer real-key-123");
      expect(seen.url).toBe("/k?x=vak-placeholder-abc");
      const allowed = g.events.find((e) => e.decision === "allowed" && e.secrets?.includes("secret:k"));
      expect(allowed?.withheld).toEqual(["secret:k"]);
    } finally {
      await g.close();
    }
  });

  /** A corporate proxy on loopback: it records each CONNECT target, and opens it (or refuses with 403). */
  async function corporateProxy(refuse = false) {
    const targets: string[] = [];
    const server = createServer((c) => {
      c.once("data", (d: Buffer) => {
        const target = /^CONNECT (\S+) /.exec(d.toString("latin1"))?.[1] ?? "?";
        targets.push(target);
        if (refuse) return void c.end("HTTP/1.1 403 Forbidden\r\n\r\n");
        const [host, port] = [target.slice(0, target.lastIndexOf(":")).replace(/^\[|\]$/g, ""), Number(target.slice(target.lastIndexOf(":") + 1))];
        const up = connect({ host, port }, () => {
          c.write("HTTP/1.1 200 Connection established\r\n\r\n");
          c.pipe(up).pipe(c);
        });
        up.on("error", () => c.destroy());
      });
      c.on("error", () => {});
    });
    const port = await listenLoopback(server);
    return { port, targets, close: () => new Promise<void>((r) => server.close(() => r())) };
  }

  it("with an upstream proxy, every upstream connection is a CONNECT to it for the checked address", async () => {
    const proxy = await corporateProxy();
    const g = await testGate([`api.test:${server.port}/x/*`, `127.0.0.1:${server.port}`], {
      names: { "api.test": ["127.0.0.1"] }, tls: { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) },
      upstreamProxy: { host: "127.0.0.1", port: proxy.port },
    });
    try {
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      const got = await exchange(t.tls!, `GET /x/proxied HTTP/1.1\r\nHost: api.test:${server.port}\r\nConnection: close\r\n\r\n`);
      expect(got).toMatch(/^HTTP\/1\.1 200/);
      const plain = await rawGate(g.gate.socketPath, g.token, `CONNECT 127.0.0.1:${server.port} HTTP/1.1\r\n\r\n`, { waitMs: 500 });
      expect(statusOf(plain)).toBe(200);
      expect(proxy.targets).toEqual([`127.0.0.1:${server.port}`, `127.0.0.1:${server.port}`]);
      expect(g.hook.calls.every((c) => c === `127.0.0.1:${proxy.port}`)).toBe(true);
    } finally {
      await g.close();
      await proxy.close();
    }
  });

  it("an upstream proxy that refuses the tunnel is a 502 that says so", async () => {
    const proxy = await corporateProxy(true);
    const g = await testGate([`127.0.0.1:${server.port}`], { upstreamProxy: { host: "127.0.0.1", port: proxy.port } });
    try {
      const r = await rawGate(g.gate.socketPath, g.token, `CONNECT 127.0.0.1:${server.port} HTTP/1.1\r\n\r\n`);
      expect(statusOf(r)).toBe(502);
      expect(r).toContain("the upstream proxy refused the tunnel: HTTP/1.1 403 Forbidden");
    } finally {
      await g.close();
      await proxy.close();
    }
  });

  const UPGRADE = (port: number) => `GET /ws HTTP/1.1\r\nHost: api.test:${port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;

  it("a WebSocket to a destination granted for every method is carried both ways and counted, its frames not inspected", async () => {
    const g = await gateFor([`api.test:${server.port}/ws`]);
    try {
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      const s = t.tls!;
      let got = "";
      s.on("data", (d: Buffer) => (got += d.toString("latin1")));
      s.write(UPGRADE(server.port));
      await until(() => got.includes("\r\n\r\n"), "the 101");
      expect(got).toMatch(/^HTTP\/1\.1 101/);
      s.write("frame-bytes-up");
      await until(() => got.includes("frame-bytes-up"), "the echo");
      s.end();
      await until(() => g.events.some((e) => e.upgrade === "websocket" && e.outcome !== undefined), "the end record");
      const end = g.events.find((e) => e.upgrade === "websocket" && e.outcome !== undefined)!;
      expect(end.status).toBe(101);
      expect(end.bytesUp).toBe("frame-bytes-up".length);
      expect(end.bytesDown).toBeGreaterThanOrEqual("frame-bytes-up".length);
    } finally {
      await g.close();
    }
  });

  it("a read: grant opens no WebSocket (it would carry writes)", async () => {
    const g = await gateFor([`read:api.test:${server.port}`]);
    try {
      const before = server.requests.length;
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${server.port}`, { ca: run.certPem });
      const r = await exchange(t.tls!, UPGRADE(server.port));
      expect(r).toMatch(/^HTTP\/1\.1 403/);
      expect(r).toContain("a WebSocket carries writes");
      expect(server.requests.length).toBe(before);
    } finally {
      await g.close();
    }
  });
});
