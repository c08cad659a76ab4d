/**
 * MCP's stdio framing: one JSON-RPC message per line, UTF-8, no embedded
 * newlines. LineReader splits a byte stream into lines without ever holding
 * more than `max` bytes of one line: an oversized line is skipped up to its
 * newline and reported once, and the stream goes on with the next line.
 */
export interface LineSink {
  line(text: string): void;
  /** A line longer than the bound: its bytes were dropped, not held; only its first and last bytes are kept, to find its id. */
  oversized(bytes: number, head: string, tail: string): void;
  /** A line that is not valid UTF-8: dropped rather than repaired, so nothing is passed on that was not checked. */
  undecodable(bytes: number): void;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
/** How much of an oversized line's start and end is kept. */
const EDGE = 256;

/**
 * The id of an oversized message, found in the bytes kept from its start or
 * end, and whether it looks like a request. A best effort, good enough to
 * answer the right pending request with an error instead of leaving it
 * hanging: JSON.stringify puts "id" first or last at the top level, and a
 * wrong guess can only fail a request of the same sender.
 */
export function edgeId(head: string, tail: string): { id: string | number; request: boolean } | undefined {
  const request = /^\s*\{[^]*?"method"\s*:/.test(head);
  const start = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")\s*,/.exec(head);
  const end = /,\s*"id"\s*:\s*(-?\d{1,15}|"(?:[^"\\]|\\.){0,200}")\s*\}\s*$/.exec(tail);
  const m = start ?? end;
  if (!m) return undefined;
  try {
    const id = JSON.parse(m[1]!) as string | number;
    return { id, request };
  } catch {
    return undefined;
  }
}

export class LineReader {
  private parts: Buffer[] = [];
  private held = 0;
  /** Bytes of the current line beyond the bound, while it is being skipped. */
  private skipping = 0;
  private head: Buffer = Buffer.alloc(0);
  private tail: Buffer = Buffer.alloc(0);

  constructor(
    private readonly max: number,
    private readonly sink: LineSink,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl >= 0; nl = chunk.indexOf(10, start)) {
      this.take(chunk.subarray(start, nl));
      this.end();
      start = nl + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
  }

  /** The stream ended: a last line without a newline is a message cut short, and is dropped. */
  finish(): number {
    const cut = this.held + this.skipping;
    this.parts = [];
    this.held = 0;
    this.skipping = 0;
    return cut;
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.skipping > 0 || this.held + piece.length > this.max) {
      if (this.skipping === 0) {
        const all = Buffer.concat([...this.parts, piece.subarray(0, EDGE)]);
        this.head = Buffer.from(all.subarray(0, EDGE));
      }
      this.tail = Buffer.from(Buffer.concat([this.tail, piece.subarray(-EDGE)]).subarray(-EDGE));
      this.skipping += this.held + piece.length;
      this.parts = [];
      this.held = 0;
      return;
    }
    // Stream chunks are never reused, so a view of one is safe to keep until the line ends.
    this.parts.push(piece);
    this.held += piece.length;
  }

  private end(): void {
    if (this.skipping > 0) {
      const n = this.skipping;
      const head = this.head.toString("utf8");
      const tail = this.tail.toString("utf8");
      this.skipping = 0;
      this.head = Buffer.alloc(0);
      this.tail = Buffer.alloc(0);
      this.sink.oversized(n, head, tail);
      return;
    }
    const parts = this.parts;
    this.parts = [];
    this.held = 0;
    const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    let text: string;
    try {
      text = UTF8.decode(bytes);
    } catch {
      this.sink.undecodable(bytes.length);
      return;
    }
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (text.trim() !== "") this.sink.line(text);
  }
}
