import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDestroying, listenLoopback, testGate, upstream, type Upstream } from "../support/net.js";
import { connectThrough } from "../support/tls-client.js";
import { plainStart } from "../../src/net/plain-start.js";

// Plain HTTP inside an opaque CONNECT: a server that hosts several names at one address picks one by the Host
// header, so a tunnel opened to a name granted in full must not carry requests for a name whose grant is narrower
// (read: only) at the same address. Every name resolves to loopback through the test's table.

describe("plain HTTP inside an opaque tunnel", () => {
  let up: Upstream;
  let echo: Server;
  let closeEcho: () => Promise<void>;
  let E = 0;
  const names = { "api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"] };
  beforeAll(async () => {
    up = await upstream();
    // A client-first protocol that is not HTTP: each line comes back.
    echo = createServer((c) => {
      c.on("error", () => {});
      c.on("data", (d: Buffer) => c.write(Buffer.concat([Buffer.from("echo "), d])));
    });
    closeEcho = closeDestroying(echo);
    E = await listenLoopback(echo);
  });
  afterAll(async () => {
    await up?.close();
    await closeEcho?.();
  });

  const gate = (port: number, headerMs = 1500) => testGate([`read:api.test:${port}`, `other.test:${port}`, `127.0.0.1:${port}`], { names, limits: { headerMs } });

  /** CONNECT other.test (granted in full), then bytes sent as given (pieces with a pause between): all it got back. */
  const through = async (g: Awaited<ReturnType<typeof gate>>, port: number, pieces: (string | Buffer)[], pauseMs = 0, enough = 0): Promise<string> => {
    const { socket, answer } = await connectThrough(g.gate.socketPath, g.token, `other.test:${port}`);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    let got = "";
    socket.on("data", (d: Buffer) => ((got += d.toString("latin1")), enough && got.length >= enough && socket.destroy()));
    socket.on("error", () => {});
    socket.resume();
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    for (const [i, p] of pieces.entries()) {
      if (i && pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      if (!socket.destroyed) socket.write(p);
    }
    await Promise.race([closed, new Promise((r) => setTimeout(r, 2500))]);
    socket.destroy();
    return got;
  };

  it("a request naming another host at the tunnel's address is refused, in every spelling a lenient server might read; none reaches the server", async () => {
    const g = await gate(up.port);
    const P = up.port;
    const before = up.requests.length;
    try {
      const post = (host: string, eol = "\r\n", method = "POST", target = "/front") => `${method} ${target} HTTP/1.1${eol}Host: ${host}${eol}Content-Length: 1${eol}Connection: close${eol}${eol}x`;
      const tries: [string, (string | Buffer)[], number?][] = [
        ["plain", [post(`api.test:${P}`)]],
        ["leading empty lines", [`\r\n\r\n${post(`api.test:${P}`)}`]],
        ["lowercase method", [post(`api.test:${P}`, "\r\n", "post")]],
        ["bare LF", [post(`api.test:${P}`, "\n")]],
        ["absolute form", [post(`api.test:${P}`, "\r\n", "POST", `http://api.test:${P}/front`)]],
        ["in pieces", ["PO", "ST /front HTT", `P/1.1\r\nHost: api.test:${P}\r\nContent-Length: 1\r\n\r\nx`], 200],
        ["a method the gate does not know", [`FOO /front HTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 1\r\n\r\nx`]],
        ["h2c prior knowledge", [Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])])]],
        ["a tab for a space", [`POST\t/front\tHTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 1\r\n\r\nx`]],
      ];
      for (const [what, pieces, pause] of tries) {
        const got = await through(g, P, pieces, pause);
        expect(got, what).not.toMatch(/^HTTP\/1\.1 2/);
      }
      // Its own name first, then another on the same kept connection: the first only.
      const kept = await through(g, P, [`GET /own HTTP/1.1\r\nHost: other.test:${P}\r\n\r\n`, post(`api.test:${P}`)], 300);
      expect(kept).toMatch(/^HTTP\/1\.1 200/);
      expect(kept).toContain("ok GET /own");
      expect(up.requests.slice(before).map((r) => `${r.method} ${r.url} ${r.host}`)).toEqual([`GET /own other.test:${P}`]);
      // Each request inside is on the record, decided as a plain proxy request is; the tunnel says so.
      expect(g.events.some((e) => e.decision === "allowed" && e.method === "GET" && e.asked === `http://other.test:${P}/own`)).toBe(true);
      expect(g.events.filter((e) => e.code === "host-header").length).toBeGreaterThanOrEqual(4);
      const tunnels = g.events.filter((e) => e.method === "CONNECT" && e.outcome !== undefined);
      expect(tunnels.every((e) => e.reason?.includes("plain HTTP inside") && e.tls === undefined)).toBe(true);
    } finally {
      await g.close();
    }
  });

  it("a first line held open past the head deadline is refused, not spliced: what comes after never reaches the server", async () => {
    const g = await gate(up.port, 800);
    const before = up.requests.length;
    try {
      const got = await through(g, up.port, ["POST /slow", ` HTTP/1.1\r\nHost: api.test:${up.port}\r\nContent-Length: 1\r\n\r\nx`], 1200);
      expect(got).not.toMatch(/^HTTP\/1\.1 2/);
      expect(up.requests.slice(before)).toEqual([]);
      expect(g.events.find((e) => e.code === "head-timeout")?.reason).toContain("not complete within 800 ms");
    } finally {
      await g.close();
    }
  });

  it("a client-first protocol that is not HTTP (an SSH banner, a binary startup message) is spliced as before", async () => {
    const g = await gate(E);
    try {
      const banner = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
      expect(await through(g, E, [banner], 0, 5 + banner.length)).toBe(`echo ${banner}`);
      const startup = Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]);
      expect(Buffer.from(await through(g, E, [startup], 0, 5 + startup.length), "latin1").subarray(5)).toEqual(startup);
      expect(g.events.filter((e) => e.method === "CONNECT" && e.outcome !== undefined).every((e) => e.tls === "spliced")).toBe(true);
    } finally {
      await g.close();
    }
  });

  it("plainStart: what counts as the start of an HTTP request", () => {
    const b = (s: string) => Buffer.from(s, "latin1");
    expect(plainStart(b("GET / HTTP/1.1\r\n"))).toBe("http");
    expect(plainStart(b("\r\n get / http/1.0\n"))).toBe("http");
    expect(plainStart(b("GET / HTTP/1.1\0"))).toBe("http");
    expect(plainStart(b("GET / HT"))).toBe("http");
    expect(plainStart(b("x ".repeat(4600)))).toBe("http");
    expect(plainStart(b("x".repeat(9000)))).toBe("other");
    expect(plainStart(b("SSH-2.0-x y\r\n"))).toBe("other");
    expect(plainStart(b("PING\r\n"))).toBe("other");
    expect(plainStart(b("\0\0\0\x08"))).toBe("other");
    expect(plainStart(b("0032git-upload-pack /p.git\0host=x\0"))).toBe("other");
    expect(plainStart(b("po"))).toBe("partial");
    expect(plainStart(b("\r\n"))).toBe("partial");
    expect(plainStart(b("PATCH\t"))).toBe("http");
    expect(plainStart(b("PRI * HTTP/2.0\r\n"))).toBe("http");
    expect(plainStart(b("FOO /x HTTP/1.1\r\n"))).toBe("http");
    expect(plainStart(b("FOO /x HT"))).toBe("partial");
    expect(plainStart(b("go"))).toBe("other");
    expect(plainStart(b("abc"))).toBe("other");
  });
});

