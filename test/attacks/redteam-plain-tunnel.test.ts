import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { createServer as createNetServer } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDestroying, lenientUpstream, listenLoopback, rawUpstream, testGate, until, upstream, type Upstream } from "../support/net.js";
import { connectThrough } from "../support/tls-client.js";
import { plainStart } from "../../src/net/plain-start.js";

// Red team: plain HTTP inside an opaque CONNECT (connect.ts firstBytes, plain-start.ts, proxy.ts with origin.plain).
// The tunnel goes to other.test (granted in full); api.test (read: only) is at the same address, as on a CDN.
// Every attack tries to get a request that names api.test, or that the gate never decided, to the server.
// Names resolve only through the gate's test table; every server is on 127.0.0.1.

const names = { "api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"] };
const gateFor = (port: number, headerMs = 1500, more: Parameters<typeof testGate>[1] = {}) =>
  testGate([`read:api.test:${port}`, `other.test:${port}`, `127.0.0.1:${port}`], { names, limits: { headerMs }, ...more });
type Gate = Awaited<ReturnType<typeof gateFor>>;

/** CONNECT other.test, then the pieces as given (a pause between): all that came back. */
async function through(g: Gate, port: number, pieces: (string | Buffer)[], pauseMs = 0, waitMs = 2000, target = `other.test:${port}`): Promise<string> {
  const { socket, answer } = await connectThrough(g.gate.socketPath, g.token, target);
  expect(answer).toMatch(/^HTTP\/1\.1 200/);
  let got = "";
  socket.on("data", (d: Buffer) => (got += d.toString("latin1")));
  socket.on("error", () => {});
  socket.resume();
  const closed = new Promise<void>((r) => socket.once("close", () => r()));
  for (const [i, p] of pieces.entries()) {
    if (i && pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
    if (!socket.destroyed) socket.write(typeof p === "string" ? Buffer.from(p, "latin1") : p);
  }
  await Promise.race([closed, new Promise((r) => setTimeout(r, waitMs))]);
  socket.destroy();
  return got;
}

// Python's http.server (and wsgiref, built on it): the request line is split on str.split()'s whitespace, which
// takes \v, \f, \x1c-\x1f, \x85 and \xa0 too, leading ones dropped; any method with a do_ handler is served.
const PY_SERVER = String.raw`
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n: self.rfile.read(n)
        body = ("py %s %s\n" % (self.command, self.headers.get("Host"))).encode("latin-1")
        sys.stdout.write(body.decode("latin-1")); sys.stdout.flush()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = do_FOO = do_BAN = do_UPDATE = do_LABEL = answer
    def log_message(self, *a): pass
s = HTTPServer(("127.0.0.1", 0), H)
sys.stdout.write("port %d\n" % s.server_address[1]); sys.stdout.flush()
s.serve_forever()
`;

function hasPython(): boolean {
  try {
    execFileSync("python3", ["-c", "import http.server"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe("red team: plain HTTP inside an opaque tunnel", () => {
  let up: Upstream;
  let py: ChildProcess | undefined;
  let pyPort = 0;
  let pySeen = "";
  beforeAll(async () => {
    up = await upstream();
    if (!hasPython()) throw new Error("these tests need python3 with http.server, a lenient server to attack (.ci/run installs python3)");
    const child = spawn("python3", ["-c", PY_SERVER], { stdio: ["ignore", "pipe", "ignore"] });
    py = child;
    pyPort = await new Promise<number>((resolve, reject) => {
      child.stdout!.on("data", (d: Buffer) => {
        pySeen += d.toString("latin1");
        const m = /^port (\d+)\n/.exec(pySeen);
        if (m && !pyPort) resolve(Number(m[1]));
      });
      child.once("exit", () => reject(new Error("the python server exited")));
    });
  });
  afterAll(async () => {
    await up?.close();
    if (py?.pid !== undefined && py.exitCode === null) process.kill(py.pid);
  });

  it("a request line split, or led, by whitespace a lenient server splits on (\\x1c-\\x1f, \\v, \\f, \\x85, \\xa0) is not spliced to a server that reads it (Python's http.server)", async () => {
    const g = await gateFor(pyPort);
    const P = pyPort;
    const seenBefore = pySeen.length;
    try {
      const req = (sep: string, lead = "") => `${lead}POST${sep}/front${sep}HTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 1\r\n\r\nx`;
      const tries: [string, (string | Buffer)[], number?][] = [];
      for (const c of ["\x1c", "\x1d", "\x1e", "\x1f", "\v", "\f", "\x85", "\xa0"]) {
        const name = `0x${c.charCodeAt(0).toString(16)}`;
        tries.push([`${name} for a space`, [req(c)]], [`${name} before the method`, [req(" ", c)]], [`${name} alone, then the request`, [c, req(" ")], 300]);
      }
      for (const [what, pieces, pause] of tries) {
        const got = await through(g, P, pieces, pause, 1500);
        expect(got, what).not.toContain("py POST");
      }
      expect(pySeen.slice(seenBefore)).toBe("");
    } finally {
      await g.close();
    }
  });

  it("a method the gate does not know, with a control byte in its target before HTTP/, is not spliced to a server that serves the method", async () => {
    const g = await gateFor(pyPort);
    const P = pyPort;
    const seenBefore = pySeen.length;
    try {
      for (const c of ["\x01", "\x00", "\x7f", "\x1b"]) {
        const got = await through(g, P, [`FOO /front${c} HTTP/1.1\r\nHost: api.test:${P}\r\n\r\n`], 0, 1000);
        expect(got, `0x${c.charCodeAt(0).toString(16)}`).not.toContain("py FOO");
      }
      expect(pySeen.slice(seenBefore)).toBe("");
    } finally {
      await g.close();
    }
  });

  it("a registered or common method the gate's parser does not know (BAN, UPDATE, LABEL), its first letters sent alone, is not spliced to a server that serves it", async () => {
    const g = await gateFor(pyPort, 800);
    const P = pyPort;
    const seenBefore = pySeen.length;
    try {
      for (const [first, rest] of [["BA", "N"], ["UPD", "ATE"], ["L", "ABEL"]] as const) {
        const got = await through(g, P, [first, `${rest} /front HTTP/1.1\r\nHost: api.test:${P}\r\n\r\n`], 300, 1200);
        expect(got, first + rest).not.toContain("py ");
      }
      expect(pySeen.slice(seenBefore)).toBe("");
    } finally {
      await g.close();
    }
  });

  it("a STOMP client's first frame (CONNECT alone on its line) goes through an opaque tunnel as before, not refused as HTTP", async () => {
    const echo = createNetServer((c) => (c.on("error", () => {}), c.on("data", (d: Buffer) => c.write(d))));
    const close = closeDestroying(echo);
    const E = await listenLoopback(echo);
    const g = await gateFor(E);
    try {
      const frame = "CONNECT\naccept-version:1.2\nhost:other.test\n\n\0";
      expect(await through(g, E, [frame], 0, 500)).toBe(frame);
      await until(() => g.events.some((e) => e.method === "CONNECT" && e.outcome !== undefined), "the tunnel's end is recorded");
      expect(g.events.filter((e) => e.method === "CONNECT" && e.outcome !== undefined).map((e) => e.tls)).toEqual(["spliced"]);
    } finally {
      await g.close();
      await close();
    }
  });

  it("a flood of blank lines or blanks before any method is cut at the head's size, not held and buffered until the deadline", async () => {
    const g = await gateFor(up.port, 4000);
    try {
      for (const blank of ["\r\n", " ", "\x1c"]) {
        const started = Date.now();
        const got = await through(g, up.port, [blank.repeat(40_000), blank.repeat(40_000)], 100, 3000);
        expect(Date.now() - started, JSON.stringify(blank)).toBeLessThan(2500);
        expect(got, JSON.stringify(blank)).toMatch(/^HTTP\/1\.1 4\d\d/);
      }
      expect(g.events.some((e) => e.code === "head-timeout")).toBe(false);
    } finally {
      await g.close();
    }
  });

  it("plainStart: a lenient server's whitespace is whitespace", () => {
    const b = (s: string) => Buffer.from(s, "latin1");
    for (const c of ["\x1c", "\x1f", "\v", "\f", "\x85", "\xa0"]) {
      expect(plainStart(b(`POST${c}/ HTTP/1.1\r\n`))).toBe("http");
      expect(plainStart(b(`${c}POST / HTTP/1.1\r\n`))).toBe("http");
      expect(plainStart(b(c))).toBe("partial");
      expect(plainStart(b(`FOO${c}/${c}HTTP/1.1\r\n`))).toBe("http");
    }
    // Client-first protocols still go on at once.
    expect(plainStart(b("go"))).toBe("other");
    expect(plainStart(b("ping"))).toBe("other");
    expect(plainStart(b("PING\r\n"))).toBe("other");
    expect(plainStart(b("SSH-2.0-OpenSSH_9.2p1"))).toBe("other");
    expect(plainStart(b("\0\0\0\x08\x04\xd2\x16\x2f"))).toBe("other");
    expect(plainStart(b("\0\0\0\x0b"))).toBe("other");
    // A method-like first word: its line is read to its end, whatever bytes it holds.
    expect(plainStart(b("FOO /x\x01 HTTP/1.1\r\n"))).toBe("http");
    expect(plainStart(b("FOO /x\x01"))).toBe("partial");
    expect(plainStart(b("AMQP\0\0\x09\x01"))).toBe("other");
    // STOMP's first frame: a method name alone on its line is no request line.
    expect(plainStart(b("CONNECT\naccept-version:1.2\nhost:x\n\n\0"))).toBe("other");
    expect(plainStart(b("CONNECT\r\naccept-version:1.2\r\n\r\n\0"))).toBe("other");
    expect(plainStart(b("GET\r/ HTTP/1.1\r\n"))).toBe("http");
    expect(plainStart(b("GET\r"))).toBe("partial");
    expect(plainStart(b("\r\n".repeat(5000)))).toBe("http");
  });

  it("a client silent past the head deadline, then a request naming api.test: not spliced, decided as any other", async () => {
    const g = await gateFor(up.port, 600);
    const P = up.port;
    const before = up.requests.length;
    try {
      // Nothing for longer than the head deadline (the server speaks not first either), then plain HTTP for api.test.
      const got = await through(g, P, ["", `POST /late HTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx`], 1000, 1500);
      expect(got).not.toContain("ok POST /late");
      expect(up.requests.slice(before).filter((r) => r.host?.startsWith("api.test"))).toEqual([]);
      expect(g.events.some((e) => e.code === "host-header" && e.asked === `http://other.test:${P}/late`)).toBe(true);
      // Its own host, as late: served.
      const own = await through(g, P, ["", `GET /late-own HTTP/1.1\r\nHost: other.test:${P}\r\nConnection: close\r\n\r\n`], 1000, 1500);
      expect(own).toContain("ok GET /late-own");
    } finally {
      await g.close();
    }
  });

  it("a client silent past the head deadline, then a TLS ClientHello asking for api.test: refused, nothing of it reaches the server", async () => {
    const raw = await rawUpstream();
    const g = await gateFor(raw.port, 600);
    try {
      const { socket, answer } = await connectThrough(g.gate.socketPath, g.token, `other.test:${raw.port}`);
      expect(answer).toMatch(/^HTTP\/1\.1 200/);
      socket.on("error", () => {});
      await new Promise((r) => setTimeout(r, 1000));
      const t = tlsConnect({ socket, servername: "api.test", rejectUnauthorized: false });
      t.on("error", () => {});
      await new Promise((r) => setTimeout(r, 800));
      t.destroy();
      socket.destroy();
      expect(raw.received()).not.toContain("api.test");
      expect(g.events.some((e) => e.code === "sni-mismatch")).toBe(true);
    } finally {
      await g.close();
      await raw.close();
    }
  });

  it("a first byte, then the rest of the head spread over nearly two head deadlines: the head is cut at one", async () => {
    const g = await gateFor(up.port, 800);
    const P = up.port;
    const before = up.requests.length;
    try {
      const got = await through(g, P, ["P", `OST /slow2 HTTP/1.1\r\nHost: other.test:${P}\r\nContent-Length: 0\r\n`, "Connection: close\r\n\r\n"], 650, 1500);
      expect(got).not.toContain("ok POST /slow2");
      expect(up.requests.slice(before)).toEqual([]);
    } finally {
      await g.close();
    }
  });

  it("request smuggling inside the tunnel (CL+TE, two lengths, TE obfuscated, chunk extensions, underscores): no request naming api.test reaches a lenient server", async () => {
    const lenient = await lenientUpstream();
    const P = lenient.port;
    const g = await gateFor(P);
    try {
      const inner = `POST /smuggled HTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 0\r\n\r\n`;
      const h = `POST /front HTTP/1.1\r\nHost: other.test:${P}\r\n`;
      const chunkedInner = `0\r\n\r\n${inner}`;
      const tries: [string, string][] = [
        ["CL and TE", `${h}Content-Length: ${chunkedInner.length}\r\nTransfer-Encoding: chunked\r\n\r\n${chunkedInner}`],
        ["TE and CL", `${h}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n${chunkedInner}`],
        ["two lengths", `${h}Content-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`],
        ["one length listed twice", `${h}Content-Length: 0, ${inner.length}\r\n\r\n${inner}`],
        ["TE with a space before the colon", `${h}Transfer-Encoding : chunked\r\nContent-Length: ${chunkedInner.length}\r\n\r\n${chunkedInner}`],
        ["TE xchunked", `${h}Transfer-Encoding: xchunked\r\nContent-Length: ${chunkedInner.length}\r\n\r\n${chunkedInner}`],
        ["TE chunked twice", `${h}Transfer-Encoding: chunked, chunked\r\n\r\n${chunkedInner}`],
        ["TE in a second header", `${h}Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n${chunkedInner}`],
        ["TE folded", `${h}Transfer-Encoding:\r\n chunked\r\nContent-Length: ${chunkedInner.length}\r\n\r\n${chunkedInner}`],
        ["Transfer_Encoding", `${h}Transfer_Encoding: chunked\r\nContent-Length: ${chunkedInner.length}\r\n\r\n${chunkedInner}`],
        ["Content_Length", `${h}Content_Length: ${inner.length}\r\n\r\n${inner}`],
        ["a chunk extension hiding a LF", `${h}Transfer-Encoding: chunked\r\n\r\n5;x\n0\r\n\r\n${inner}\r\n0\r\n\r\n`],
        ["a chunk size with a plus", `${h}Transfer-Encoding: chunked\r\n\r\n+0\r\n\r\n${inner}`],
        ["an HTTP/1.0 chunked body", `POST /front HTTP/1.0\r\nHost: other.test:${P}\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n${chunkedInner}`],
        ["a bare LF ending the head", `${h}Content-Length: ${inner.length}\n\n${inner}`],
      ];
      for (const [what, bytes] of tries) {
        await through(g, P, [bytes], 0, 1200);
        expect(lenient.requests.filter((r) => (r.headers.host ?? "").startsWith("api.test")).map((r) => r.line), what).toEqual([]);
      }
      // Whatever did reach the server was sent with the tunnel's own Host only.
      expect(lenient.requests.every((r) => r.headers.host === `other.test:${P}`)).toBe(true);
    } finally {
      await g.close();
      await lenient.close();
    }
  });

  it("pipelined requests in one write, the 2nd and 3rd naming api.test or no host: only the first reaches the server", async () => {
    const g = await gateFor(up.port);
    const P = up.port;
    const before = up.requests.length;
    try {
      const got = await through(g, P, [
        `GET /one HTTP/1.1\r\nHost: other.test:${P}\r\n\r\nPOST /two HTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 0\r\n\r\nPOST /three HTTP/1.1\r\nContent-Length: 0\r\n\r\n`,
      ]);
      expect(got).toContain("ok GET /one");
      expect(got).not.toContain("/two");
      expect(up.requests.slice(before).map((r) => `${r.method} ${r.url} ${r.host}`)).toEqual([`GET /one other.test:${P}`]);
      expect(g.events.some((e) => e.code === "host-header" && e.asked === `http://other.test:${P}/two`)).toBe(true);
    } finally {
      await g.close();
    }
  });

  it("Host spellings (none, HTTP/1.0 keep-alive without one, case, trailing dot, userinfo, the other name with this port, an absolute URL with another Host): the server gets the target's Host or nothing", async () => {
    const g = await gateFor(up.port);
    const P = up.port;
    const before = up.requests.length;
    try {
      const tries: [string, string][] = [
        ["no Host", `GET /a HTTP/1.1\r\n\r\n`],
        ["HTTP/1.0 keep-alive, no Host", `GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n`],
        ["upper case", `GET /c HTTP/1.1\r\nHost: OTHER.TEST:${P}\r\nConnection: close\r\n\r\n`],
        ["trailing dot", `GET /d HTTP/1.1\r\nHost: other.test.:${P}\r\nConnection: close\r\n\r\n`],
        ["userinfo", `GET /e HTTP/1.1\r\nHost: api.test@other.test:${P}\r\nConnection: close\r\n\r\n`],
        ["userinfo the other way", `GET /f HTTP/1.1\r\nHost: other.test:${P}@api.test:${P}\r\nConnection: close\r\n\r\n`],
        ["no port", `GET /g HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n`],
        ["absolute URL to the target, Host api.test", `GET http://other.test:${P}/h HTTP/1.1\r\nHost: api.test:${P}\r\nConnection: close\r\n\r\n`],
        ["absolute URL to api.test, Host the target", `GET http://api.test:${P}/i HTTP/1.1\r\nHost: other.test:${P}\r\nConnection: close\r\n\r\n`],
        ["two Hosts", `GET /j HTTP/1.1\r\nHost: other.test:${P}\r\nHost: api.test:${P}\r\nConnection: close\r\n\r\n`],
        ["Host with a comma", `GET /k HTTP/1.1\r\nHost: other.test:${P}, api.test:${P}\r\nConnection: close\r\n\r\n`],
        ["X-Forwarded-Host", `POST /l HTTP/1.1\r\nHost: other.test:${P}\r\nX-Forwarded-Host: api.test:${P}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`],
      ];
      for (const [what, bytes] of tries) await through(g, P, [bytes], 0, 1200).then((got) => expect(got, what).toMatch(/^HTTP\/1\.1 \d{3}/));
      const reached = up.requests.slice(before);
      expect(reached.every((r) => r.host === `other.test:${P}`), JSON.stringify(reached)).toBe(true);
    } finally {
      await g.close();
    }
  });

  it("Expect: 100-continue, and a WebSocket the server refuses (200, connection kept): the next request on it is decided, api.test's refused", async () => {
    const lenient = await lenientUpstream((r) => {
      const text = `seen ${r.line.split(" ")[1]}`;
      return `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
    });
    const P = lenient.port;
    const g = await gateFor(P);
    try {
      const expect100 = await through(g, P, [`POST /c HTTP/1.1\r\nHost: other.test:${P}\r\nExpect: 100-continue\r\nContent-Length: ${44 + String(P).length}\r\n\r\n`, `GET /x HTTP/1.1\r\nHost: api.test:${P}\r\n\r\n\r\n\r\n\r\n\r\n`], 300);
      expect(expect100).toContain("seen /c");
      const ws = await through(g, P, [
        `GET /ws HTTP/1.1\r\nHost: other.test:${P}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
        `POST /after HTTP/1.1\r\nHost: api.test:${P}\r\nContent-Length: 0\r\n\r\n`,
      ], 300);
      expect(ws).toContain("seen /ws");
      expect(lenient.requests.filter((r) => (r.headers.host ?? "").startsWith("api.test"))).toEqual([]);
      expect(lenient.requests.map((r) => r.line.split(" ")[1])).not.toContain("/after");
    } finally {
      await g.close();
      await lenient.close();
    }
  });

  it("the bytes of requests inside a plain tunnel count against the connection's budget, the first ones once; each request is on the record", async () => {
    const lenient = await lenientUpstream();
    const P = lenient.port;
    const g = await gateFor(P, 1500, { limits: { headerMs: 1500, bytesPerConnection: 64 * 1024 } });
    try {
      const body = "b".repeat(200 * 1024);
      await through(g, P, [`POST /big HTTP/1.1\r\nHost: other.test:${P}\r\nContent-Length: ${body.length}\r\n\r\n`, body], 50, 1500);
      expect(lenient.requests.filter((r) => r.body.length === body.length)).toEqual([]);
      const big = g.events.find((e) => e.asked === `http://other.test:${P}/big` && e.outcome !== undefined);
      expect(big?.outcome).toMatch(/limit of 65536 bytes/);
      // Within the budget: three requests on one tunnel, three decisions, each with its outcome.
      const three = await through(g, P, [[1, 2, 3].map((n) => `GET /n${n} HTTP/1.1\r\nHost: other.test:${P}\r\n\r\n`).join("")], 0, 1000);
      expect(three.match(/seen \/n\d/g)).toEqual(["seen /n1", "seen /n2", "seen /n3"]);
      for (const n of [1, 2, 3]) expect(g.events.filter((e) => e.asked === `http://other.test:${P}/n${n}` && e.decision === "allowed").length, `n${n}`).toBe(2);
    } finally {
      await g.close();
      await lenient.close();
    }
  });
});
