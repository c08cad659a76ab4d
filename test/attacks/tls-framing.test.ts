import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { beforeAll, describe, expect, it } from "vitest";
import { createRunCa, type RunCa } from "../../src/net/tls-ca.js";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { type LenientRequest, listenLoopback, readLeniently, testGate, until } from "../support/net.js";
import { tlsThrough } from "../support/tls-client.js";
import { testCa, type TestCa } from "../support/tls.js";

// Inside a terminated tunnel the gate sends each request itself and moves bodies counted by their framing
// (tls-forward.ts). An upstream that lies about a body's length must not get a second answer past the
// gate, nor a client a second request past the checks; one upstream connection is kept only when nothing
// leaves a doubt about where an answer ended.

/** One request as the upstream read it. */
/**
 * A loopback HTTPS server that answers whatever its script says, byte for
 * byte (lies included): it reads each request on a connection in turn
 * (test/support/net.ts's readLeniently), records it, and writes answer(r).
 */
async function scriptedUpstream(ca: TestCa, answer: (r: LenientRequest, s: TLSSocket) => string | undefined) {
  const { key, cert } = await ca.issue(["api.test", "127.0.0.1"]);
  const seen: LenientRequest[] = [];
  let connections = 0;
  const server = createTlsServer({ key, cert, ALPNProtocols: ["http/1.1"] }, (s) => {
    const connection = ++connections;
    s.on("error", () => {});
    readLeniently(s, connection, (r) => {
      seen.push(r);
      const text = `seen ${r.line.split(" ")[1]}`;
      const out = answer(r, s) ?? `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
      if (out) s.write(out, "latin1");
    });
  });
  const port = await listenLoopback(server as unknown as import("node:net").Server);
  return {
    port,
    seen,
    get connections() {
      return connections;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** What a client reads from a TLS socket: everything so far, and its close. */
function reading(t: TLSSocket) {
  let out = "";
  t.on("data", (d: Buffer) => (out += d.toString("latin1")));
  t.on("error", () => {});
  const closed = new Promise<void>((r) => t.once("close", () => r()));
  return { text: () => out, closed };
}

describe("framing inside a terminated tunnel", () => {
  let ca: TestCa;
  let run: RunCa;
  beforeAll(async () => {
    ca = await testCa();
    run = await createRunCa();
  });

  async function setup(answer: (r: LenientRequest, s: TLSSocket) => string | undefined, allow?: (port: number) => string[], durable?: () => Promise<void>) {
    const up = await scriptedUpstream(ca, answer);
    const g = await testGate([...(allow?.(up.port) ?? [`read:api.test:${up.port}`]), `read:127.0.0.1:${up.port}`], {
      names: { "api.test": ["127.0.0.1"] },
      tls: { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) },
      ...(durable ? { durable } : {}),
    });
    const open = async () => {
      const t = await tlsThrough(g.gate.socketPath, g.token, `api.test:${up.port}`, { ca: run.certPem });
      expect(t.error).toBeUndefined();
      return t.tls!;
    };
    return { up, g, open, close: async () => (await g.close(), await up.close()) };
  }
  const get = (path: string, port: number, extra = "") => `GET ${path} HTTP/1.1\r\nHost: api.test:${port}\r\n${extra}\r\n`;

  it("an answer longer than its Content-Length smuggles nothing: the extra bytes are dropped and its connection is not kept", async () => {
    const x = await setup((r) => (r.line.startsWith("GET /a ") ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nsmuggled!" : undefined));
    try {
      const t = await x.open();
      const r = reading(t);
      t.write(get("/a", x.up.port));
      await until(() => r.text().includes("\r\n\r\nok"), "the first answer");
      t.write(get("/b", x.up.port, "Connection: close\r\n"));
      await r.closed;
      expect(r.text()).not.toContain("smuggled");
      expect(r.text()).toContain("seen /b");
      expect(r.text().match(/HTTP\/1\.1 200/g)).toHaveLength(2);
      // /b went on a connection of its own: the one that sent too much was closed.
      expect(x.up.seen.map((s) => `${s.connection} ${s.line.split(" ")[1]}`)).toEqual(["1 /a", "2 /b"]);
    } finally {
      await x.close();
    }
  });

  it("bytes an upstream sends unasked between requests close its connection; they never answer the next request", async () => {
    const x = await setup((r, s) => {
      if (!r.line.startsWith("GET /a ")) return undefined;
      setTimeout(() => s.write("HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nunasked!"), 100);
      return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    });
    try {
      const t = await x.open();
      const r = reading(t);
      t.write(get("/a", x.up.port));
      await until(() => r.text().includes("\r\n\r\nok"), "the first answer");
      await new Promise((res) => setTimeout(res, 400));
      t.write(get("/b", x.up.port, "Connection: close\r\n"));
      await r.closed;
      expect(r.text()).not.toContain("unasked");
      expect(r.text()).toContain("seen /b");
      expect(x.up.seen.map((s) => s.connection)).toEqual([1, 2]);
    } finally {
      await x.close();
    }
  });

  it("a body after a HEAD, 204 or 304 answer is no body: it is not passed on, and the connection is not kept", async () => {
    const lie: Record<string, string> = {
      "HEAD /h": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil",
      "GET /n": "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil",
      "GET /m": "HTTP/1.1 304 Not Modified\r\nContent-Length: 4\r\n\r\nevil",
    };
    const x = await setup((r) => lie[r.line.split(" ").slice(0, 2).join(" ")]);
    try {
      for (const first of ["HEAD /h", "GET /n", "GET /m"]) {
        const t = await x.open();
        const r = reading(t);
        const [method, path] = first.split(" ");
        t.write(`${method} ${path} HTTP/1.1\r\nHost: api.test:${x.up.port}\r\n\r\n`);
        await until(() => r.text().includes("\r\n\r\n"), `the answer to ${first}`);
        await new Promise((res) => setTimeout(res, 100));
        t.write(get("/after", x.up.port, "Connection: close\r\n"));
        await r.closed;
        expect(r.text(), first).not.toContain("evil");
        expect(r.text(), first).toContain("seen /after");
      }
      // Each /after went on a new connection.
      const after = x.up.seen.filter((s) => s.line.startsWith("GET /after "));
      const firsts = x.up.seen.filter((s) => !s.line.startsWith("GET /after "));
      expect(after.every((a) => firsts.every((f) => f.connection !== a.connection))).toBe(true);
    } finally {
      await x.close();
    }
  });

  it("an answer shorter than its Content-Length cuts the client's connection: a cut body is never passed off as whole", async () => {
    const x = await setup((r, s) => {
      s.end("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-this");
      return "";
    });
    try {
      const t = await x.open();
      const r = reading(t);
      t.write(get("/short", x.up.port));
      await r.closed;
      expect(r.text()).toContain("only-this");
      await until(() => x.g.events.some((e) => e.method === "GET" && e.outcome !== undefined), "the end record");
      const end = x.g.events.find((e) => e.method === "GET" && e.outcome !== undefined)!;
      expect(end.outcome).toMatch(/before the end of the body its Content-Length announced/);
    } finally {
      await x.close();
    }
  });

  it("an answer with both Content-Length and Transfer-Encoding is a 502, and none of its body reaches the client", async () => {
    const x = await setup(() => "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nevil\r\n0\r\n\r\n");
    try {
      const t = await x.open();
      const r = reading(t);
      t.write(get("/x", x.up.port));
      await r.closed;
      expect(r.text()).toMatch(/^HTTP\/1\.1 502/);
      expect(r.text()).not.toContain("evil");
    } finally {
      await x.close();
    }
  });

  it("a chunked answer is framed again; bytes after its last chunk are dropped and close its connection", async () => {
    const x = await setup((r) => (r.line.startsWith("GET /c ") ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil" : undefined));
    try {
      const t = await x.open();
      const r = reading(t);
      t.write(get("/c", x.up.port));
      await until(() => r.text().includes("0\r\n\r\n"), "the chunked answer");
      t.write(get("/d", x.up.port, "Connection: close\r\n"));
      await r.closed;
      expect(r.text()).toContain("Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
      expect(r.text()).not.toContain("evil");
      expect(r.text()).not.toContain("Trailer");
      expect(x.up.seen.map((s) => s.connection)).toEqual([1, 2]);
    } finally {
      await x.close();
    }
  });

  it("an HTTP/1.0 client gets a chunked answer decoded and delimited by the close, never chunk framing it cannot read", async () => {
    const x = await setup(() => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    try {
      const t = await x.open();
      const r = reading(t);
      t.write(`GET /old HTTP/1.0\r\nHost: api.test:${x.up.port}\r\n\r\n`);
      await r.closed;
      expect(r.text()).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(r.text()).toContain("Connection: close\r\n");
      expect(r.text()).not.toMatch(/Transfer-Encoding/i);
      expect(r.text().endsWith("\r\n\r\nabcde")).toBe(true);
    } finally {
      await x.close();
    }
  });

  it("a client's bytes past its Content-Length or its last chunk are the next request, decided as any other", async () => {
    // Path grants: /w/* may be written, nothing else.
    const x = await setup(() => undefined, (port) => [`api.test:${port}/w/*`, `127.0.0.1:${port}/w/*`]);
    try {
      for (const body of [
        "Content-Length: 5\r\n\r\nhello",
        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      ]) {
        const t = await x.open();
        const r = reading(t);
        t.write(`POST /w/a HTTP/1.1\r\nHost: api.test:${x.up.port}\r\n${body}POST /secret HTTP/1.1\r\nHost: api.test:${x.up.port}\r\nContent-Length: 4\r\n\r\nevil`);
        await r.closed;
        expect(r.text()).toMatch(/^HTTP\/1\.1 200[^]*seen \/w\/a[^]*HTTP\/1\.1 403/);
      }
      expect(x.up.seen.map((s) => `${s.line.split(" ")[1]} ${s.body}`)).toEqual(["/w/a hello", "/w/a hello"]);
    } finally {
      await x.close();
    }
  });

  it("keep-alive: consecutive clean exchanges share one upstream connection, and the client's connection stays open", async () => {
    const x = await setup(() => undefined);
    try {
      const t = await x.open();
      const r = reading(t);
      for (const p of ["/1", "/2", "/3"]) {
        t.write(get(p, x.up.port));
        await until(() => r.text().includes(`seen ${p}`), p);
      }
      expect(t.destroyed).toBe(false);
      t.destroy();
      expect(x.up.seen.map((s) => s.connection)).toEqual([1, 1, 1]);
      expect(x.up.connections).toBe(1);
    } finally {
      await x.close();
    }
  });

  it("the CONNECT is answered while its record is made durable, but nothing goes upstream before it is, and nothing if it cannot be", async () => {
    let release: (ok: boolean) => void = () => {};
    // One sync for every record so far (as the spool's group sync), held until the test says.
    let held: Promise<void> | undefined;
    const durable = () => (held ??= new Promise<void>((resolve, reject) => (release = (ok) => (ok ? resolve() : reject(new Error("the disk is full"))))));
    const x = await setup(() => undefined, undefined, durable);
    try {
      // The client's handshake with the gate completes; the server has seen no connection.
      const t = await x.open();
      await new Promise((res) => setTimeout(res, 200));
      expect(x.up.connections).toBe(0);
      const r = reading(t);
      t.write(get("/a", x.up.port));
      await new Promise((res) => setTimeout(res, 200));
      expect(x.up.connections).toBe(0);
      release(false);
      await r.closed;
      expect(r.text()).toBe("");
      await new Promise((res) => setTimeout(res, 200));
      expect(x.up.connections).toBe(0);
      expect(x.up.seen).toHaveLength(0);
    } finally {
      await x.close();
    }
  });
});
