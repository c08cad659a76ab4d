/**
 * A secret the gate put into a request must not come back to the command in the answer: a host that
 * reflects request headers (httpbin's /headers, an error page quoting the token it refused, a redirect
 * carrying it) would otherwise hand the command the value. The answer to such a request is passed through
 * this replacer, which turns every occurrence of each injected value, in each form below, back into its
 * placeholder, in the head and in the body, wherever the answer's chunks, reads or TLS records cut it.
 *
 * Forms searched, each only where it differs from the raw one (the placeholder is put in the same form):
 * the value's bytes (latin1, as it went in the header, and UTF-8); JSON string escaping (`\"`, `\\`, `\t`,
 * with and without `\/`, non-ASCII and `<>&` as `\uXXXX`); URL encoding (encodeURIComponent, with upper- and
 * lower-case hex, and `+` for a space; RFC 3986's strict form, `!'()*` encoded too, with `+` for a space or
 * `/` left as it is, as Python's quote writes it; Go's PathEscape); HTML escaping (`&amp; &lt; &gt; &quot;` and
 * `'` as `&#39;` or `&#x27;`; Go's, with `&#34;` for `"` and, as html/template writes it, `&#43;` for `+`).
 * Each is one encoder's whole output: a host that encodes some other set of characters is not followed.
 * Not searched: base64 or any other re-encoding (a host that re-encodes the value is not quoting
 * it, and no filter can follow every encoding; base64 would also need three alignments and could not be
 * replaced soundly inside the encoded text), a value cut into pieces, or one a host sends in the answer to
 * another request.
 *
 * Memory is bounded: after each push the replacer holds at most the longest form less one byte. A match is
 * chosen leftmost, then longest, and only where every longer candidate starting there is whole in view, so
 * the output does not depend on where the input was cut.
 */

import type { Socket } from "node:net";
import { queued } from "./hold.js";
import { type ByteSource, bodyPieces, chunk, type Framing, type HeaderList, headerValues, HttpError, type ResponseHead, responseFraming } from "./http1.js";
import { UpstreamError } from "./outcome.js";

/** A secret put into a request: its value, and what the command knows it by. */
export interface Injected {
  value: string;
  placeholder: string;
}

interface Form {
  find: Buffer;
  put: Buffer;
}

const utf8 = (s: string) => Buffer.from(s, "utf8");
const uEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
const json = (s: string) => JSON.stringify(s).slice(1, -1);
const url = (s: string) => encodeURIComponent(s);
const html = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
/** Percent-encoding of all but RFC 3986's unreserved characters (PHP rawurlencode, Python quote(safe=""), Go QueryEscape but for space). */
const strict = (s: string) => url(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
/** Go's url.PathEscape: "$&+:=@" left as they are. */
const goPath = (s: string) => strict(s).replace(/%(24|26|2B|3A|3D|40)/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
/** Go's html.EscapeString and html/template (which also writes "+" as "&#43;"). */
const goHtml = (s: string) => s.replace(/&/g, "&amp;").replace(/'/g, "&#39;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&#34;");

/** Each way a quoting host may write a text: the bytes of the text in that form. */
const ENCODINGS: readonly ((s: string) => Buffer)[] = [
  (s) => Buffer.from(s, "latin1"),
  utf8,
  (s) => utf8(json(s)),
  (s) => utf8(json(s).replace(/\//g, "\\/")),
  (s) => utf8(json(s).replace(/[\u0080-\uffff]/g, uEscape)),
  (s) => utf8(json(s).replace(/[\u0080-\uffff<>&]/g, uEscape)),
  (s) => utf8(json(s).replace(/\//g, "\\/").replace(/[\u0080-\uffff]/g, uEscape)),
  (s) => utf8(url(s)),
  (s) => utf8(url(s).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase())),
  (s) => utf8(url(s).replace(/%20/g, "+")),
  (s) => utf8(strict(s)),
  (s) => utf8(strict(s).replace(/%20/g, "+")),
  (s) => utf8(strict(s).replace(/%2F/g, "/")),
  (s) => utf8(goPath(s)),
  (s) => utf8(html(s).replace(/'/g, "&#39;")),
  (s) => utf8(html(s).replace(/'/g, "&#x27;")),
  (s) => utf8(goHtml(s)),
  (s) => utf8(goHtml(s).replace(/\+/g, "&#43;")),
];

/** The distinct forms of each secret's value, each with its placeholder in the same form. */
export function formsOf(secrets: readonly Injected[]): Form[] {
  const seen = new Set<string>();
  const out: Form[] = [];
  for (const s of secrets) {
    if (!s.value) continue;
    for (const enc of ENCODINGS) {
      const find = enc(s.value);
      const key = find.toString("hex");
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ find, put: enc(s.placeholder) });
    }
  }
  return out;
}

/** A streaming replacer for one answer. */
export class Reflected {
  private readonly forms: Form[];
  private readonly hold: number;
  private tail: Buffer = Buffer.alloc(0);
  /** Occurrences replaced so far (head and body), for the record. */
  count = 0;

  constructor(secrets: readonly Injected[]) {
    this.forms = formsOf(secrets);
    this.hold = Math.max(0, ...this.forms.map((f) => f.find.length - 1));
  }

  /** The bytes that may go on now; up to the longest form less one byte is held back for the next push. */
  push(chunk: Buffer): Buffer {
    const data = this.tail.length ? Buffer.concat([this.tail, chunk]) : chunk;
    const { out, rest } = this.scan(data, data.length - this.hold);
    this.tail = Buffer.from(rest); // a copy: the caller's buffer is not kept
    return out;
  }

  /** What is still held, replaced: the answer's end. */
  end(): Buffer {
    const data = this.tail;
    this.tail = Buffer.alloc(0);
    return this.scan(data, data.length).out;
  }

  /** A whole text (a response head), replaced at once; what push holds is not touched. */
  whole(data: Buffer): Buffer {
    return this.scan(data, data.length).out;
  }

  /** Replaces the matches that start before limit; returns what may go on and what must wait. */
  private scan(data: Buffer, limit: number): { out: Buffer; rest: Buffer } {
    const parts: Buffer[] = [];
    let pos = 0;
    // Each form's next occurrence at or after pos (-1: none), found again only once pos has passed it.
    const next = this.forms.map((f) => data.indexOf(f.find));
    for (;;) {
      let best = -1;
      for (let i = 0; i < this.forms.length; i++) {
        if (next[i]! >= 0 && next[i]! < pos) next[i] = data.indexOf(this.forms[i]!.find, pos);
        const at = next[i]!;
        if (at < 0 || at >= limit) continue;
        if (best < 0 || at < next[best]! || (at === next[best]! && this.forms[i]!.find.length > this.forms[best]!.find.length)) best = i;
      }
      if (best < 0) break;
      const at = next[best]!;
      const f = this.forms[best]!;
      parts.push(data.subarray(pos, at), f.put);
      pos = at + f.find.length;
      this.count++;
    }
    const cut = Math.max(pos, limit);
    parts.push(data.subarray(pos, cut));
    return { out: parts.length === 1 ? parts[0]! : Buffer.concat(parts), rest: data.subarray(cut) };
  }
}

const LAST_CHUNK = Buffer.from("0\r\n\r\n");

/** What the command is shown in place of a header secret's value that has no placeholder of its own. */
export const WITHHELD = "vak-secret-withheld";

/** Headers that would make an answer unsearchable: an encoded body, or a range (the value in pieces, one per request). */
const UNSEARCHABLE: ReadonlySet<string> = new Set(["accept-encoding", "range", "if-range"]);

/** A request's headers as sent when its answer will be searched: the whole body, unencoded. */
export function searchable(headers: HeaderList): HeaderList {
  return [...headers.filter(([n]) => !UNSEARCHABLE.has(n.toLowerCase())), ["Accept-Encoding", "identity"]];
}

/**
 * Why an answer to a request carrying a secret cannot be passed on, if it cannot: a body in a content or
 * transfer coding (the gate asked for identity), which would hide the value from the search.
 */
export function unsearchable(headers: HeaderList, framing: Framing | { kind: "close" }): string | undefined {
  if (framing.kind === "none") return undefined;
  const coded = headerValues(headers, "content-encoding").flatMap((v) => v.split(",")).map((t) => t.trim().toLowerCase()).filter((t) => t && t !== "identity");
  if (framing.kind === "chunked" && framing.codings.length) coded.push(...framing.codings);
  if (!coded.length) return undefined;
  return `it sent its answer encoded (${coded.join(", ")}) though the gate asked for identity; the answer to a request carrying a gate-held secret is searched for the secret's value before the command gets it, and an encoded body cannot be searched, so it was not passed on`;
}

/** The replacer for the answer to a request that carried these secrets; throws (a 502 for the client) if the answer cannot be searched. */
export function searched(res: ResponseHead, method: string, injected: readonly Injected[]): Reflected {
  const why = unsearchable(res.headers, responseFraming(res, method));
  if (why) throw new UpstreamError(why);
  return new Reflected(injected);
}

/**
 * Moves one answer's body through the replacer: read by its framing (a length, chunks, or until the
 * upstream ends), replaced, and framed again for the client (chunks for an HTTP/1.1 client, whatever the
 * upstream's framing was, since a replacement changes the length; the data alone for an HTTP/1.0 one, whose
 * body then ends with the connection). Returns the body bytes read from the upstream.
 */
export async function relayReplaced(src: ByteSource, to: Socket, framing: Framing | { kind: "close" }, mode: "none" | "length" | "chunked" | "close", r: Reflected): Promise<number> {
  if (framing.kind === "none") return 0;
  let moved = 0;
  const send = async (d: Buffer) => {
    if (d.length) await queued(to, mode === "chunked" ? Buffer.concat(chunk(d)) : d);
  };
  const pieces = framing.kind === "close" ? untilEnd(src) : bodyPieces(src, framing);
  try {
    for await (const p of pieces) {
      moved += p.length;
      await send(r.push(p));
    }
  } catch (e) {
    if (e instanceof HttpError && e.code === "incomplete") throw new UpstreamError("it closed the connection in the middle of its response body");
    if (e instanceof HttpError) throw new UpstreamError(`its response body: ${e.message}`);
    throw e;
  }
  await send(r.end());
  if (mode === "chunked") await queued(to, LAST_CHUNK);
  return moved;
}

async function* untilEnd(src: ByteSource): AsyncGenerator<Buffer> {
  for (let b = await src.read(); b; b = await src.read()) yield b;
}
