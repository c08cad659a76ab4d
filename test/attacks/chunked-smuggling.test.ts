import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EgressEvent } from "../../src/net/egress-gate.js";
import { type LenientRequest, listenLoopback, rawUpstream, readLeniently } from "../support/net.js";
import { ROOT } from "../support/paths.js";
import { runVak } from "../support/vak.js";

// Request smuggling and response splitting against the gate's chunked framing,
// for real: a client inside `vak exec` speaks raw bytes to the sandbox's proxy
// (test/support/proxy-conversations.mjs), and an upstream on this machine's
// loopback records every byte it receives. Each attack puts a large chunk in
// front (the engine carries a chunked body from its first chunk of
// KERNEL_CHUNK = 64 KiB or more on, parsing its framing in native/chunked.c),
// or small chunks then a large one, and then the framing trick. What must hold:
// the upstream never receives bytes that form a request the gate did not
// decide and record; the client never receives an answer it did not ask for;
// malformed framing ends the connection, on the record, and nothing after the
// fault is passed on. Everything stays on loopback.

const BIG = 1 << 20;
const KERNEL_CHUNK = 64 * 1024;

interface Piece {
  data: string | Buffer;
  /** Pause before writing it, so that it arrives in a read of its own. */
  gapMs?: number;
}
interface Reply {
  got: string;
  end: string;
  written: number;
}

/** The pieces of a string, one byte each, each in its own read. */
const bytewise = (s: string, gapMs = 2): Piece[] => [...s].map((c) => ({ data: c, gapMs }));
/** Long runs of one byte written short, so that what a test compares prints readably when it fails. */
const squeeze = (s: string) => s.replace(/([UD])\1{63,}/g, (m, c: string) => `<${m.length} ${c}>`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * An upstream on loopback that keeps every byte each connection brings, reads
 * the requests in them the way a lenient server does (test/support/net.ts:
 * pipelined ones, bare LFs, any "chunked"), and answers each with answer's
 * pieces (`seen <target>` by default), written one by one after a pause.
 */
async function recordingUpstream(answer?: (r: LenientRequest) => { pieces: (string | Buffer)[]; gapMs?: number; end?: boolean } | undefined) {
  const raw: string[] = [];
  const requests: LenientRequest[] = [];
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true }, (s) => {
    const connection = raw.push("");
    sockets.add(s);
    s.setNoDelay(true);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    s.on("data", (d: Buffer) => (raw[connection - 1] += d.toString("latin1")));
    readLeniently(s, connection, async (r) => {
      requests.push(r);
      const a = answer?.(r);
      if (!a) {
        const text = `seen ${r.line.split(" ")[1]}`;
        return void s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`);
      }
      for (const p of a.pieces) {
        if (s.destroyed) return;
        s.write(p);
        await sleep(a.gapMs ?? 15);
      }
      if (a.end) s.end();
    });
  });
  const port = await listenLoopback(server);
  return {
    port,
    raw,
    requests,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const ws = mkdtempSync(join(tmpdir(), "vak-chunked-smuggling-"));
copyFileSync(join(ROOT, "test/support/proxy-conversations.mjs"), join(ws, "client.mjs"));
let plans = 0;

/**
 * Runs the conversations at once, each on its own connection, from inside `vak exec` with these
 * grants; returns what each got back and the run's egress record.
 */
async function converse(grants: string[], conversations: { pieces: Piece[]; waitMs?: number }[]) {
  const plan = `plan-${++plans}.json`;
  const b64 = (d: string | Buffer) => (typeof d === "string" ? Buffer.from(d, "latin1") : d).toString("base64");
  writeFileSync(
    join(ws, plan),
    JSON.stringify({ conversations: conversations.map((c) => ({ waitMs: c.waitMs ?? 3000, pieces: c.pieces.map((p) => ({ b64: b64(p.data), gapMs: p.gapMs ?? 20 })) })) }),
  );
  const r = await runVak(["exec", "--json", ...grants.flatMap((g) => ["--allow-net", g]), "--", "node", join(ws, "client.mjs"), join(ws, plan)], { cwd: ws });
  const line = r.stdout.trim().split("\n").pop() ?? "";
  if (!line.startsWith("[")) throw new Error(`the client printed no replies: ${r.stdout}\n${r.stderr}`);
  const replies = (JSON.parse(line) as Reply[]).map((x) => ({ ...x, got: Buffer.from(x.got, "base64").toString("latin1") }));
  const egress = (r.summary?.egress ?? []) as EgressEvent[];
  return { replies, egress };
}

/** How the record says the request for this path ended (the event that closes it), or undefined. */
const endOf = (egress: EgressEvent[], path: string) => egress.find((e) => e.outcome !== undefined && new URL(e.asked).pathname === path);

/**
 * Framing a strict reader refuses and a lenient one (64-bit sizes that wrap, parseInt, a bare LF as a
 * line end, trailers to any blank line) takes as the body's end: each puts §, the smuggled message, right
 * where the lenient reader would start reading the next one. The tails follow a chunk's data.
 */
const MALFORMED: [string, string][] = [
  ["a size of 17 hex digits", "\r\nfffffffffffffffff\r\n§"],
  ["a size that wraps to 0 in 64 bits", "\r\n10000000000000000\r\n\r\n§"],
  ["13 digits of leading zeros", "\r\n0000000000000\r\n\r\n§"],
  ["a 0x prefix", "\r\n0x0\r\n\r\n§"],
  ["a minus sign", "\r\n-0\r\n\r\n§"],
  ["a plus sign", "\r\n+0\r\n\r\n§"],
  ["a space before the size", "\r\n 0\r\n\r\n§"],
  ["a space after the size, no extension", "\r\n0 \r\n\r\n§"],
  ["an empty size line", "\r\n\r\n\r\n§"],
  ["a control character in an extension", "\r\n0;\x01\r\n\r\n§"],
  ["a NUL after the size", "\r\n0\x00\r\n\r\n§"],
  ["a bare CR inside the size line", "\r\n0\r;x\r\n\r\n§"],
  ["a size line one byte past its bound (1025)", `\r\n0;${"e".repeat(1023)}\r\n\r\n§`],
  ["a bare LF after the size", "\r\n0\n\r\n§"],
  ["a bare LF after the data", "\n0\r\n\r\n§"],
  ["a CR without its LF after the data", "\r0\r\n\r\n§"],
  ["no CRLF after the data (data longer than its size)", "0\r\n\r\n§"],
  ["a quoted extension with a CR in it", '\r\n0;a="\r"\r\n\r\n§'],
  ["a quoted extension with a bare LF in it", '\r\n0;a="\n"\r\n\r\n§'],
  ["a bare LF ending the blank line after the last chunk", "\r\n0\r\n\n§"],
  ["a bare LF ending a trailer", "\r\n0\r\nX-T: 1\n\r\n§"],
  ["a trailer line past its bound", `\r\n0\r\nX-T: ${"t".repeat(2000)}\r\n\r\n§`],
  ["33 trailers, one past the bound", `\r\n0\r\n${"X-T: 1\r\n".repeat(33)}\r\n§`],
];

/**
 * Odd framing that is well-formed: accepted, and passed on framed the gate's way (sizes in plain hex,
 * extensions and trailers dropped). [what, tail, the canonical framing of the tail].
 */
const WELL_FORMED: [string, string, string][] = [
  ["12 hex digits of leading zeros", "\r\n000000000005\r\nhello\r\n0\r\n\r\n", "\r\n5\r\nhello\r\n0\r\n\r\n"],
  ["upper-case hex and an extension", "\r\nA;x=y\r\n0123456789\r\n0\r\n\r\n", "\r\na\r\n0123456789\r\n0\r\n\r\n"],
  ["a quoted extension with a ';' and spaces inside", '\r\n5;a="x;y z"\r\nhello\r\n0\r\n\r\n', "\r\n5\r\nhello\r\n0\r\n\r\n"],
  ["spaces and tabs before the ';'", "\r\n5 \t;a\r\nhello\r\n0;last=1\r\n\r\n", "\r\n5\r\nhello\r\n0\r\n\r\n"],
  ["a size line exactly at its bound (1024)", `\r\n5;${"e".repeat(1022)}\r\nhello\r\n0\r\n\r\n`, "\r\n5\r\nhello\r\n0\r\n\r\n"],
  ["a zero-size chunk's leading zeros", "\r\n000000000000\r\n\r\n", "\r\n0\r\n\r\n"],
  ["32 trailers, framing headers and a request line among them", `\r\n0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nGET /secret HTTP/1.1\r\nHTTP/1.1 200 OK\r\n${"X-T: 1\r\n".repeat(28)}\r\n`, "\r\n0\r\n\r\n"],
];

/**
 * How the engine comes to carry the body: [what, the bytes before the tail, written as pieces, and its
 * canonical framing]. `size` is the large chunk's size.
 */
function leads(size: number, fill = "U"): [string, Piece[], string][] {
  const data = Buffer.alloc(size, fill);
  const hex = size.toString(16);
  return [
    ["a large first chunk", [{ data: `${hex}\r\n` }, { data }], `${hex}\r\n${fill.repeat(size)}`],
    ["small chunks, then a large one", [{ data: `5;e\r\nsmall\r\n3\r\nabc\r\n` }, { data: `${hex}\r\n` }, { data }], `5\r\nsmall\r\n3\r\nabc\r\n${hex}\r\n${fill.repeat(size)}`],
    ["a large chunk whose first bytes came with its size line", [{ data: Buffer.concat([Buffer.from(`${hex}\r\n`), data.subarray(0, 1000)]) }, { data: data.subarray(1000) }], `${hex}\r\n${fill.repeat(size)}`],
    ["a chunk of exactly KERNEL_CHUNK after its size line's own read", [{ data: `${KERNEL_CHUNK.toString(16)}\r\n` }, { data: Buffer.alloc(KERNEL_CHUNK, fill) }], `${KERNEL_CHUNK.toString(16)}\r\n${fill.repeat(KERNEL_CHUNK)}`],
    ["a chunk one byte below KERNEL_CHUNK (the JavaScript parser)", [{ data: `${(KERNEL_CHUNK - 1).toString(16)}\r\n` }, { data: Buffer.alloc(KERNEL_CHUNK - 1, fill) }], `${(KERNEL_CHUNK - 1).toString(16)}\r\n${fill.repeat(KERNEL_CHUNK - 1)}`],
  ];
}

describe("chunked request bodies: the upstream never reads a request the gate did not decide", () => {
  let up: Awaited<ReturnType<typeof recordingUpstream>>;
  let P = 0;
  /** The grant: one path prefix of the upstream. What the attacks smuggle asks for another path. */
  let grant = "";
  const SIZE = 256 * 1024;
  const post = (path: string, te = "Transfer-Encoding: chunked\r\n") => `POST http://127.0.0.1:${P}${path} HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\nConnection: close\r\n${te}\r\n`;
  /** A request as the upstream would read it: what a smuggled one would be. */
  const smuggled = () => `GET /secret HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\nContent-Length: 0\r\n\r\n`;
  /** What reached the upstream for one path: the bytes of the connection its request line opened. */
  const rawFor = (path: string) => up.raw.find((r) => r.startsWith(`POST ${path} `)) ?? "";
  const bodyOf = (raw: string) => raw.slice(raw.indexOf("\r\n\r\n") + 4);
  /** The request lines the upstream read for one path, and for the smuggled one. */
  const requestsFor = (path: string) => up.requests.filter((q) => q.line.split(" ")[1] === path).map((q) => q.line);

  beforeAll(async () => {
    up = await recordingUpstream();
    P = up.port;
    grant = `127.0.0.1:${P}/up/*`;
  });
  afterAll(() => up?.close());

  it("malformed framing after a large chunk (sizes, line ends, data longer than its size, trailers) ends the request on the record, and the upstream never reads what follows", async () => {
    const cases: { path: string; what: string; pieces: Piece[] }[] = [];
    leads(SIZE).forEach(([lead, pieces], l) =>
      MALFORMED.forEach(([what, tail], m) => {
        const path = `/up/m${l}-${m}`;
        cases.push({ path, what: `${lead}; ${what}`, pieces: [{ data: post(path) + String(pieces[0]!.data) }, ...pieces.slice(1), { data: tail.replace("§", smuggled()) }] });
      }),
    );
    const r = await converse([grant], cases);
    cases.forEach(({ path, what }, i) => {
      const reply = r.replies[i]!;
      expect(reply.got, what).not.toContain("seen");
      expect(reply.got === "" || reply.got.startsWith("HTTP/1.1 400 "), `${what}: ${reply.got.slice(0, 80)}`).toBe(true);
      expect(rawFor(path), what).not.toContain("/secret");
      expect(requestsFor(path), what).toEqual([]);
      const end = endOf(r.egress, path);
      expect(end?.outcome, what).toMatch(/^bad request body: .*(size|line|CRLF|trailer)/);
    });
    expect(requestsFor("/secret")).toEqual([]);
  }, 120_000);

  it("odd framing that is well-formed (leading zeros, extensions, quoted ';', trailers that look like a request) reaches the upstream framed the gate's way, and nothing of it as a request", async () => {
    const cases: { path: string; what: string; pieces: Piece[]; want: string }[] = [];
    leads(SIZE).forEach(([lead, pieces, canonical], l) =>
      WELL_FORMED.forEach(([what, tail, want], w) => {
        const path = `/up/w${l}-${w}`;
        cases.push({ path, what: `${lead}; ${what}`, pieces: [{ data: post(path) + String(pieces[0]!.data) }, ...pieces.slice(1), { data: tail }], want: canonical + want });
      }),
    );
    const r = await converse([grant], cases);
    cases.forEach(({ path, what, want }, i) => {
      expect(r.replies[i]!.got, what).toMatch(new RegExp(`^HTTP/1\\.1 200 [^]*seen ${path}$`));
      expect(squeeze(bodyOf(rawFor(path))), what).toBe(squeeze(want));
      expect(requestsFor(path).length, what).toBe(1);
      expect(endOf(r.egress, path)?.outcome, what).toBe("completed");
    });
    for (const { path } of cases) expect(rawFor(path), path).not.toContain("/secret");
  }, 120_000);

  it("framing split across reads, one byte per read, is read the same, and a malformed split line is still refused", async () => {
    const [lead, pieces, canonical] = leads(SIZE)[1]!;
    const good = "\r\n000005;a=\"b\"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n";
    const cases = [
      { path: "/up/s-good", pieces: [{ data: post("/up/s-good") + String(pieces[0]!.data) }, ...pieces.slice(1), ...bytewise(good)] },
      { path: "/up/s-bad-lf", pieces: [{ data: post("/up/s-bad-lf") + String(pieces[0]!.data) }, ...pieces.slice(1), ...bytewise(`\r\n0\n\r\n${smuggled()}`)] },
      { path: "/up/s-bad-cr", pieces: [{ data: post("/up/s-bad-cr") + String(pieces[0]!.data) }, ...pieces.slice(1), ...bytewise(`\r0\r\n\r\n${smuggled()}`)] },
      // The large chunk's own size line cut in two, and the CRLF after its data in a read of its own.
      { path: "/up/s-size", pieces: [{ data: post("/up/s-size") + "4" }, { data: "0000\r\n" }, { data: Buffer.alloc(0x40000, "U") }, { data: "\r" }, { data: "\n0\r\n\r\n" }] },
    ];
    const r = await converse([grant], cases);
    expect(squeeze(r.replies[0]!.got), lead).toMatch(/seen \/up\/s-good$/);
    expect(squeeze(bodyOf(rawFor("/up/s-good")))).toBe(squeeze(`${canonical}\r\n5\r\nhello\r\n0\r\n\r\n`));
    for (const path of ["/up/s-bad-lf", "/up/s-bad-cr"]) {
      expect(endOf(r.egress, path)?.outcome, path).toMatch(/^bad request body: /);
      expect(rawFor(path), path).not.toContain("/secret");
    }
    expect(r.replies[3]!.got).toMatch(/seen \/up\/s-size$/);
    expect(squeeze(bodyOf(rawFor("/up/s-size")))).toBe(squeeze(`40000\r\n${"U".repeat(0x40000)}\r\n0\r\n\r\n`));
    expect(requestsFor("/secret")).toEqual([]);
  }, 60_000);

  it("a request line after a last chunk that lacks its blank line is read as a trailer and dropped; one after the blank line is decided on its own and refused by the path rule", async () => {
    const [, pieces] = leads(SIZE)[0]!;
    const keep = (path: string) => post(path).replace("Connection: close\r\n", "");
    const absolute = `GET http://127.0.0.1:${P}/secret HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n\r\n`;
    const r = await converse([grant], [
      // No blank line after "0": the pipelined request's line and Host are trailers, its blank line the body's end.
      { pieces: [{ data: keep("/up/p-trailer") + String(pieces[0]!.data) }, ...pieces.slice(1), { data: `\r\n0\r\n${absolute}` }] },
      // A whole body, then the request: the gate reads it as the next request, and the grant does not name its path.
      { pieces: [{ data: keep("/up/p-next") + String(pieces[0]!.data) }, ...pieces.slice(1), { data: `\r\n0\r\n\r\n${absolute}` }] },
      // The same after small chunks only: the gate's own parser ends the body.
      { pieces: [{ data: `${keep("/up/p-small")}5\r\nhello\r\n0\r\n\r\n${absolute}` }] },
    ]);
    expect(r.replies[0]!.got).toMatch(/^HTTP\/1\.1 200 [^]*seen \/up\/p-trailer$/);
    expect(squeeze(bodyOf(rawFor("/up/p-trailer")))).toBe(squeeze(`${SIZE.toString(16)}\r\n${"U".repeat(SIZE)}\r\n0\r\n\r\n`));
    for (const [i, path] of [[1, "/up/p-next"], [2, "/up/p-small"]] as const) {
      expect(r.replies[i]!.got, path).toMatch(new RegExp(`^HTTP/1\\.1 200 [^]*seen ${path}HTTP/1\\.1 403 `));
      expect(endOf(r.egress, path)?.outcome, path).toBe("completed");
    }
    expect(r.egress.filter((e) => e.asked.endsWith("/secret")).map((e) => [e.decision, e.status])).toEqual([["denied", 403], ["denied", 403]]);
    for (const path of ["/up/p-trailer", "/up/p-next", "/up/p-small"]) expect(rawFor(path), path).not.toContain("/secret");
    expect(requestsFor("/secret")).toEqual([]);
  }, 60_000);

  it("a chunk whose size is longer than the data meant takes the body's end and the request after it as data: they reach the upstream inside a chunk, never as a request", async () => {
    const [, pieces] = leads(SIZE)[0]!;
    // The chunk meant is "hello"; its size covers what a lenient reader would take for the body's end and the next request.
    const data = `hello\r\n0\r\n\r\n${smuggled()}`;
    const tail = `\r\n${data.length.toString(16)}\r\n${data}\r\n0\r\n\r\n`;
    const r = await converse([grant], [
      { pieces: [{ data: post("/up/long") + String(pieces[0]!.data) }, ...pieces.slice(1), { data: tail }] },
      { pieces: [{ data: post("/up/long-split") + String(pieces[0]!.data) }, ...pieces.slice(1), ...bytewise(tail)] },
    ]);
    for (const [i, path] of [[0, "/up/long"], [1, "/up/long-split"]] as const) {
      expect(r.replies[i]!.got, path).toMatch(new RegExp(`seen ${path}$`));
      const got = up.requests.filter((q) => q.line.split(" ")[1] === path);
      expect(got.length, path).toBe(1);
      expect(got[0]!.body === "U".repeat(SIZE) + data, path).toBe(true);
    }
    expect(requestsFor("/secret")).toEqual([]);
  }, 60_000);

  it("ambiguous framing headers (Content-Length with chunked, chunked not last, obs-fold, twice, an underscore) are refused before the upstream is reached; plain variants pass as the one spelling", async () => {
    const [, pieces] = leads(SIZE)[0]!;
    const tes: [string, string, boolean][] = [
      ["/up/h-cl", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", false],
      ["/up/h-cl-first", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", false],
      ["/up/h-identity", "Transfer-Encoding: chunked, identity\r\n", false],
      ["/up/h-chunked-twice", "Transfer-Encoding: chunked, chunked\r\n", false],
      ["/up/h-two-headers", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", false],
      ["/up/h-fold", "Transfer-Encoding:\r\n chunked\r\n", false],
      ["/up/h-space-colon", "Transfer-Encoding : chunked\r\n", false],
      ["/up/h-underscore", "Transfer_Encoding: chunked\r\n", false],
      ["/up/h-xchunked", "Transfer-Encoding: xchunked\r\n", false],
      ["/up/h-param", "Transfer-Encoding: chunked;q=1\r\n", false],
      ["/up/h-gzip", "Transfer-Encoding: gzip, chunked\r\n", true],
      ["/up/h-case", "transfer-encoding: \tCHUNKED \r\n", true],
    ];
    const r = await converse([grant], tes.map(([path, te]) => ({ pieces: [{ data: post(path, te) + String(pieces[0]!.data) }, ...pieces.slice(1), { data: `\r\n0\r\n\r\n${smuggled()}` }] })));
    tes.forEach(([path, , ok], i) => {
      if (ok) {
        expect(r.replies[i]!.got, path).toMatch(new RegExp(`seen ${path}$`));
        expect(rawFor(path), path).toMatch(path === "/up/h-gzip" ? /\r\nTransfer-Encoding: gzip, chunked\r\n\r\n/ : /\r\nTransfer-Encoding: chunked\r\n\r\n/);
        expect(squeeze(bodyOf(rawFor(path))), path).toBe(squeeze(`${SIZE.toString(16)}\r\n${"U".repeat(SIZE)}\r\n0\r\n\r\n`));
      } else {
        expect(r.replies[i]!.got, path).toMatch(/^HTTP\/1\.1 (400|501) /);
        expect(rawFor(path), path).toBe("");
        expect(r.egress.find((e) => e.asked.includes(path))?.decision, path).toBe("denied");
      }
    });
    for (const [path] of tes) expect(rawFor(path), path).not.toContain("/secret");
    expect(requestsFor("/secret")).toEqual([]);
  }, 60_000);

  it("a chunked body on a read: grant is refused before the upstream is reached", async () => {
    const before = up.raw.length;
    const r = await converse([`read:127.0.0.1:${P}`], [{ pieces: [{ data: post("/up/read").replace("POST", "GET") + `${SIZE.toString(16)}\r\n` }, { data: Buffer.alloc(SIZE, "U") }, { data: `\r\n0\r\n\r\n${smuggled()}` }] }]);
    expect(r.replies[0]!.got).toMatch(/^HTTP\/1\.1 403 /);
    expect(up.raw.length).toBe(before);
    expect(r.egress.map((e) => e.decision)).toEqual(["denied"]);
  });

  it("an upstream that answers before the body ends (while the engine carries it) gets no request after it, and the client no second answer", async () => {
    // This upstream answers each head at once, and keeps reading.
    const raw: string[] = [];
    const open = new Set<Socket>();
    const early = createServer({ allowHalfOpen: true }, (s) => {
      const i = raw.push("") - 1;
      open.add(s);
      s.on("close", () => open.delete(s));
      s.on("error", () => {});
      s.on("data", (d: Buffer) => {
        const first = !raw[i]!.includes("\r\n\r\n");
        raw[i] += d.toString("latin1");
        if (first && raw[i]!.includes("\r\n\r\n")) s.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly");
      });
    });
    const E = await listenLoopback(early);
    try {
      const head = (path: string) => `POST http://127.0.0.1:${E}${path} HTTP/1.1\r\nHost: 127.0.0.1:${E}\r\nTransfer-Encoding: chunked\r\n\r\n`;
      const next = `GET http://127.0.0.1:${E}/up/next HTTP/1.1\r\nHost: 127.0.0.1:${E}\r\n\r\n`;
      const data = Buffer.alloc(SIZE, "U");
      const r = await converse([`127.0.0.1:${E}/up/*`], [
        // Answered in the middle of the large chunk; the rest of the body and a request follow.
        { pieces: [{ data: `${head("/up/e-mid")}${SIZE.toString(16)}\r\n` }, { data: data.subarray(0, SIZE / 2) }, { data: data.subarray(SIZE / 2), gapMs: 300 }, { data: `\r\n0\r\n\r\n${smuggled()}${next}` }] },
        // Answered after small chunks, before the large one.
        { pieces: [{ data: `${head("/up/e-small")}5\r\nsmall\r\n` }, { data: `${SIZE.toString(16)}\r\n`, gapMs: 300 }, { data }, { data: `\r\n0\r\n\r\n${smuggled()}${next}` }] },
      ]);
      for (const [i, path] of [[0, "/up/e-mid"], [1, "/up/e-small"]] as const) {
        expect(r.replies[i]!.got, path).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nearly$/);
        expect(endOf(r.egress, path)?.outcome, path).toMatch(/^completed/);
      }
      expect(raw.join("")).not.toContain("/secret");
      // Whatever reached the upstream as a request was decided and recorded first.
      const heads = raw.flatMap((x) => x.match(/^(GET|POST) \S+/gm) ?? []);
      for (const h of heads) expect(r.egress.some((e) => e.decision === "allowed" && e.asked.endsWith(h.split(" ")[1]!)), h).toBe(true);
    } finally {
      for (const s of open) s.destroy();
      await new Promise<void>((res) => early.close(() => res()));
    }
  }, 60_000);

  it("the data a body moved before its framing failed is on the record", async () => {
    const [, pieces] = leads(SIZE)[0]!;
    const r = await converse([grant], [{ pieces: [{ data: post("/up/count") + String(pieces[0]!.data) }, ...pieces.slice(1), { data: `\r\n0\n\r\n` }] }]);
    const end = endOf(r.egress, "/up/count");
    expect(end?.outcome).toMatch(/^bad request body: /);
    // The whole large chunk reached the engine, most of it the upstream; a record of 0 would hide it.
    expect(end?.bytesUp).toBe(SIZE);
    expect(bodyOf(rawFor("/up/count")).length).toBeGreaterThan(0);
  });
});

describe("chunked answers: the client never gets an answer it did not ask for, nor a cut body as a whole one", () => {
  let up: Awaited<ReturnType<typeof recordingUpstream>>;
  let P = 0;
  const SIZE = 256 * 1024;
  /** What the upstream answers each path with: pieces written one by one; then it ends its side, or keeps it open. */
  const scripts = new Map<string, { pieces: (string | Buffer)[]; end?: boolean }>();
  const HEAD = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  /** An answer the upstream sends unasked, after the body: what a desync would hand the next request. */
  const SMUGGLED = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned";
  const get = (path: string, version = "1.1") => `GET http://127.0.0.1:${P}${path} HTTP/${version}\r\nHost: 127.0.0.1:${P}\r\n\r\n`;
  /** The answer's body as the client got it. */
  const bodyOf = (got: string) => got.slice(got.indexOf("\r\n\r\n") + 4);
  /** The answer's pieces: the head, then a lead's pieces, then the tail. */
  const answer = (head: string, pieces: Piece[], tail: string, end = false) => ({ pieces: [head + String(pieces[0]!.data), ...pieces.slice(1).map((p) => p.data), tail], end });

  beforeAll(async () => {
    up = await recordingUpstream((r) => {
      return scripts.get(r.line.split(" ")[1]!);
    });
    P = up.port;
  });
  afterAll(() => up?.close());

  it("malformed framing after a large chunk ends the answer on the record: the client gets nothing after the fault, no last chunk, and no answer smuggled behind it", async () => {
    const cases: { path: string; what: string }[] = [];
    leads(SIZE, "D").forEach(([lead, pieces], l) =>
      MALFORMED.forEach(([what, tail], m) => {
        const path = `/r/m${l}-${m}`;
        scripts.set(path, answer(HEAD, pieces, tail.replace("§", SMUGGLED)));
        cases.push({ path, what: `${lead}; ${what}` });
      }),
    );
    // Each client asks once, and again later on the same connection: the second answer must be its own.
    const r = await converse([`127.0.0.1:${P}`], cases.map(({ path }) => ({ pieces: [{ data: get(path) }, { data: get("/next"), gapMs: 1500 }] })));
    cases.forEach(({ path, what }, i) => {
      const got = r.replies[i]!.got;
      expect(got.startsWith(HEAD), what).toBe(true);
      expect(got, what).not.toContain("poisoned");
      expect(got, what).not.toContain("seen /next");
      expect(got.endsWith("0\r\n\r\n"), what).toBe(false);
      expect(endOf(r.egress, path)?.outcome, what).toMatch(/^upstream failed: its response body: .*(size|line|CRLF|trailer)/);
    });
  }, 120_000);

  it("odd framing that is well-formed reaches the client framed the gate's way; an answer smuggled after the body's end never answers the next request", async () => {
    const cases: { path: string; what: string; want: string }[] = [];
    leads(SIZE, "D").forEach(([lead, pieces, canonical], l) =>
      WELL_FORMED.forEach(([what, tail, want], w) => {
        const path = `/r/w${l}-${w}`;
        scripts.set(path, answer(HEAD, pieces, tail + SMUGGLED));
        cases.push({ path, what: `${lead}; ${what}`, want: canonical + want });
      }),
    );
    const r = await converse([`127.0.0.1:${P}`], cases.map(({ path }) => ({ pieces: [{ data: get(path) }, { data: get("/next").replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"), gapMs: 1500 }] })));
    cases.forEach(({ path, what, want }, i) => {
      const got = r.replies[i]!.got;
      const second = got.indexOf("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n");
      expect(second, what).toBeGreaterThan(0);
      expect(squeeze(bodyOf(got.slice(0, second))), what).toBe(squeeze(want));
      expect(got.slice(second), what).toMatch(/seen \/next$/);
      expect(got, what).not.toContain("poisoned");
      expect(endOf(r.egress, path)?.outcome, what).toBe("completed");
    });
  }, 120_000);

  it("framing split across reads, one byte per read, is read the same, and a malformed split line is still refused", async () => {
    const [, pieces, canonical] = leads(SIZE, "D")[1]!;
    const split = (tail: string) => {
      const a = answer(HEAD, pieces, "");
      return { pieces: [...a.pieces, ...bytewise(tail).map((p) => p.data)] };
    };
    scripts.set("/r/s-good", split("\r\n000005;a=\"b\"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"));
    scripts.set("/r/s-bad", split(`\r\n0\n\r\n${SMUGGLED}`));
    scripts.set("/r/s-size", { pieces: [HEAD + "4", "0000\r\n", Buffer.alloc(0x40000, "D"), "\r", "\n0\r\n\r\n"] });
    const r = await converse([`127.0.0.1:${P}`], ["/r/s-good", "/r/s-bad", "/r/s-size"].map((path) => ({ pieces: [{ data: get(path).replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n") }] })));
    expect(squeeze(bodyOf(r.replies[0]!.got))).toBe(squeeze(`${canonical}\r\n5\r\nhello\r\n0\r\n\r\n`));
    expect(r.replies[1]!.got).not.toContain("poisoned");
    expect(endOf(r.egress, "/r/s-bad")?.outcome).toMatch(/^upstream failed: its response body: /);
    expect(squeeze(bodyOf(r.replies[2]!.got))).toBe(squeeze(`40000\r\n${"D".repeat(0x40000)}\r\n0\r\n\r\n`));
  }, 60_000);

  it("ambiguous framing headers in an answer (Content-Length with chunked, chunked not last, obs-fold, chunked in HTTP/1.0) are refused with 502, and nothing of the body is passed on", async () => {
    const [, pieces] = leads(SIZE, "D")[0]!;
    const heads: [string, string, boolean][] = [
      ["/r/h-cl", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", false],
      ["/r/h-identity", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n", false],
      ["/r/h-fold", "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n chunked\r\n\r\n", false],
      ["/r/h-twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", false],
      ["/r/h-underscore", "HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\nContent-Length: 5\r\n\r\n", false],
      ["/r/h-http10", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false],
      ["/r/h-case", "HTTP/1.1 200 OK\r\ntransfer-encoding:  CHUNKED\r\n\r\n", true],
    ];
    for (const [path, head] of heads) scripts.set(path, answer(head, pieces, `\r\n0\r\n\r\n${SMUGGLED}`));
    const r = await converse([`127.0.0.1:${P}`], heads.map(([path]) => ({ pieces: [{ data: get(path) }, { data: get("/next"), gapMs: 1500 }] })));
    heads.forEach(([path, , ok], i) => {
      const got = r.replies[i]!.got;
      expect(got, path).not.toContain("poisoned");
      if (ok) {
        expect(got, path).toMatch(/^HTTP\/1\.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n/);
        expect(got, path).toMatch(/seen \/next$/);
      } else {
        expect(got, path).toMatch(/^HTTP\/1\.1 502 /);
        expect(got, path).not.toContain("DDDD");
        expect(endOf(r.egress, path)?.outcome, path).toMatch(/^upstream failed/);
      }
    });
  }, 60_000);

  it("an HTTP/1.0 client (curl -0), whose answer ends with the connection, gets a cut or malformed chunked body as a reset, never as a clean end", async () => {
    const cases: { path: string; what: string }[] = [];
    const cuts: [string, string][] = [["cut in the middle of a chunk", "\r\n5\r\nab"], ["cut after a size line", "\r\n5\r\n"], ["cut before the blank line", "\r\n0\r\n"]];
    for (const [l, [lead, pieces]] of [leads(SIZE, "D")[0]!, leads(SIZE, "D")[1]!, leads(SIZE, "D")[4]!].entries())
      [...MALFORMED.slice(0, 3), ...MALFORMED.slice(13, 17), ...cuts].forEach(([what, tail], m) => {
        const path = `/r/c${l}-${m}`;
        // The upstream ends its side after a cut; a malformed body the gate ends itself.
        scripts.set(path, answer(HEAD, pieces, tail.replace("§", SMUGGLED), !tail.includes("§")));
        cases.push({ path, what: `${lead}; ${what}` });
      });
    scripts.set("/r/c-whole", answer(HEAD, leads(SIZE, "D")[1]![1], "\r\n0\r\n\r\n"));
    cases.push({ path: "/r/c-whole", what: "the whole body, for comparison" });
    // curl's exit status tells a reset (56) from the clean end that would make the part look whole (0).
    const script = cases.map(({ path }) => `curl -s -0 -o /dev/null -w '${path} %{size_download} ' --max-time 10 http://127.0.0.1:${P}${path}; echo $?`).join("; ");
    const r = await runVak(["exec", "--json", "--allow-net", `127.0.0.1:${P}`, "--", "/bin/sh", "-c", script], { cwd: ws });
    const got = new Map(r.stdout.trim().split("\n").map((l) => l.split(" ")).map(([path, size, code]) => [path!, { size: Number(size), code: Number(code) }]));
    const egress = (r.summary?.egress ?? []) as EgressEvent[];
    for (const { path, what } of cases.slice(0, -1)) {
      expect(got.get(path)?.code, what).toBe(56);
      expect(endOf(egress, path)?.outcome, what).toMatch(/^upstream failed: its response body: /);
    }
    expect(got.get("/r/c-whole")).toEqual({ size: SIZE + 8, code: 0 });
    expect(endOf(egress, "/r/c-whole")?.outcome).toBe("completed");
  }, 120_000);

  it("the data an answer moved before its framing failed is on the record", async () => {
    const [, pieces] = leads(SIZE, "D")[0]!;
    scripts.set("/r/count", answer(HEAD, pieces, "\r\n0\n\r\n"));
    const r = await converse([`127.0.0.1:${P}`], [{ pieces: [{ data: get("/r/count") }] }]);
    const end = endOf(r.egress, "/r/count");
    expect(end?.outcome).toMatch(/^upstream failed: its response body: /);
    expect(r.replies[0]!.got.length).toBeGreaterThan(HEAD.length + 1000);
    expect(end?.bytesDown).toBe(SIZE);
  });
});

describe("the connection's byte budget holds with chunked bodies moving both ways at once", () => {
  // The gate's budget: 1 GiB received per client connection, from both sides (DEFAULT_GATE_LIMITS). A client
  // inside `vak exec` uploads a chunked body of large chunks while the upstream answers with one, so that the
  // engine carries both at once; together they are over the budget, each alone under it.
  const GiB = 1 << 30;
  const EACH = 576 << 20;
  const CHUNK = 4 << 20;

  it("a chunked upload and a chunked answer at once, each under the budget, together over it, are stopped at the budget: the connection never moves more", async () => {
    let upstreamGot = 0;
    const open = new Set<Socket>();
    // Answers at once, a chunk for each chunk's worth it receives, and its last chunk once the request's has come.
    const server = createServer({ allowHalfOpen: true }, (s) => {
      open.add(s);
      s.on("close", () => open.delete(s));
      s.on("error", () => {});
      let head = "";
      let sent = 0;
      let tail = "";
      const data = Buffer.alloc(CHUNK, "D");
      const frame = Buffer.from(`${CHUNK.toString(16)}\r\n`);
      const crlf = Buffer.from("\r\n");
      const pump = () => {
        while (sent < Math.min(EACH, upstreamGot + 2 * CHUNK)) {
          sent += CHUNK;
          if (!s.write(Buffer.concat([frame, data, crlf]))) return void s.once("drain", pump);
        }
        if (sent >= EACH && tail.endsWith("\r\n0\r\n\r\n")) s.end("0\r\n\r\n");
      };
      s.on("data", (d: Buffer) => {
        if (!head.includes("\r\n\r\n")) {
          head += d.toString("latin1");
          if (!head.includes("\r\n\r\n")) return;
          s.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
          d = Buffer.from(head.slice(head.indexOf("\r\n\r\n") + 4), "latin1");
        }
        upstreamGot += d.length;
        tail = (tail + d.subarray(-16).toString("latin1")).slice(-16);
        pump();
      });
    });
    const P = await listenLoopback(server);
    const ws = mkdtempSync(join(tmpdir(), "vak-budget-both-"));
    // The client: the upload with backpressure, the answer read as it comes; it prints what it got and how it ended.
    writeFileSync(
      join(ws, "both.mjs"),
      `import { connect } from "node:net";
const s = connect({ host: "127.0.0.1", port: 3128, allowHalfOpen: true });
let got = 0, end = "", error = "", printed = false;
s.on("data", (d) => (got += d.length));
const print = () => { if (!printed) { printed = true; console.log(JSON.stringify({ got, end, error })); s.destroy(); } };
// A reset can reach a reader as an end: when a write took the socket's error first, the read finds none.
// That write's error (ECONNRESET) follows at once. After a clean end (a FIN) there is no such error: at most a
// later write meets the closed socket (EPIPE).
s.on("end", () => { end ||= "end"; setTimeout(print, 2000); });
s.on("error", (e) => { end ||= "error"; error ||= e.code || e.message; });
s.on("close", print);
s.on("connect", async () => {
  s.write("POST http://127.0.0.1:${P}/both HTTP/1.1\\r\\nHost: 127.0.0.1:${P}\\r\\nTransfer-Encoding: chunked\\r\\nConnection: close\\r\\n\\r\\n");
  const piece = Buffer.concat([Buffer.from("${CHUNK.toString(16)}\\r\\n"), Buffer.alloc(${CHUNK}, "U"), Buffer.from("\\r\\n")]);
  for (let sent = 0; sent < ${EACH} && !end; sent += ${CHUNK}) if (!s.write(piece)) await new Promise((r) => { s.once("drain", r); s.once("close", r); });
  if (!end) s.write("0\\r\\n\\r\\n");
});
`,
    );
    try {
      const r = await runVak(["exec", "--json", "--allow-net", `127.0.0.1:${P}`, "--", "node", join(ws, "both.mjs")], { cwd: ws });
      const client = JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}") as { got: number; end: string; error: string };
      const egress = (r.summary?.egress ?? []) as EgressEvent[];
      const end = endOf(egress, "/both");
      expect(end, r.stderr.slice(-2000)).toBeDefined();
      // What crossed the gate, by the record and by what each side received: never more than the budget.
      expect(end!.bytesUp! + end!.bytesDown!, JSON.stringify({ end, client, upstreamGot })).toBeLessThanOrEqual(GiB);
      expect(upstreamGot + client.got, JSON.stringify({ end, client, upstreamGot })).toBeLessThanOrEqual(GiB + (1 << 20));
      expect(end!.outcome).toBe(`stopped: the connection passed its limit of ${GiB} bytes`);
      // Cut by a reset, never a clean end the client could take for the answer's (Linux shows the reset to the
      // first read or write after it: the client sees ECONNRESET, possibly after an end, never EPIPE alone).
      expect(client.error, JSON.stringify(client)).toBe("ECONNRESET");
    } finally {
      for (const s of open) s.destroy();
      await new Promise<void>((res) => server.close(() => res()));
    }
  }, 300_000);
});

describe("an answer that comes while the gate still copies a chunked request body: every byte moved is on the record", () => {
  /** The data of a chunked body as far as it came (the last chunk may be cut). */
  function chunkedData(raw: string): string {
    let at = 0;
    let out = "";
    for (;;) {
      const nl = raw.indexOf("\r\n", at);
      if (nl < 0) return out;
      const size = parseInt(raw.slice(at, nl), 16);
      if (!(size > 0)) return out;
      out += raw.slice(nl + 2, nl + 2 + size);
      at = nl + 2 + size + 2;
      if (at > raw.length) return out;
    }
  }

  it("answered after the head, while small chunks are copied in JavaScript, before a large one: the record counts what reached the upstream, and nothing follows the answer", async () => {
    // Each path answers at once, on the head, in its own way; the upstream keeps reading and records every byte.
    const answers: Record<string, string | Buffer> = {
      "/e/short": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly",
      "/e/long": Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${1 << 20}\r\n\r\n`), Buffer.alloc(1 << 20, "a")]),
      "/e/chunked": Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${(1 << 20).toString(16)}\r\n`), Buffer.alloc(1 << 20, "a"), Buffer.from("\r\n0\r\n\r\n")]),
      "/e/small-chunks": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nearly\r\n0\r\n\r\n",
    };
    const raw = new Map<string, string>();
    const open = new Set<Socket>();
    const early = createServer({ allowHalfOpen: true }, (s) => {
      let path = "";
      let got = "";
      open.add(s);
      s.on("close", () => open.delete(s));
      s.on("error", () => {});
      s.on("data", (d: Buffer) => {
        got += d.toString("latin1");
        if (!path && got.includes("\r\n\r\n")) {
          path = got.split(" ")[1]!;
          s.write(answers[path] ?? "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
        if (path) raw.set(path, got.slice(got.indexOf("\r\n\r\n") + 4));
      });
    });
    const E = await listenLoopback(early);
    try {
      const head = (path: string) => `POST http://127.0.0.1:${E}${path} HTTP/1.1\r\nHost: 127.0.0.1:${E}\r\nTransfer-Encoding: chunked\r\n\r\n`;
      const small = Array.from({ length: 20 }, (_, i) => ({ data: `400\r\n${String.fromCharCode(97 + i).repeat(1024)}\r\n`, gapMs: 10 }));
      const large = 1 << 20;
      const paths = Object.keys(answers);
      const r = await converse([`127.0.0.1:${E}/e/*`], paths.map((path) => ({
        pieces: [{ data: head(path) }, ...small, { data: `${large.toString(16)}\r\n`, gapMs: 200 }, { data: Buffer.alloc(large, "L") }, { data: "\r\n0\r\n\r\n" }],
      })));
      paths.forEach((path, i) => {
        const end = endOf(r.egress, path);
        const data = chunkedData(raw.get(path) ?? "");
        expect(r.replies[i]!.got, path).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
        expect(end?.outcome, path).toMatch(/^completed/);
        // Every data byte the upstream received is on the record.
        expect(end?.bytesUp, `${path}: ${data.length} data bytes reached the upstream`).toBeGreaterThanOrEqual(data.length);
        // The body the upstream did not wait for goes nowhere: nothing of the large chunk after the answer.
        expect(data.includes("L"), `${path}: the large chunk reached the upstream after its answer`).toBe(false);
      });
    } finally {
      for (const s of open) s.destroy();
      await new Promise<void>((res) => early.close(() => res()));
    }
  }, 60_000);
});

describe("TCP urgent data inside chunk framing the engine reads", () => {
  it("an urgent byte inside a size line never reaches the upstream: the kernel drops it from the line, which the gate reads, and frames again, without it", async () => {
    // A large first chunk, so that the engine reads the framing after it (native/chunked.c's read_line). The
    // size line after it is "1", an urgent (out-of-band) "Z", then CRLF: read inline it would be malformed;
    // the kernel takes the urgent byte out of the stream (SO_OOBINLINE is off), so the line read is "1".
    const up = await rawUpstream({ answer: (soFar, s) => (soFar.endsWith("\r\n0\r\n\r\n") ? void s.end("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nstored") : undefined) });
    const P = up.port;
    const SIZE = 256 * 1024;
    const ws = mkdtempSync(join(tmpdir(), "vak-urgent-"));
    writeFileSync(
      join(ws, "urgent.py"),
      `import socket, time
s = socket.create_connection(("127.0.0.1", 3128))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(b"POST http://127.0.0.1:${P}/urgent HTTP/1.1\\r\\nHost: 127.0.0.1:${P}\\r\\nTransfer-Encoding: chunked\\r\\nConnection: close\\r\\n\\r\\n${SIZE.toString(16)}\\r\\n")
time.sleep(0.05)
s.sendall(b"U" * ${SIZE} + b"\\r\\n1")
time.sleep(0.2)
s.send(b"Z", socket.MSG_OOB)
time.sleep(0.2)
s.sendall(b"\\r\\na\\r\\n0\\r\\n\\r\\n")
s.settimeout(10)
got = b""
while True:
    d = s.recv(65536)
    if not d: break
    got += d
print(got.decode("latin1").split("\\r\\n")[0], got.endswith(b"stored"))
`,
    );
    try {
      const r = await runVak(["exec", "--json", "--allow-net", `127.0.0.1:${P}`, "--", "python3", join(ws, "urgent.py")], { cwd: ws });
      expect(r.stdout.trim(), r.stderr.slice(-2000)).toBe("HTTP/1.1 200 OK True");
      const raw = up.received();
      const body = raw.slice(raw.indexOf("\r\n\r\n") + 4);
      expect(squeeze(body)).toBe(squeeze(`${SIZE.toString(16)}\r\n${"U".repeat(SIZE)}\r\n1\r\na\r\n0\r\n\r\n`));
      expect(raw).not.toContain("Z");
      expect(endOf((r.summary?.egress ?? []) as EgressEvent[], "/urgent")?.outcome).toBe("completed");
    } finally {
      await up.close();
    }
  }, 60_000);
});
