import { mkdtempSync } from "node:fs";
import { createServer as createNetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer, TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EgressEvent } from "../../src/net/egress-gate.js";
import { createRunCa, type RunCa } from "../../src/net/tls-ca.js";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { type LenientRequest, listenLoopback, readLeniently, testGate, until } from "../support/net.js";
import { tlsThrough } from "../support/tls-client.js";
import { testCa, type TestCa } from "../support/tls.js";
import { runVak } from "../support/vak.js";

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

describe("an HTTP/1.0 client inside vak exec, through a terminated tunnel", () => {
  // curl -0 (and --http1.0) inside the sandbox, through a read: grant (so the gate terminates TLS), to an
  // HTTPS upstream on this machine's loopback that cuts or garbles its answer. An HTTP/1.0 client gets an
  // answer without a length as its data alone, ended by the connection's end; inside TLS a plain close is
  // such an end too (curl takes a TCP close without close_notify for one), so a cut answer must reach it as
  // a reset, and curl must fail.
  let ca: TestCa;
  let P = 0;
  let server: import("node:net").Server;
  const open = new Set<Socket>();
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** What the upstream answers each path with: pieces written one by one; then it ends cleanly (close_notify), resets its TCP connection, or waits. */
  const scripts = new Map<string, { pieces: string[]; then: "end" | "reset" | "wait" }>();
  const CHUNKED = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const UNTIL_CLOSE = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
  const data = "D".repeat(20_000);
  const big = `${data.length.toString(16)}\r\n${data}\r\n`;

  beforeAll(async () => {
    ca = await testCa();
    const { key, cert } = await ca.issue(["127.0.0.1"]);
    let connections = 0;
    // TLS over a TCP socket of the test's own, so that it can reset the connection under TLS.
    server = createNetServer((raw) => {
      open.add(raw);
      raw.on("close", () => open.delete(raw));
      raw.on("error", () => {});
      const t = new TLSSocket(raw, { isServer: true, key, cert, ALPNProtocols: ["http/1.1"] });
      t.on("error", () => {});
      readLeniently(t, ++connections, async (r) => {
        const script = scripts.get(r.line.split(" ")[1]!);
        if (!script) return void t.end("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        for (const p of script.pieces) {
          if (t.destroyed) return;
          t.write(p, "latin1");
          await sleep(30);
        }
        if (script.then === "end") t.end();
        else if (script.then === "reset") raw.resetAndDestroy();
      });
    });
    P = await listenLoopback(server);
  }, 30_000);
  afterAll(async () => {
    for (const s of open) s.destroy();
    await new Promise<void>((r) => server?.close(() => r()));
  });

  it("a cut or malformed answer without a length reaches curl -0 as a reset, never as a clean end of a shorter body", async () => {
    const cases: [string, { pieces: string[]; then: "end" | "reset" | "wait" }, string][] = [
      ["/cut-in-a-chunk", { pieces: [CHUNKED + big, "10\r\nabc"], then: "end" }, "a chunked answer that ends in the middle of a chunk"],
      ["/cut-after-a-chunk", { pieces: [CHUNKED + big], then: "end" }, "a chunked answer that ends before its last chunk"],
      ["/bare-lf", { pieces: [CHUNKED + big, "5\r\nhello\r\n0\n\r\n"], then: "wait" }, "a chunked answer with a bare LF after its last chunk"],
      ["/bad-size", { pieces: [CHUNKED + big, "zz\r\nhello\r\n"], then: "wait" }, "a chunked answer with a size that is not hex"],
      ["/data-too-long", { pieces: [CHUNKED + big, "5\r\nhello, world\r\n0\r\n\r\n"], then: "wait" }, "a chunk longer than its size"],
      ["/reset", { pieces: [UNTIL_CLOSE + data], then: "reset" }, "an answer delimited by the close, its TCP connection reset"],
      ["/reset-chunked", { pieces: [CHUNKED + big], then: "reset" }, "a chunked answer, its TCP connection reset"],
    ];
    const whole: [string, { pieces: string[]; then: "end" }, number][] = [
      ["/whole-chunked", { pieces: [CHUNKED + big, "5\r\nhello\r\n0\r\n\r\n"], then: "end" }, data.length + 5],
      ["/whole-until-close", { pieces: [UNTIL_CLOSE + data], then: "end" }, data.length],
    ];
    for (const [path, script] of [...cases, ...whole]) scripts.set(path, script);
    const ws = mkdtempSync(join(tmpdir(), "vak-tls-http10-"));
    // Each path twice: curl -0, which offers ALPN http/1.0, and curl --http1.0 without ALPN. curl's exit status
    // tells a cut it saw (56: a reset) from a clean end (0), which would make the part it got look whole.
    const clients = { alpn: "-0", "no-alpn": "--http1.0 --no-alpn" };
    const runs = [...cases, ...whole].flatMap(([path]) => Object.entries(clients).map(([client, flags]) => ({ path, client, flags })));
    // And through a provider endpoint (plain HTTP to the relay, carried by Node's client over TLS): curl -0 there too.
    const viaEndpoint = ["/cut-in-a-chunk", "/bad-size", "/reset", "/whole-chunked", "/whole-until-close"];
    const script = [
      ...runs.map(({ path, client, flags }) => `curl -s ${flags} -o /dev/null -w '${path} ${client} %{size_download} ' --max-time 10 https://127.0.0.1:${P}${path}; echo $?`),
      ...viaEndpoint.map((path) => `curl -s -0 -o /dev/null -w '${path} endpoint %{size_download} ' --max-time 10 "$UP${path}"; echo $?`),
    ].join("; ");
    const r = await runVak(["exec", "--json", "--ca-file", ca.file, "--allow-net", `read:127.0.0.1:${P}`, "--endpoint", `UP=https://127.0.0.1:${P}`, "--", "/bin/sh", "-c", script], { cwd: ws });
    const got = new Map(r.stdout.trim().split("\n").map((l) => l.split(" ")).map(([path, client, size, code]) => [`${path} ${client}`, { size: Number(size), code: Number(code) }]));
    const egress = (r.summary?.egress ?? []) as EgressEvent[];
    expect(egress.some((e) => e.method === "CONNECT" && e.tls === "terminated"), r.stderr.slice(-2000)).toBe(true);
    const ends = (path: string) => egress.filter((e) => e.outcome !== undefined && e.asked.endsWith(path)).map((e) => e.outcome);
    const through = (path: string) => [...Object.keys(clients), ...(viaEndpoint.includes(path) ? ["endpoint"] : [])];
    for (const [path, , what] of cases) {
      for (const client of through(path)) expect(got.get(`${path} ${client}`)?.code, `${what} (curl ${client}): ${JSON.stringify(got.get(`${path} ${client}`))}`).toBe(56);
      expect(ends(path), what).toEqual(Array(through(path).length).fill(expect.stringMatching(/^upstream failed: /)));
    }
    for (const [path, , size] of whole) {
      for (const client of through(path)) expect(got.get(`${path} ${client}`), `${path} (curl ${client})`).toEqual({ size, code: 0 });
      expect(ends(path), path).toEqual(Array(through(path).length).fill("completed"));
    }
  }, 120_000);
});
