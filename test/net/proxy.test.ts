import { createHash, randomBytes } from "node:crypto";
import { createServer as createHttpServer, type IncomingMessage } from "node:http";
import { connect, createServer as createNetServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collect, gateClient, listenLoopback, rawGate, rawUpstream, type RawUpstream, statusOf, testGate, until } from "../support/net.js";

// Attacks on the proxying itself: what a hostile client or a hostile upstream
// sends through a request that the grants allow. The gate runs in-process;
// every upstream is a loopback server the test owns, and the connector
// refuses anything else before a socket opens.

/** Writes as fast as the peer takes bytes, until it stops taking them or max bytes went; returns how many it took. */
async function pushUntilStalled(s: Socket, max: number): Promise<number> {
  const block = Buffer.alloc(1 << 20, 0x78);
  let pushed = 0;
  while (pushed < max && !s.destroyed) {
    if (!s.writableNeedDrain) {
      s.write(block);
      pushed += block.length;
      continue;
    }
    // A second without drain is a stall: the only use of time here, to end the attempt.
    const drained = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 1000);
      s.once("drain", () => (clearTimeout(timer), resolve(true)));
      s.once("close", () => (clearTimeout(timer), resolve(false)));
    });
    if (!drained) break;
  }
  return pushed - s.writableLength;
}

/** A Node HTTP upstream that records the requests it parsed, bodies included. */
async function parsingUpstream() {
  const seen: { method: string; url: string; headers: string[]; body: string }[] = [];
  const server = createHttpServer((req: IncomingMessage, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString("latin1")));
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.rawHeaders, body });
      res.end(`ok ${req.method} ${req.url}\n`);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { port: (server.address() as { port: number }).port, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

describe("a request body", () => {
  it("that the upstream never reads stays in the kernel, not in vak's memory", async () => {
    const up = await rawUpstream({ read: false });
    // A lookup that takes as long as a DNS answer does: the body starts to arrive before the check is done.
    const resolver = () => new Promise<string[]>((r) => setTimeout(() => r(["127.0.0.1"]), 20));
    const t = await testGate([`slow.test:${up.port}`, `127.0.0.1:${up.port}`], { resolver });
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const before = process.memoryUsage().arrayBuffers;
      s.write(`POST http://slow.test:${up.port}/ HTTP/1.1\r\nHost: slow.test:${up.port}\r\nContent-Length: 1000000000\r\n\r\n`);
      const pushed = await pushUntilStalled(s, 512 << 20);
      const grown = process.memoryUsage().arrayBuffers - before;
      s.destroy();
      // Kernel buffers on both sides and one read's worth in the gate: a few MB, never the body.
      expect(pushed).toBeLessThan(64 << 20);
      expect(grown).toBeLessThan(64 << 20);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("counts against the connection's byte limit as it is received", async () => {
    const up = await rawUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { bytesPerConnection: 1 << 20 } });
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const got = collect(s);
      s.write(`POST http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nContent-Length: ${8 << 20}\r\n\r\n`);
      await pushUntilStalled(s, 8 << 20);
      await got.closed;
      expect(up.received().length).toBeLessThan(4 << 20);
      await until(() => t.events.some((e) => e.outcome?.includes("limit of 1048576 bytes")), "the limit is on the record");
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("that the upstream refuses before reading gets the client the answer, and the connection ends", async () => {
    const up = await rawUpstream({ answer: (soFar) => (soFar.includes("\r\n\r\n") ? "HTTP/1.1 413 Too Large\r\nContent-Length: 3\r\n\r\nbig" : undefined) });
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { headerMs: 300 } });
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const got = collect(s);
      s.write(`POST http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nContent-Length: 1000000\r\n\r\npart of it`);
      await got.closed;
      expect(statusOf(got.text())).toBe(413);
      expect(got.text()).toMatch(/\r\n\r\nbig$/);
      await until(() => t.events.some((e) => e.outcome?.includes("answered before the whole request body was sent")), "how it ended is on the record");
    } finally {
      await t.close();
      await up.close();
    }
  });

  it.each([
    ["Transfer-Encoding: chunked on a GET", (smuggled: string) => `Transfer-Encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`],
    ["Content-Length named in Connection", (smuggled: string) => `Connection: content-length\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`],
  ])("with %s cannot carry a second, unchecked request", async (_t, body) => {
    const up = await parsingUpstream();
    const P = up.port;
    const t = await testGate([`127.0.0.1:${P}`]);
    try {
      const smuggled = `DELETE /smuggled HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n\r\n`;
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${P}/checked HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n${body(smuggled)}`, { waitMs: 1000 });
      expect(statusOf(r)).toBe(200);
      expect(up.seen.map((q) => `${q.method} ${q.url}`)).toEqual(["GET /checked"]);
      expect(up.seen[0]!.body).toBe(smuggled);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("is refused on a read-only grant, so a checked GET carries nothing out", async () => {
    const up = await parsingUpstream();
    const P = up.port;
    const t = await testGate([`read:127.0.0.1:${P}`]);
    try {
      const smuggled = `DELETE /smuggled HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n\r\n`;
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${P}/ HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\nTransfer-Encoding: chunked\r\n\r\n${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`);
      expect(statusOf(r)).toBe(403);
      expect(r).toContain("a request body is a write, whatever its method; the grant read:127.0.0.1:");
      expect(up.seen).toEqual([]);
    } finally {
      await t.close();
      await up.close();
    }
  });
});

describe("request headers", () => {
  let up: RawUpstream;
  let t: Awaited<ReturnType<typeof testGate>>;
  beforeAll(async () => {
    up = await rawUpstream({ answer: (soFar) => (soFar.includes("\r\n\r\n") ? OK : undefined) });
    // The name resolves to loopback, which only a literal grant reaches.
    t = await testGate([`granted.test:${up.port}`, `127.0.0.1:${up.port}`], { names: { "granted.test": ["127.0.0.1"], "evil.test": ["127.0.0.1"] } });
  });
  afterAll(async () => {
    await t.close();
    await up.close();
  });
  const H = () => `granted.test:${up.port}`;

  it.each([
    ["in another case", "hOST: evil.test"],
    ["in the same case", "Host: evil.test"],
    ["with the same value", "HOST: granted.test:PORT"],
  ])("a second Host header %s is refused before anything is sent", async (_t, second) => {
    const before = up.received().length;
    const r = await rawGate(t.gate.socketPath, t.token, `GET http://${H()}/x HTTP/1.1\r\nHost: ${H()}\r\n${second.replace("PORT", String(up.port))}\r\n\r\n`);
    expect(statusOf(r)).toBe(400);
    expect(r).toContain("more than one Host header");
    expect(up.received().length).toBe(before);
  });

  it("the upstream gets exactly one Host, the one that was checked, even when Connection names it", async () => {
    const before = up.received().length;
    const r = await rawGate(t.gate.socketPath, t.token, `GET http://${H()}/h HTTP/1.1\r\nHost: GRANTED.test.:${up.port}\r\nConnection: host, close\r\n\r\n`);
    expect(statusOf(r)).toBe(200);
    const sent = up.received().slice(before);
    expect(sent.match(/^host:.*$/gim)).toEqual([`Host: ${H()}`]);
  });

  it("header names that are Object.prototype's own (__proto__, constructor, toString) pass through as plain headers", async () => {
    const before = up.received().length;
    const r = await rawGate(t.gate.socketPath, t.token, `GET http://${H()}/p HTTP/1.1\r\nHost: ${H()}\r\n__proto__: a\r\nconstructor: b\r\ntoString: c\r\nConnection: close\r\n\r\n`);
    expect(statusOf(r)).toBe(200);
    const sent = up.received().slice(before);
    for (const h of ["__proto__: a", "constructor: b", "toString: c"]) expect(sent).toContain(`\r\n${h}\r\n`);
  });

  it("a head sent one line at a time, slower than the header deadline allows, is cut off", async () => {
    const slow = await testGate([`granted.test:${up.port}`, `127.0.0.1:${up.port}`], { names: { "granted.test": ["127.0.0.1"] }, limits: { headerMs: 300 } });
    try {
      const s = await gateClient(slow.gate.socketPath, slow.token);
      const got = collect(s);
      s.write(`GET http://${H()}/slow HTTP/1.1\r\nHost: ${H()}\r\n`);
      // Each line keeps the connection from idling; the head as a whole must still be done in time.
      let ended = false;
      void got.closed.then(() => (ended = true));
      for (let i = 0; i < 50 && !ended; i++) {
        s.write(`X-Line-${i}: x\r\n`);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(ended).toBe(true);
      expect(slow.events).toContainEqual(expect.objectContaining({ code: "head-timeout", decision: "denied" }));
    } finally {
      await slow.close();
    }
  });

  it("a client that shuts down its sending side after the request still gets the answer", async () => {
    const s = await gateClient(t.gate.socketPath, t.token);
    const got = collect(s);
    s.end(`GET http://${H()}/half HTTP/1.1\r\nHost: ${H()}\r\n\r\n`);
    await got.closed;
    expect(statusOf(got.text())).toBe(200);
    expect(got.text()).toMatch(/\r\n\r\nok$/);
  });
});

describe("a hostile upstream", () => {
  it.each([
    ["status 000", "HTTP/1.1 000 X\r\nContent-Length: 2\r\n\r\nok"],
    ["status 099", "HTTP/1.1 099 X\r\nContent-Length: 2\r\n\r\nok"],
    ["101 Switching Protocols to a plain request", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nok"],
  ])("answering %s gets the client a 502 and stops nothing else", async (_t, answer) => {
    const up = await rawUpstream({ answer: (soFar) => (soFar.includes("\r\n\r\n") ? answer : undefined) });
    const good = await rawUpstream({ answer: (soFar) => (soFar.includes("\r\n\r\n") ? OK : undefined) });
    const t = await testGate([`127.0.0.1:${up.port}`, `127.0.0.1:${good.port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
      expect(statusOf(r)).toBe(502);
      await until(() => t.events.some((e) => e.outcome?.startsWith("upstream failed")), "the failure is on the record");
      const next = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${good.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${good.port}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(next)).toBe(200);
    } finally {
      await t.close();
      await up.close();
      await good.close();
    }
  });

  it("response header names that are Object.prototype's own reach the client unchanged", async () => {
    const up = await rawUpstream({ answer: (soFar) => (soFar.includes("\r\n\r\n") ? "HTTP/1.1 200 OK\r\n__proto__: x\r\nconstructor: y\r\ntoString: z\r\nContent-Length: 2\r\n\r\nok" : undefined) });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r)).toBe(200);
      for (const h of ["__proto__: x", "constructor: y", "toString: z"]) expect(r).toContain(`\r\n${h}\r\n`);
    } finally {
      await t.close();
      await up.close();
    }
  });
});

describe("pipelining", () => {
  it("many requests sent at once on one connection open one upstream connection at a time", async () => {
    const up = await rawUpstream(); // never answers
    const P = up.port;
    const t = await testGate([`read:127.0.0.1:${P}`], { limits: { idleMs: 300 } });
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const got = collect(s);
      s.write(Array.from({ length: 50 }, (_, i) => `GET http://127.0.0.1:${P}/${i} HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n\r\n`).join(""));
      // The first request's upstream goes idle and fails; the connection ends with it.
      await got.closed;
      expect(up.connections).toBe(1);
    } finally {
      await t.close();
      await up.close();
    }
  });
});

describe("the record of allowed requests", () => {
  it("an allowed request is on the record before the upstream gets it", async () => {
    const up = await rawUpstream(); // never answers
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      s.write(`GET http://127.0.0.1:${up.port}/first HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
      await until(() => up.received().includes("/first"), "the upstream gets the request");
      expect(t.events).toContainEqual(expect.objectContaining({ decision: "allowed", asked: `http://127.0.0.1:${up.port}/first`, address: "127.0.0.1" }));
      s.destroy();
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a client that leaves in the middle of a response is recorded, and its upstream request is aborted", async () => {
    const block = Buffer.alloc(1 << 16, 0x61).toString("latin1");
    const up = await rawUpstream({
      answer: (soFar, s) => {
        if (!soFar.endsWith("\r\n\r\n")) return undefined;
        // An endless body, sent as fast as it is taken.
        const more = () => {
          while (!s.destroyed && s.write(block, "latin1"));
        };
        s.on("drain", more);
        setImmediate(more);
        return "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n";
      },
    });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      s.write(`GET http://127.0.0.1:${up.port}/endless HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
      await new Promise((r) => s.once("data", r));
      s.destroy();
      await until(() => up.connections === 1 && up.open === 0, "the upstream connection is closed");
      await until(() => t.events.some((e) => e.asked.endsWith("/endless") && e.outcome === "the client connection closed"), "the client's leaving is on the record");
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a tunnel whose client half-closes and leaves is recorded with its bytes", async () => {
    const up = await rawUpstream({ answer: (soFar, s) => (soFar.endsWith("bye") ? (s.end("cya"), undefined) : undefined) });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const got = collect(s);
      s.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
      await until(() => got.text().includes("200 Connection Established"), "the tunnel opens");
      s.end("hello, bye");
      await got.closed;
      expect(got.text()).toMatch(/cya$/);
      await until(() => t.events.some((e) => e.method === "CONNECT" && e.outcome !== undefined), "the tunnel's end is on the record");
      expect(t.events.find((e) => e.method === "CONNECT" && e.outcome !== undefined)).toMatchObject({ outcome: "completed", bytesUp: 10, bytesDown: 3 });
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a request whose decision cannot be recorded is not sent", async () => {
    const up = await rawUpstream({ answer: () => OK });
    const full = () => {
      throw new Error("the journal is full");
    };
    const t = await testGate([`127.0.0.1:${up.port}`], { onEvent: (e) => e.decision === "allowed" && full() });
    try {
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/unrecorded HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
      expect(r).toBe("");
      expect(up.connections).toBe(0);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it.each(["GET", "CONNECT"])("%s: nothing is connected until the allowed request's record is durable, and nothing if it cannot be", async (method) => {
    const up = await rawUpstream({ answer: () => OK });
    let release: (ok: boolean) => void = () => {};
    const t = await testGate([`127.0.0.1:${up.port}`], {
      durable: () => new Promise<void>((resolve, reject) => (release = (ok) => (ok ? resolve() : reject(new Error("the disk is full"))))),
    });
    const request = method === "GET" ? `GET http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n` : `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`;
    try {
      const first = rawGate(t.gate.socketPath, t.token, request, { waitMs: 1000 });
      await until(() => t.events.some((e) => e.decision === "allowed"), "the request is recorded");
      await new Promise((r) => setTimeout(r, 100));
      expect(up.connections).toBe(0); // recorded, not yet durable: not connected
      release(false);
      expect(await first).toBe("");
      expect(up.connections).toBe(0);
      const second = rawGate(t.gate.socketPath, t.token, request, { waitMs: 1000 });
      await until(() => t.events.filter((e) => e.decision === "allowed" && e.outcome === undefined).length === 2, "the second is recorded");
      release(true);
      await until(() => up.connections === 1, "the durable one is connected");
      await second;
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("every event is on the record by the time the gate has closed", async () => {
    const up = await rawUpstream(); // never answers
    const t = await testGate([`127.0.0.1:${up.port}`]);
    const s = await gateClient(t.gate.socketPath, t.token);
    s.write(`GET http://127.0.0.1:${up.port}/hanging HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
    await until(() => up.received().includes("/hanging"), "the upstream gets the request");
    await t.close();
    await up.close();
    expect(t.events.filter((e) => e.asked.endsWith("/hanging")).map((e) => e.outcome)).toEqual([undefined, "the client connection closed"]);
  });
});

// Granted tunnels are spliced by the native engine (native/engine.c), not
// copied in JavaScript: these prove that its limits and its record are the
// gate's, and that the bytes arrive whole and in order.
describe("tunnels spliced by the engine", () => {
  const connectTo = (port: number) => `CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`;

  it("carry 16 MiB each way intact and in order, bytes sent with the CONNECT head first", async () => {
    const up2down = randomBytes(16 << 20);
    const down2up = Buffer.concat([Buffer.from("early bytes|"), randomBytes(16 << 20)]);
    const received: Buffer[] = [];
    const server = createNetServer({ allowHalfOpen: true }, (c) => {
      c.on("data", (d: Buffer) => received.push(d));
      c.on("end", () => c.end());
      c.write(up2down);
    });
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const got: Buffer[] = [];
      s.on("data", (d: Buffer) => got.push(d));
      const ended = new Promise((r) => s.once("end", r));
      // The head and the first bytes of the tunnel in one write: the gate has read them before it hands over.
      s.write(Buffer.concat([Buffer.from(connectTo(port)), down2up.subarray(0, 12)]));
      await until(() => Buffer.concat(got).includes("\r\n\r\n"), "the tunnel opens");
      s.end(down2up.subarray(12));
      await ended;
      const all = Buffer.concat(got);
      const head = all.indexOf("\r\n\r\n") + 4;
      expect(all.subarray(0, head).toString()).toBe("HTTP/1.1 200 Connection Established\r\n\r\n");
      expect(sha(all.subarray(head))).toBe(sha(up2down));
      await until(() => Buffer.concat(received).length === down2up.length, "the upstream has every byte");
      expect(sha(Buffer.concat(received))).toBe(sha(down2up));
      await until(() => t.events.some((e) => e.method === "CONNECT" && e.outcome !== undefined), "the tunnel's end is on the record");
      expect(t.events.find((e) => e.outcome !== undefined)).toMatchObject({ outcome: "completed", bytesUp: down2up.length, bytesDown: up2down.length });
    } finally {
      await t.close();
      server.close();
    }
  });

  it("a slow reader gets the end of a download after both sides have ended, with no spinning meanwhile", async () => {
    const body = randomBytes(8 << 20);
    const server = createNetServer({ allowHalfOpen: true }, (c) => c.once("end", () => c.end(body)));
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const got: Buffer[] = [];
      s.once("data", (d: Buffer) => got.push(d)); // the 200
      s.write(connectTo(port));
      await until(() => got.length > 0, "the tunnel opens");
      s.pause();
      // The client half-closes; the server answers 8 MiB and ends; the client does not read yet, so the
      // tunnel holds data for it while the server's side has hung up.
      s.end();
      await new Promise((r) => setTimeout(r, 300));
      const cpu = process.cpuUsage();
      await new Promise((r) => setTimeout(r, 500));
      const used = process.cpuUsage(cpu);
      // A loop that polls a hung-up socket over and over would burn the whole half second.
      expect((used.user + used.system) / 1000).toBeLessThan(250);
      const ended = new Promise((r) => s.once("end", r));
      s.on("data", (d: Buffer) => got.push(d));
      s.resume();
      await ended;
      expect(sha(Buffer.concat(got.slice(1)))).toBe(sha(body));
      await until(() => t.events.some((e) => e.outcome !== undefined), "the end is on the record");
      expect(t.events.find((e) => e.outcome !== undefined)).toMatchObject({ outcome: "completed", bytesDown: body.length });
    } finally {
      await t.close();
      server.close();
    }
  });

  it("a server that speaks first is heard after the 200", async () => {
    const up = await rawUpstream();
    const server = createNetServer((c) => c.end("220 banner\r\n"));
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, connectTo(port));
      expect(r).toBe("HTTP/1.1 200 Connection Established\r\n\r\n220 banner\r\n");
    } finally {
      await t.close();
      server.close();
      await up.close();
    }
  });

  it("are cut past the connection's byte budget, counting both ways, and the cut is recorded", async () => {
    const server = createNetServer((c) => {
      c.on("error", () => {});
      const block = Buffer.alloc(1 << 20, 0x79);
      const more = () => {
        while (!c.destroyed && c.write(block)) {
          // until the kernel pushes back
        }
      };
      c.on("drain", more);
      more();
    });
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`], { limits: { bytesPerConnection: 4 << 20 } });
    try {
      const s = await gateClient(t.gate.socketPath, t.token, { allowHalfOpen: false });
      let got = 0;
      s.on("data", (d: Buffer) => (got += d.length));
      const closed = new Promise((r) => s.once("close", r));
      s.write(connectTo(port));
      await closed;
      expect(got).toBeLessThan((4 << 20) + (2 << 20));
      await until(() => t.events.some((e) => e.outcome !== undefined), "the cut is on the record");
      const end = t.events.find((e) => e.outcome !== undefined)!;
      expect(end.outcome).toMatch(/limit of 4194304 bytes/);
      // Received from both sides: the CONNECT head, then the upstream's bytes, until one more would pass the budget.
      expect(end.bytesDown).toBeGreaterThan((4 << 20) - 64);
    } finally {
      await t.close();
      server.close();
    }
  });

  it("are closed after the idle time with nothing moving either way, and recorded", async () => {
    const up = await rawUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { idleMs: 300 } });
    try {
      const s = await gateClient(t.gate.socketPath, t.token, { allowHalfOpen: false });
      const got = collect(s);
      s.write(connectTo(up.port));
      await got.closed;
      expect(got.text()).toBe("HTTP/1.1 200 Connection Established\r\n\r\n");
      await until(() => t.events.some((e) => e.outcome !== undefined), "the idle end is on the record");
      expect(t.events.find((e) => e.outcome !== undefined)!.outcome).toBe("stopped: no data either way for 300 ms");
    } finally {
      await t.close();
      await up.close();
    }
  });

  it.each([
    ["revoked", "stopped: the worker's grant was revoked"],
    ["released", "stopped: the command that opened it has ended"],
  ] as const)("end when their worker is %s, and the record says which", async (why, outcome) => {
    const up = await rawUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token, { allowHalfOpen: false });
      const got = collect(s);
      s.write(connectTo(up.port));
      await until(() => got.text().includes("200 Connection Established"), "the tunnel opens");
      t.gate.unregister(t.token, why);
      await got.closed;
      await until(() => t.events.some((e) => e.outcome !== undefined), "the end is on the record");
      expect(t.events.find((e) => e.outcome !== undefined)!.outcome).toBe(outcome);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("count once against the worker's caps: a burst of as many tunnels as it may hold all open, and one more is refused", async () => {
    const up = await rawUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { connectionsPerWorker: 128 } });
    try {
      const clients = await Promise.all(Array.from({ length: 128 }, () => gateClient(t.gate.socketPath, t.token)));
      const got = clients.map(collect);
      for (const s of clients) s.write(connectTo(up.port));
      await until(() => got.every((g) => /^HTTP\/1\.1 \d{3}/.test(g.text())), "every tunnel is answered");
      expect(got.map((g) => g.text().slice(0, 12))).toEqual(Array(128).fill("HTTP/1.1 200"));
      expect(statusOf(await rawGate(t.gate.socketPath, t.token, connectTo(up.port)))).toBe(503);
      for (const s of clients) s.destroy();
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("end when the gate closes, and each is on the record by then", async () => {
    const up = await rawUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`]);
    const clients = await Promise.all([1, 2, 3].map(() => gateClient(t.gate.socketPath, t.token, { allowHalfOpen: false })));
    const got = clients.map(collect);
    for (const s of clients) s.write(connectTo(up.port));
    await until(() => got.every((g) => g.text().includes("200 Connection Established")), "three tunnels are open");
    await t.close();
    expect(t.events.filter((e) => e.outcome !== undefined).map((e) => e.outcome)).toEqual(Array(3).fill("stopped: the gate closed"));
    await Promise.all(got.map((g) => g.closed));
    await up.close();
  });
});
