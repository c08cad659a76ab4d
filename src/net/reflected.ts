/**
 * A secret the gate put into a request must not come back to the command in the answer: a host that
 * reflects request headers (httpbin's /headers, an error page quoting the token it refused, a redirect
 * carrying it) would otherwise hand the command the value. The answer to such a request is passed through
 * this replacer, which turns every occurrence of each injected value, in each form below, back into its
 * placeholder, in the head and in the body, wherever the answer's chunks, reads or TLS records cut it.
 *
 * Forms searched: every spelling a quoting host may give each character of the value, in any mix
 * (`reflected-forms.ts`). The placeholder is put as it is (ASCII that no encoder changes).
 *
 * Memory is bounded: after each push the replacer holds only the end of what came that could still become
 * a match (at most the longest match less one byte), so a streamed answer is not held back for nothing. A match
 * is chosen leftmost, then longest, and only where no longer one could start there once more comes, so the
 * output does not depend on where the input was cut.
 */

import type { Socket } from "node:net";
import { queued } from "./hold.js";
import { type ByteSource, bodyPieces, chunk, type Framing, type HeaderList, headerValues, HttpError, type ResponseHead, responseFraming } from "./http1.js";
import { UpstreamError } from "./outcome.js";
import { encodedForms, type ValueForms, valueForms } from "./reflected-forms.js";

/** A secret put into a request: its value, and what the command knows it by. */
export interface Injected {
  value: string;
  placeholder: string;
}

interface Form extends ValueForms {
  put: Buffer;
}

/**
 * Each value's forms, kept while answers keep needing them (a pattern costs milliseconds to build, and every
 * request carrying the secret has its answer searched): dropped after a minute unused, so that a resident host
 * does not keep the values of runs long ended; 64 at most.
 */
const cache = new Map<string, { forms: ValueForms[]; used: number }>();
const CACHE_MS = 60_000;

function cachedForms(value: string): ValueForms[] {
  const now = Date.now();
  for (const [v, e] of cache) if (now - e.used > CACHE_MS) cache.delete(v);
  const hit = cache.get(value);
  if (hit) return (hit.used = now), hit.forms;
  if (cache.size >= 64) cache.delete(cache.keys().next().value!);
  const forms = [valueForms(value), ...encodedForms(value)];
  cache.set(value, { forms, used: now });
  return forms;
}

/** The distinct values' forms, each with its placeholder. */
export function formsOf(secrets: readonly Injected[]): Form[] {
  const out = new Map<string, Form[]>();
  for (const s of secrets) if (s.value && !out.has(s.value)) out.set(s.value, cachedForms(s.value).map((f) => ({ ...f, put: Buffer.from(s.placeholder, "latin1") })));
  return [...out.values()].flat();
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
    this.hold = Math.max(0, ...this.forms.map((f) => f.longest - 1));
  }

  /** The bytes that may go on now; the end that could still become a match is held back for the next push. */
  push(chunk: Buffer): Buffer {
    const data = this.tail.length ? Buffer.concat([this.tail, chunk]) : chunk;
    const { out, rest } = this.scan(data, this.undecided(data));
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

  /** Where the end of data that could still become a match (or a longer one) starts: data.length if none. */
  private undecided(data: Buffer): number {
    const from = Math.max(0, data.length - this.hold);
    let tail: string | undefined;
    for (let q = from; q < data.length; q++)
      for (const f of this.forms)
        if (f.starts.includes(data[q]!) && f.couldGrow((tail ??= data.toString("latin1", from)).slice(q - from))) return q;
    return data.length;
  }

  /** Replaces the matches that start before limit; returns what may go on and what must wait. */
  private scan(data: Buffer, limit: number): { out: Buffer; rest: Buffer } {
    const parts: Buffer[] = [];
    let text: string | undefined; // the data as latin1 (a byte a character: indexes are the buffer's), made when first needed
    let pos = 0;
    // A form's first match at or after from that starts before limit (undefined: none): its pattern runs from the
    // first of its start bytes, found by indexOf (native), so that data with none of them is not matched at all.
    const find = (f: Form, from: number) => {
      if (f.literals) {
        let hit: { at: number; length: number } | undefined;
        for (const l of f.literals) {
          const x = data.indexOf(l, from);
          if (x >= 0 && x < limit && (!hit || x < hit.at || (x === hit.at && l.length > hit.length))) hit = { at: x, length: l.length };
        }
        return hit;
      }
      let p = -1;
      for (const b of f.starts) {
        const x = data.indexOf(b, from);
        if (x >= 0 && (p < 0 || x < p)) p = x;
      }
      if (p < 0 || p >= limit) return undefined;
      text ??= data.toString("latin1");
      f.find.lastIndex = p;
      const m = f.find.exec(text);
      return m && m.index < limit ? { at: m.index, length: m[0].length } : undefined;
    };
    // Each form's next match (undefined: none before limit), found again only once pos has passed it.
    const next = this.forms.map((f) => find(f, 0));
    for (;;) {
      let best = -1;
      for (let i = 0; i < this.forms.length; i++) {
        if (next[i] && next[i]!.at < pos) next[i] = find(this.forms[i]!, pos);
        const m = next[i];
        if (!m) continue;
        if (best < 0 || m.at < next[best]!.at || (m.at === next[best]!.at && m.length > next[best]!.length)) best = i;
      }
      if (best < 0) break;
      const m = next[best]!;
      parts.push(data.subarray(pos, m.at), this.forms[best]!.put);
      pos = m.at + m.length;
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
