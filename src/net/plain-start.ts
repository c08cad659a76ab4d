import { METHODS } from "node:http";

/**
 * Whether the first bytes a client sends in an opaque tunnel (not TLS) are an
 * HTTP/1 request. A server behind the CONNECT target's address may host other
 * names, and picks one by the Host header, so plain HTTP inside a tunnel is not
 * spliced blind: it is served as requests, each one decided (connect.ts). The
 * reading is lenient, as lenient as a server that might answer: after any empty
 * lines, a known method in any case (Node's, IANA's registry, and HTTP/2's preface, PRI) starts a request;
 * so does any first line with "HTTP/" in it (a method the gate does not know).
 * The gate's own parser then refuses what it cannot read (lowercase methods,
 * bare LFs, h2c). Whitespace is what the most lenient server splits a request
 * line on: Python's http.server (and wsgiref) uses str.split(), which also
 * splits on \v, \f, \x1c-\x1f, \x85 and \xa0, and drops them before the method.
 * Decided as soon as the bytes allow, so that a client-first protocol is not
 * held: SSH's banner, Redis, a binary startup message go on at once.
 * Not caught: a request with a method the gate does not know, whose first
 * bytes came alone, before a space (the server must also act on such a method):
 * a word alone is what client-first protocols send too (STREAM, go), and is
 * not held.
 */
export type PlainStart = "http" | "other" | "partial";

/**
 * Node's methods, and those a server may serve that Node does not know: the rest of IANA's HTTP method registry
 * (WebDAV's versioning among them) and caches' BAN. A request with one of these is caught in any pieces (the
 * gate's parser then reads it, or refuses a name with "-" in it).
 */
const REGISTERED = [
  "PRI", "BAN", "BASELINE-CONTROL", "CHECKIN", "LABEL", "MKREDIRECTREF", "MKWORKSPACE", "ORDERPATCH", "UNCHECKOUT", "UPDATE",
  "UPDATEREDIRECTREF", "VERSION-CONTROL",
];
const KNOWN = [...new Set([...METHODS, ...REGISTERED].map((m) => m.toUpperCase()))];

/** A first line this long with no end is treated as HTTP, and refused by the parser (a head too large). */
const MAX_LINE = 8192;

/** The bytes some server splits a request line on, or skips before one (str.split()'s whitespace, in latin-1). */
const SPACE = new Uint8Array(256);
for (const c of [9, 10, 11, 12, 13, 0x1c, 0x1d, 0x1e, 0x1f, 32, 0x85, 0xa0]) SPACE[c] = 1;

export function plainStart(b: Buffer): PlainStart {
  let i = 0;
  // Leading empty lines and blanks, which servers skip before a request.
  while (i < b.length && SPACE[b[i]!]) i++;
  // No method yet after this many: read as HTTP, and refused by the parser (a head too large), not buffered on.
  if (i > MAX_LINE) return "http";
  const start = i;
  // The first word: a known method (or the start of one) is a request.
  while (i < b.length && !SPACE[b[i]!]) i++;
  const word = b.subarray(start, i).toString("latin1").toUpperCase();
  const ended = i < b.length;
  if (!word) return "partial";
  if (ended ? KNOWN.includes(word) : KNOWN.some((m) => m.startsWith(word))) {
    if (!ended) return "partial";
    // A known method that ends its line has no target: no request line, but STOMP's CONNECT frame. Its line is
    // read whole as any other's ("GET\r/ HTTP/1.1" is one to a server that splits on the CR).
    return b[i] === 10 || b[i] === 13 ? lineIsHttp(b, start, true) : "http";
  }
  // A word no method starts with, and nothing after it yet: not a request the gate knows.
  if (!ended) return "other";
  return lineIsHttp(b, start, METHOD_LIKE.test(word) && word === b.subarray(start, i).toString("latin1"));
}

/** A first word in nginx's alphabet for methods, capitals and "_" ("-" for M-SEARCH's kind): it may be a method the gate does not know. */
const METHOD_LIKE = /^[A-Z_-]+$/;

/**
 * A first line that is not a known method's: HTTP if "HTTP/" is in it; awaited whole. After a method-like word
 * the whole line is read, whatever bytes it holds (Python's http.server takes "FOO /x\x01 HTTP/1.1" for FOO);
 * after another, a control byte ends the wait, so that a binary protocol is not held for a line end.
 */
function lineIsHttp(b: Buffer, start: number, methodLike: boolean): PlainStart {
  const http = (end: number) => /HTTP\//i.test(b.subarray(start, end).toString("latin1"));
  for (let i = start; i < b.length; i++) {
    const c = b[i]!;
    if (c === 10) return http(i) ? "http" : "other";
    // A control byte (but whitespace) is in no request line: HTTP only if its version was already there.
    if (!methodLike && ((c < 32 && !SPACE[c]) || c === 127)) return http(i) ? "http" : "other";
  }
  return b.length - start > MAX_LINE ? "http" : "partial";
}
