/**
 * Strict HTTP/1.1 request framing for the egress gate. The gate reads requests
 * itself rather than through Node's HTTP server, so that it alone decides when
 * bytes are taken from a client (one request at a time, with backpressure,
 * every byte counted). It refuses whatever two parsers could read differently:
 * a bare CR or LF, a folded header or a space before the colon, Content-Length
 * together with Transfer-Encoding, a Transfer-Encoding in any form but one
 * list of known codings ending in chunked, one in HTTP/1.0, a repeated length
 * header, a header a lenient server would read as a framing one.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    /** Stable, for the record: refusals are counted by it. */
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** Header fields in the order and spelling received; never an object keyed by name. */
export type HeaderList = [name: string, value: string][];

export interface RequestHead {
  method: string;
  target: string;
  version: "1.0" | "1.1";
  headers: HeaderList;
}

/** How a body is delimited. A chunked body's codings are those its Transfer-Encoding named before chunked (lower-cased): end-to-end content the gate passes on, not decodes. */
export type Framing = { kind: "none" } | { kind: "length"; length: number } | { kind: "chunked"; codings: string[] };

/** Where bytes come from: the gate's reader over a client socket. */
export interface ByteSource {
  /** Up to max bytes; null at the end of the stream. */
  read(max?: number): Promise<Buffer | null>;
  /** One CRLF-terminated line, without the CRLF. */
  readLine(max: number): Promise<string>;
}

const METHOD = /^[A-Z]{1,20}$/;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const TARGET = /^[\x21-\x7e]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const MAX_HEADERS = 100;
const MAX_CHUNK_LINE = 1024;
const MAX_TRAILERS = 32;

const bad = (message: string) => new HttpError(400, "bad-request", message);

/** The offset just past the blank line that ends a head in buf, or -1. A head
 *  ending in bare LFs ends here too, so that it is refused rather than waited for. */
export function headEnd(buf: Buffer): number {
  const crlf = buf.indexOf("\n\r\n");
  const lf = buf.indexOf("\n\n");
  if (crlf < 0 && lf < 0) return -1;
  return crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 3 : lf + 2;
}

/** Parses a request head, blank line included, as headEnd found it. */
export function parseRequestHead(raw: Buffer): RequestHead {
  const lines = headLines(raw, bad, "request head");
  const m = /^([^ ]+) ([^ ]+) HTTP\/1\.([01])$/.exec(lines[0]!);
  if (!m || !METHOD.test(m[1]!) || !TARGET.test(m[2]!)) throw bad("a malformed request line");
  return { method: m[1]!, target: m[2]!, version: m[3] === "1" ? "1.1" : "1.0", headers: fields(lines.slice(1), bad) };
}

/** The lines of a head (CRLF-terminated, no bare CR or LF), blank line removed. */
function headLines(raw: Buffer, fail: (message: string) => HttpError, what: string): string[] {
  const text = raw.toString("latin1");
  if (!text.endsWith("\r\n\r\n")) throw fail(`a line of the ${what} ends in a bare LF`);
  const lines = text.slice(0, -4).split("\r\n");
  if (lines.some((l) => l.includes("\r") || l.includes("\n"))) throw fail(`a bare CR or LF in the ${what}`);
  return lines;
}

function fields(lines: string[], fail: (message: string) => HttpError): HeaderList {
  const headers: HeaderList = [];
  for (const line of lines) {
    const colon = line.indexOf(":");
    const name = line.slice(0, Math.max(colon, 0));
    // A leading space (obsolete folding) or a space before the colon fails the token test.
    if (!TOKEN.test(name)) throw fail("a malformed header line");
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (!FIELD_VALUE.test(value)) throw fail(`control characters in the ${name} header`);
    headers.push([name, value]);
  }
  if (headers.length > MAX_HEADERS) throw fail === bad ? new HttpError(431, "head-too-large", `more than ${MAX_HEADERS} header fields`) : fail(`more than ${MAX_HEADERS} header fields`);
  return headers;
}

export interface ResponseHead {
  version: "1.0" | "1.1";
  status: number;
  reason: string;
  headers: HeaderList;
}

const badUpstream = (message: string) => new HttpError(502, "bad-response", `the upstream's response: ${message}`);

/**
 * Parses a response head from an upstream, as strictly as a request: what two
 * parsers could read differently (folding, bare CR or LF, a space before a
 * colon) is refused, not repaired.
 */
export function parseResponseHead(raw: Buffer): ResponseHead {
  const lines = headLines(raw, badUpstream, "response head");
  const m = /^HTTP\/1\.([01]) ([0-9]{3})(?: ([^]*))?$/.exec(lines[0]!);
  if (!m) throw badUpstream("a malformed status line");
  return { version: m[1] === "1" ? "1.1" : "1.0", status: Number(m[2]), reason: m[3] ?? "", headers: fields(lines.slice(1), badUpstream) };
}

/** How a response's body is delimited (RFC 9112, 6.3); every ambiguous combination is refused. */
export function responseFraming(head: ResponseHead, method: string): Framing | { kind: "close" } {
  lookalikes(head.headers, badUpstream);
  const te = headerValues(head.headers, "transfer-encoding");
  const cl = headerValues(head.headers, "content-length");
  if (te.length && cl.length) throw badUpstream("both Content-Length and Transfer-Encoding");
  if (cl.length && (cl.length !== 1 || !/^[0-9]{1,15}$/.test(cl[0]!))) throw badUpstream("a malformed or repeated Content-Length");
  const codings = te.length ? transferCodings(te, head.version, badUpstream) : undefined;
  if (method === "HEAD" || head.status === 204 || head.status === 304 || head.status < 200) return { kind: "none" };
  if (codings) return { kind: "chunked", codings };
  if (cl.length) {
    const length = Number(cl[0]);
    return length === 0 ? { kind: "none" } : { kind: "length", length };
  }
  return { kind: "close" };
}

/** Codings a Transfer-Encoding may name before its final chunked: the registered compressions, end to end. */
const CODINGS: ReadonlySet<string> = new Set(["gzip", "x-gzip", "deflate", "compress", "x-compress"]);
const MAX_CODINGS = 4;

/**
 * The codings one Transfer-Encoding header names before its final chunked
 * (RFC 9112, 6.1), lower-cased, spaces around each dropped. Only that form is
 * unambiguous: any other (chunked not last, twice, with parameters, an
 * unknown or empty coding, a second header, in HTTP/1.0) is a request two
 * parsers can frame differently, and is refused.
 */
export function transferCodings(values: string[], version: "1.0" | "1.1", fail: (message: string) => HttpError): string[] {
  if (values.length !== 1) throw fail("more than one Transfer-Encoding header");
  // RFC 9112, 6.1: an HTTP/1.0 message with a Transfer-Encoding has faulty framing, whatever else it says.
  if (version === "1.0") throw fail("a Transfer-Encoding in an HTTP/1.0 message, whose framing is then faulty (RFC 9112, 6.1)");
  const items = values[0]!.split(",").map((c) => c.replace(/^[ \t]+|[ \t]+$/g, "").toLowerCase());
  if (items.at(-1) !== "chunked") throw fail("a Transfer-Encoding whose last coding is not chunked");
  const codings = items.slice(0, -1);
  if (codings.length > MAX_CODINGS) throw fail(`a Transfer-Encoding with more than ${MAX_CODINGS} codings before chunked`);
  for (const c of codings)
    if (!CODINGS.has(c)) throw fail(`a transfer coding before chunked other than ${[...CODINGS].join(", ")} (chunked is allowed once, last, without parameters)`);
  return codings;
}

/** The one spelling of a body's framing on the wire: the codings, then chunked. */
export function transferEncoding(codings: readonly string[]): string {
  return [...codings, "chunked"].join(", ");
}

/**
 * Refuses a header that a lenient server reads as a framing header (an
 * underscore for the hyphen: CGI-style gateways fold both to one name). The
 * gate does not frame by it, so such a server and the gate would read the
 * body differently.
 */
function lookalikes(headers: HeaderList, fail: (message: string) => HttpError): void {
  for (const [n] of headers) {
    const folded = n.toLowerCase().replace(/_/g, "-");
    if (n.includes("_") && (folded === "content-length" || folded === "transfer-encoding"))
      throw fail(`a header named like ${folded === "content-length" ? "Content-Length" : "Transfer-Encoding"} with an underscore, which some servers read as that header; send the header itself`);
  }
}

/** Every value of a header, matched without regard to case. */
export function headerValues(headers: HeaderList, name: string): string[] {
  const lower = name.toLowerCase();
  const out: string[] = [];
  // Plain loops: these run several times for every request and answer (flatMap and friends cost more here).
  for (const [n, v] of headers) if (n.length === lower.length && n.toLowerCase() === lower) out.push(v);
  return out;
}

/** The header names a Connection header nominates, lower-cased. */
export function connectionTokens(headers: HeaderList): Set<string> {
  const tokens = new Set<string>();
  for (const v of headerValues(headers, "connection"))
    for (const t of v.split(",")) {
      const token = t.trim().toLowerCase();
      if (token) tokens.add(token);
    }
  return tokens;
}

/** How a request's body is delimited; refuses every ambiguous combination. */
export function requestFraming(headers: HeaderList, version: "1.0" | "1.1" = "1.1"): Framing {
  lookalikes(headers, bad);
  const te = headerValues(headers, "transfer-encoding");
  const cl = headerValues(headers, "content-length");
  if (te.length && cl.length) throw bad("both Content-Length and Transfer-Encoding");
  if (te.length) {
    // An unknown coding is a 501 (RFC 9112, 6.1); a form that could be read two ways is a 400.
    const codings = transferCodings(te, version, (m) => (/^a transfer coding/.test(m) ? new HttpError(501, "bad-framing", m) : new HttpError(400, "bad-framing", m)));
    return { kind: "chunked", codings };
  }
  if (cl.length) {
    if (cl.length !== 1 || !/^[0-9]{1,15}$/.test(cl[0]!)) throw bad("a malformed or repeated Content-Length");
    const length = Number(cl[0]);
    return length === 0 ? { kind: "none" } : { kind: "length", length };
  }
  return { kind: "none" };
}

/** The size a chunk's size line gives (extensions allowed and dropped); throws on any other line. */
export function chunkSize(line: string): number {
  const m = /^([0-9A-Fa-f]{1,12})(?:[ \t]*;[\t\x20-\x7e]*)?$/.exec(line);
  if (!m) throw bad("a malformed chunk size line");
  return parseInt(m[1]!, 16);
}

/** Reads a chunked body's chunk size line. */
export function chunkLine(src: ByteSource): Promise<string> {
  return src.readLine(MAX_CHUNK_LINE);
}

/** Reads the trailer fields after the last chunk, and the blank line; they are dropped (nothing after the body is forwarded). */
export async function dropTrailers(src: ByteSource): Promise<void> {
  for (let n = 0; (await src.readLine(MAX_CHUNK_LINE)) !== ""; n++) if (n >= MAX_TRAILERS) throw bad("too many trailer fields");
}

/** Reads the CRLF that ends a chunk's data. */
export async function chunkEnd(src: ByteSource): Promise<void> {
  if ((await src.readLine(0)) !== "") throw bad("chunk data longer than its size");
}

/** The body's bytes, decoded from its framing; throws on a malformed chunk or an early end. */
export async function* bodyPieces(src: ByteSource, framing: Framing): AsyncGenerator<Buffer> {
  if (framing.kind === "none") return;
  if (framing.kind === "length") return yield* exactly(src, framing.length);
  for (;;) {
    const size = chunkSize(await chunkLine(src));
    if (size === 0) return dropTrailers(src);
    yield* exactly(src, size);
    await chunkEnd(src);
  }
}

async function* exactly(src: ByteSource, length: number): AsyncGenerator<Buffer> {
  for (let left = length; left > 0; ) {
    const b = await src.read(left);
    if (!b) throw new HttpError(400, "incomplete", "the connection closed in the middle of the body");
    left -= b.length;
    yield b;
  }
}

/** One chunk of a chunked body. */
export function chunk(data: Buffer): Buffer[] {
  return [Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from("\r\n")];
}

/** A response head as bytes; names and values go out exactly as given (latin1). */
export function responseHead(status: number, reason: string, headers: HeaderList): Buffer {
  return Buffer.from(`HTTP/1.1 ${status} ${reason}\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n`, "latin1");
}

/**
 * A request head as bytes, for an upstream. Every name must be a token and
 * every value a field value: what the gate adds (a secret, a placeholder's
 * value) can never start a header or a request of its own.
 */
export function requestHead(method: string, path: string, headers: HeaderList): Buffer {
  if (!METHOD.test(method) || !TARGET.test(path)) throw new HttpError(400, "bad-request", "a request line the gate will not send");
  for (const [n, v] of headers)
    if (!TOKEN.test(n) || !FIELD_VALUE.test(v)) throw new HttpError(502, "bad-header", `the gate will not send the ${TOKEN.test(n) ? n : "(malformed)"} header: it holds a character a header cannot`);
  return Buffer.from(`${method} ${path} HTTP/1.1\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n`, "latin1");
}

/** Header fields that describe one connection, never passed on. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
  "transfer-encoding", "upgrade",
]);

/** A reason phrase from an upstream, or none when it holds anything odd. */
export function safeReason(text: string | undefined): string {
  return text !== undefined && FIELD_VALUE.test(text) && text.length <= 200 ? text : "";
}
