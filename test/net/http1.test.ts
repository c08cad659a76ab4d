import { describe, expect, it } from "vitest";
import { bodyPieces, type ByteSource, headEnd, HttpError, parseRequestHead, requestFraming } from "../../src/net/http1.js";

const head = (text: string) => parseRequestHead(Buffer.from(text, "latin1"));

/** A byte source over fixed text, delivered in pieces of the given size. */
function source(text: string, piece = 3): ByteSource {
  let rest = Buffer.from(text, "latin1");
  const read = async (max = Infinity) => {
    if (!rest.length) return null;
    const n = Math.min(piece, max, rest.length);
    const b = rest.subarray(0, n);
    rest = rest.subarray(n);
    return b;
  };
  return {
    read,
    readLine: async (max) => {
      let line = "";
      for (;;) {
        const b = await read(1);
        if (!b) throw new HttpError(400, "incomplete", "eof");
        line += b.toString("latin1");
        if (line.endsWith("\r\n")) return line.slice(0, -2);
        if (line.length > max + 2) throw new HttpError(400, "bad-request", "long");
      }
    },
  };
}

async function body(text: string, framing = requestFraming([["Transfer-Encoding", "chunked"]])): Promise<string> {
  let out = "";
  for await (const b of bodyPieces(source(text), framing)) out += b.toString("latin1");
  return out;
}

// The gate's own request parser: anything two HTTP parsers could read
// differently is refused, so that what the gate checks is what the upstream gets.
describe("request heads", () => {
  it("parses a proxy request, keeping header names as written and in order", () => {
    expect(head("GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\nX-A:  1 \r\nx-a: 2\r\n\r\n")).toEqual({
      method: "GET", target: "http://a.test/x", version: "1.1", headers: [["Host", "a.test"], ["X-A", "1"], ["x-a", "2"]],
    });
  });

  it.each([
    ["a bare LF ending a line", "GET http://a.test/ HTTP/1.1\nHost: a.test\r\n\r\n"],
    ["a bare CR inside a line", "GET http://a.test/ HTTP/1.1\r\nHost: a.test\rX: y\r\n\r\n"],
    ["a folded header", "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n folded\r\n\r\n"],
    ["a space before the colon", "GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n"],
    ["a NUL in a value", "GET http://a.test/ HTTP/1.1\r\nHost: a.te\0st\r\n\r\n"],
    ["a lower-case method", "get http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"],
    ["a space in the target", "GET http://a.test/a b HTTP/1.1\r\nHost: a.test\r\n\r\n"],
    ["a non-ASCII target", "GET http://a.test/\xe9 HTTP/1.1\r\nHost: a.test\r\n\r\n"],
    ["HTTP/2 on an HTTP/1 connection", "GET http://a.test/ HTTP/2.0\r\nHost: a.test\r\n\r\n"],
    ["a header line without a colon", "GET http://a.test/ HTTP/1.1\r\nHost a.test\r\n\r\n"],
  ])("refuses %s", (_t, text) => {
    expect(() => head(text)).toThrow(HttpError);
  });

  it("finds the end of a head, and of one ending in bare LFs so that it is refused rather than awaited", () => {
    expect(headEnd(Buffer.from("GET / HTTP/1.1\r\nA: b\r\n\r\nBODY"))).toBe(24);
    expect(headEnd(Buffer.from("GET / HTTP/1.1\nA: b\n\nBODY"))).toBe(21);
    expect(headEnd(Buffer.from("GET / HTTP/1.1\r\nA: b\r\n"))).toBe(-1);
  });
});

describe("request framing", () => {
  it.each([
    [[], { kind: "none" }],
    [[["Content-Length", "0"]], { kind: "none" }],
    [[["Content-Length", "12"]], { kind: "length", length: 12 }],
    [[["transfer-encoding", "Chunked"]], { kind: "chunked", codings: [] }],
    [[["Transfer-Encoding", "gzip, chunked"]], { kind: "chunked", codings: ["gzip"] }],
    [[["Transfer-Encoding", "Deflate,chunked"]], { kind: "chunked", codings: ["deflate"] }],
  ] as const)("%j frames as %j", (headers, framing) => {
    expect(requestFraming(headers.map(([n, v]) => [n, v]))).toEqual(framing);
  });

  it.each([
    ["Content-Length with Transfer-Encoding", [["Content-Length", "4"], ["Transfer-Encoding", "chunked"]]],
    ["two Content-Lengths, even equal", [["Content-Length", "2"], ["content-length", "2"]]],
    ["a Content-Length list", [["Content-Length", "2, 2"]]],
    ["a signed Content-Length", [["Content-Length", "+2"]]],
    ["a coding alone, without chunked", [["Transfer-Encoding", "gzip"]]],
    ["chunked before another coding", [["Transfer-Encoding", "chunked, gzip"]]],
    ["an unknown coding before chunked", [["Transfer-Encoding", "identity, chunked"]]],
    ["chunked twice in one header", [["Transfer-Encoding", "chunked, chunked"]]],
    ["an empty coding", [["Transfer-Encoding", "gzip,,chunked"]]],
    ["a coding with parameters", [["Transfer-Encoding", "chunked;q=1"]]],
    ["a name that is not chunked", [["Transfer-Encoding", "xchunked"]]],
    ["Transfer_Encoding, which lenient servers read as Transfer-Encoding", [["Transfer_Encoding", "chunked"]]],
    ["Content_Length, which lenient servers read as Content-Length", [["Content_Length", "5"]]],
    ["chunked twice", [["Transfer-Encoding", "chunked"], ["Transfer-Encoding", "chunked"]]],
  ])("refuses %s", (_t, headers) => {
    expect(() => requestFraming(headers.map(([n, v]) => [n!, v!]))).toThrow(HttpError);
  });

  it("decodes chunked bodies and drops trailers", async () => {
    expect(await body("3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: t\r\n\r\nNEXT")).toBe("abcde");
    expect(await body("hello", { kind: "length", length: 5 })).toBe("hello");
  });

  it.each([
    ["a size that is not hex", "xyz\r\nabc\r\n0\r\n\r\n"],
    ["data longer than its size", "2\r\nabc\r\n0\r\n\r\n"],
    ["a bare LF after a size", "3\nabc\r\n0\r\n\r\n"],
    ["a size too large to be real", "10000000000000002\r\nab\r\n0\r\n\r\n"],
    ["an end before the last chunk", "3\r\nabc\r\n"],
  ])("refuses a chunked body with %s", async (_t, text) => {
    await expect(body(text)).rejects.toBeInstanceOf(HttpError);
  });
});
