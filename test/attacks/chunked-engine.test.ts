import { createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import type { EgressEvent } from "../../src/net/egress-gate.js";
import { collect, gateClient, lenientUpstream, listenLoopback, rawGate, rawUpstream, statusOf, testGate, until } from "../support/net.js";

// Chunked bodies whose framing the gate's engine reads (native/tunnel.c): once
// a chunk is large, the engine carries the rest of the body in the kernel and
// parses every size line, CRLF and trailer itself. The framing is where
// smuggling happens, so each test here puts a large first chunk in front of
// the attack, which then reaches the engine's parser, not the JavaScript one.
// Malformed framing must end the connection, on the record, with nothing after
// the fault forwarded; the bytes after a well-formed body must go back to the
// gate's own parser. Everything stays on loopback.

const BIG = 1 << 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ends = (t: { events: EgressEvent[] }) => t.events.filter((e) => e.outcome !== undefined).map((e) => e.outcome!);

/**
 * An upstream that answers each connection's first request head with the
 * pieces given, each written after a pause (so that each arrives in its own
 * read), then ends its side if told to. Counts its connections.
 */
async function scripted(pieces: (string | Buffer)[], opts: { end?: boolean; gapMs?: number } = {}) {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer({ allowHalfOpen: true }, (s) => {
    connections += 1;
    sockets.add(s);
    s.setNoDelay(true);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    let got = "";
    let answered = false;
    s.on("data", async (d: Buffer) => {
      got += d.toString("latin1");
      if (answered || !got.includes("\r\n\r\n")) return;
      answered = true;
      for (const p of pieces) {
        if (s.destroyed) return;
        s.write(p);
        await sleep(opts.gapMs ?? 15);
      }
      if (opts.end) s.end();
    });
  });
  const port = await listenLoopback(server);
  return {
    port,
    get connections() {
      return connections;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const HEAD = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
const get = (P: number, close = true) => `GET http://127.0.0.1:${P}/x HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n${close ? "Connection: close\r\n" : ""}\r\n`;
/** A response whose first chunk the engine carries, then the tail the attack is in. */
const bigFirst = (tail: string, size = BIG) => [HEAD + `${size.toString(16)}\r\n`, Buffer.alloc(size, "D"), tail];

// After the big chunk's data: framing that a lenient reader takes one way and a strict one another.
const MALFORMED: [string, string][] = [
  ["a size past any length (17 hex digits)", "\r\nfffffffffffffffff\r\nevil\r\n0\r\n\r\n"],
  ["a size that overflows 64 bits", "\r\n10000000000000004\r\nevil\r\n0\r\n\r\n"],
  ["13 digits, leading zeros", "\r\n0000000000004\r\nevil\r\n0\r\n\r\n"],
  ["a 0x prefix", "\r\n0x4\r\nevil\r\n0\r\n\r\n"],
  ["a negative size", "\r\n-4\r\nevil\r\n0\r\n\r\n"],
  ["a plus sign", "\r\n+4\r\nevil\r\n0\r\n\r\n"],
  ["whitespace before the size", "\r\n 4\r\nevil\r\n0\r\n\r\n"],
  ["whitespace after the size, no extension", "\r\n4 \r\nevil\r\n0\r\n\r\n"],
  ["an empty size line", "\r\n\r\nevil\r\n0\r\n\r\n"],
  ["a control character in an extension", "\r\n4;\x01\r\nevil\r\n0\r\n\r\n"],
  ["a NUL in the size line", "\r\n4\x00\r\nevil\r\n0\r\n\r\n"],
  ["a bare CR inside the size line", "\r\n4\r;x\r\nevil\r\n0\r\n\r\n"],
  ["a size line past its bound", `\r\n4;${"e".repeat(2000)}\r\nevil\r\n0\r\n\r\n`],
  ["a bare LF after the size", "\r\n4\nevil\r\n0\r\n\r\n"],
  ["a bare LF after the data", "\n4\r\nevil\r\n0\r\n\r\n"],
  ["no CRLF after the data (data longer than its size)", "XX\r\n4\r\nevil\r\n0\r\n\r\n"],
  ["a CR without its LF after the data", "\rX4\r\nevil\r\n0\r\n\r\n"],
  ["a bare LF ending the last chunk's line", "\r\n0\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil"],
  ["a bare LF in a trailer", "\r\n0\r\nX-T: 1\n\r\nevil"],
  ["a trailer line past its bound", `\r\n0\r\nX-T: ${"t".repeat(2000)}\r\n\r\nevil`],
  ["too many trailers", `\r\n0\r\n${"X-T: 1\r\n".repeat(40)}\r\nevil`],
];

describe("plain HTTP: the engine's chunk parser, answers", () => {
  it("malformed framing after a spliced chunk ends the answer, on the record: the client never gets what came after the fault, nor a body's end", async () => {
    for (const [what, tail] of MALFORMED) {
      const up = await scripted(bigFirst(tail), { end: true });
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
        expect(statusOf(r), what).toBe(200);
        expect(r, what).not.toContain("evil");
        expect(r.endsWith("0\r\n\r\n"), what).toBe(false);
        expect(r.length, what).toBeLessThanOrEqual(HEAD.length + 200 + BIG);
        await until(() => ends(t).length > 0, `${what}: the request's end is recorded`);
        expect(ends(t)[0], what).not.toBe("completed");
        expect(ends(t)[0], what).toMatch(/chunk|line|CRLF|trailer|size/);
      } finally {
        await t.close();
        await up.close();
      }
    }
  }, 120_000);

  it("a body cut in the middle of a chunk, of a size line, of the CRLF or of the trailers is not passed on as a whole one", async () => {
    const cuts = ["\r\n4\r\nab", "\r\n4", "\r\n4\r", "", "\r", "\r\n0\r\n", "\r\n0\r\nX-T: 1\r\n", "\r\n0\r\nX-T"];
    for (const tail of cuts) {
      const up = await scripted(bigFirst(tail), { end: true });
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
        expect(r.endsWith("0\r\n\r\n"), JSON.stringify(tail)).toBe(false);
        await until(() => ends(t).length > 0, "the request's end is recorded");
        expect(ends(t)[0], JSON.stringify(tail)).not.toBe("completed");
      } finally {
        await t.close();
        await up.close();
      }
    }
    // Cut in the big chunk's own data, which the engine is moving.
    const up = await scripted([HEAD + `${BIG.toString(16)}\r\n`, Buffer.alloc(BIG / 2, "D")], { end: true });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
      expect(r.length).toBeLessThan(HEAD.length + 100 + BIG);
      await until(() => ends(t).length > 0, "the request's end is recorded");
      expect(ends(t)[0]).not.toBe("completed");
    } finally {
      await t.close();
      await up.close();
    }
  }, 60_000);

  it("a well-formed body is framed the gate's way: sizes without leading zeros, extensions and trailers (headers among them) dropped", async () => {
    const tail = "\r\n000000000005;name=value; x\r\nhello\r\n3\t;e\r\nabc\r\n0;last\r\nContent-Length: 0\r\nTransfer-Encoding: identity\r\nX-Evil: 1\r\n\r\n";
    const up = await scripted(bigFirst(tail), { end: true });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
      const body = r.slice(r.indexOf("\r\n\r\n") + 4);
      expect(body).toBe(`${BIG.toString(16)}\r\n${"D".repeat(BIG)}\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n`);
      expect(r).not.toContain("X-Evil");
      await until(() => ends(t).length > 0, "the request's end is recorded");
      expect(ends(t)).toEqual(["completed"]);
      expect(t.events.find((e) => e.outcome === "completed")?.bytesDown).toBe(BIG + 8);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("framing split across reads at every byte offset is read the same", async () => {
    const size = 128 * 1024;
    const tail = "\r\n5;e=1\r\nhello\r\n000003\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
    const want = `${size.toString(16)}\r\n${"D".repeat(size)}\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n`;
    for (let i = 1; i < tail.length; i++) {
      const up = await scripted([HEAD + `${size.toString(16)}\r\n`, Buffer.alloc(size, "D"), tail.slice(0, i), tail.slice(i)], { gapMs: 5 });
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
        expect(r.slice(r.indexOf("\r\n\r\n") + 4), `split at ${i}`).toBe(want);
      } finally {
        await t.close();
        await up.close();
      }
    }
    // And one byte per read.
    const up = await scripted([HEAD + `${size.toString(16)}\r\n`, Buffer.alloc(size, "D"), ...tail], { gapMs: 3 });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
      expect(r.slice(r.indexOf("\r\n\r\n") + 4)).toBe(want);
    } finally {
      await t.close();
      await up.close();
    }
  }, 120_000);

  it("a second answer smuggled after the last chunk never answers the next request: the engine stops at the body's end and the connection is not kept", async () => {
    const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned";
    const big = "B".repeat(BIG);
    const up = await lenientUpstream((r) => `${HEAD}${BIG.toString(16)}\r\n${big}\r\n0\r\n\r\n${r.line.includes("/a") ? smuggled : ""}`);
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.write(get(up.port, false).replace("/x", "/a"));
      await until(() => c.text().endsWith("\r\n0\r\n\r\n"), "the first answer", 10_000);
      await sleep(100);
      s.end(get(up.port, true).replace("/x", "/b"));
      await c.closed;
      expect(c.text()).not.toContain("poisoned");
      expect(c.text().split("HTTP/1.1 200").length - 1).toBe(2);
      expect(up.connections).toBe(2);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("the connection's byte budget is kept in the middle of a chunk the engine moves", async () => {
    const up = await scripted(bigFirst("\r\n0\r\n\r\n", 4 * BIG), { end: true });
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { bytesPerConnection: BIG } });
    try {
      const r = await rawGate(t.gate.socketPath, t.token, get(up.port), { waitMs: 5000 });
      expect(r.length).toBeLessThan(BIG + 200_000);
      await until(() => ends(t).length > 0, "the request's end is recorded");
      expect(ends(t)[0]).toMatch(/limit|bytes/);
    } finally {
      await t.close();
      await up.close();
    }
  });
});

describe("plain HTTP: the engine's chunk parser, request bodies", () => {
  const post = (P: number, path = "/up") => `POST http://127.0.0.1:${P}${path} HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\nTransfer-Encoding: chunked\r\n\r\n`;

  /** Sends a chunked request with a big first chunk and the tail, in pieces; returns what the client got. */
  async function send(socketPath: string, token: string, P: number, tail: string, size = BIG): Promise<string> {
    const s = await gateClient(socketPath, token, { allowHalfOpen: false });
    s.setNoDelay(true);
    const c = collect(s);
    s.on("error", () => {});
    s.write(post(P) + `${size.toString(16)}\r\n`);
    await sleep(20);
    s.write(Buffer.alloc(size, "U"));
    await sleep(20);
    if (!s.destroyed) s.write(tail);
    const timer = setTimeout(() => s.destroy(), 5000);
    await c.closed;
    clearTimeout(timer);
    return c.text();
  }

  it("malformed framing after a spliced chunk is never forwarded: the upstream never reads a whole request, and the end is recorded", async () => {
    for (const [what, tail] of MALFORMED) {
      const up = await lenientUpstream();
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const r = await send(t.gate.socketPath, t.token, up.port, tail);
        expect(statusOf(r) === 200, what).toBe(false);
        expect(up.requests, what).toEqual([]);
        await until(() => ends(t).length > 0, `${what}: the request's end is recorded`);
        expect(ends(t)[0], what).not.toBe("completed");
      } finally {
        await t.close();
        await up.close();
      }
    }
  }, 120_000);

  it("a request pipelined after the last chunk goes back to the gate's parser: decided on its own and refused for an ungranted host", async () => {
    const granted = await rawUpstream({ answer: (soFar) => (soFar.includes("\r\n0\r\n\r\n") ? "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstored" : undefined) });
    const other = await rawUpstream({ answer: () => "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nreached" });
    const t = await testGate([`127.0.0.1:${granted.port}`]);
    try {
      const smuggled = `POST http://127.0.0.1:${other.port}/smuggled HTTP/1.1\r\nHost: 127.0.0.1:${other.port}\r\nContent-Length: 5\r\n\r\nhello`;
      const r = await send(t.gate.socketPath, t.token, granted.port, `\r\n4\r\nlast\r\n0\r\nX-T: 1\r\n\r\n${smuggled}`);
      expect(r).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*stored[^]*HTTP\/1\.1 403 /);
      expect(other.connections).toBe(0);
      const got = granted.received();
      expect(got).not.toContain("smuggled");
      expect(got.slice(got.indexOf("\r\n\r\n") + 4)).toBe(`${BIG.toString(16)}\r\n${"U".repeat(BIG)}\r\n4\r\nlast\r\n0\r\n\r\n`);
      expect(t.events.filter((e) => e.asked.endsWith("/smuggled")).map((e) => e.decision)).toEqual(["denied"]);
    } finally {
      await t.close();
      await granted.close();
      await other.close();
    }
  });

  it("the client's byte budget is kept in the middle of a chunk the engine moves", async () => {
    const up = await lenientUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { bytesPerConnection: BIG } });
    try {
      await send(t.gate.socketPath, t.token, up.port, "\r\n0\r\n\r\n", 4 * BIG);
      expect(up.requests).toEqual([]);
      await until(() => ends(t).length > 0, "the request's end is recorded");
      expect(ends(t)[0]).toMatch(/limit|bytes/);
    } finally {
      await t.close();
      await up.close();
    }
  });
});
