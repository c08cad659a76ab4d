import { fstatSync } from "node:fs";
import type { Writable } from "node:stream";
import { cutBefore, cutsAcrossLines, type KnowsSpellings, withCuts } from "../secrets/across-lines.js";
import { Redactor } from "../secrets/redact.js";
import { jsonText } from "../text/json.js";
import { breakLine, displayWidth, hasHidden, visible } from "../text/visible.js";

/**
 * The CLI's one way to a terminal (or a pipe). Every line Vak prints is built
 * with fmt`…`: the template's own text is Vak's, and every value put in it is
 * hostile until marked own(): it is redacted, neutralised (src/text/visible.ts),
 * and each line of it after the first starts with MARGIN, which no line of
 * Vak's own ever starts with. So model or command text can never draw a line
 * that begins where Vak's lines begin (an approval prompt among them), neither
 * through a newline nor, on a terminal, by filling the width so that the
 * terminal wraps it to column 0: lines are broken before the terminal would.
 * No other module of src/cli writes to process.stdout or process.stderr
 * (test/attacks/terminal-output.test.ts reads them all to hold this).
 */
export const MARGIN = "│ ";

interface Segment {
  text: string;
  own: boolean;
  /** Pad a hostile value to this many characters once it is neutralised. */
  pad?: number | undefined;
  /** Cut a hostile value to this many characters once it is redacted and neutralised. */
  max?: number | undefined;
}

/** A line (or lines) of Vak's with hostile values in it, not yet redacted or neutralised. */
export class Text {
  constructor(readonly segments: readonly Segment[]) {}
}

/** Vak's own text: put in a line as it is. Only for text Vak wrote (ids it made, its own labels). */
export function own(text: string): Text {
  return new Text([{ text, own: true }]);
}

/** A hostile value padded to n characters (for columns). */
export function padded(value: unknown, n: number): Text {
  return new Text([{ text: plain(value), own: false, pad: n }]);
}

/**
 * A hostile value cut to n characters, saying how many more there were. The
 * cut is made after redaction: cut before, a secret across the cut would be
 * shown in part (as much of it as the value's padding chose).
 */
export function clipped(value: unknown, n: number): Text {
  return new Text([{ text: plain(value), own: false, max: n }]);
}

/** Text cut to n characters (never between the two halves of a surrogate pair), with how many were left out. */
function cut(text: string, n: number): string {
  if (text.length <= n) return text;
  const at = /[\uD800-\uDBFF]/.test(text[n - 1] ?? "") ? n - 1 : n;
  return `${text.slice(0, at)}… (+${text.length - at} characters)`;
}

function plain(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === undefined || v === null || typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  return JSON.stringify(v) ?? String(v);
}

/** Builds a Text: the template is Vak's own, each value hostile unless it is a Text already. */
export function fmt(strings: TemplateStringsArray, ...values: unknown[]): Text {
  const segments: Segment[] = [];
  strings.forEach((s, i) => {
    if (s) segments.push({ text: s, own: true });
    if (i >= values.length) return;
    const v = values[i];
    if (v instanceof Text) segments.push(...v.segments);
    else segments.push({ text: plain(v), own: false });
  });
  return new Text(segments);
}

/** What the output redacts with: the session's redactor (src/secrets/redact.ts), or one that knows only credential shapes. */
export interface Redacts extends Partial<KnowsSpellings> {
  text(s: string): string;
  value<T>(v: T): T;
}

/** The stream an Output writes to: process.stdout, process.stderr, or a test's. */
export interface Sink {
  write(chunk: string | Uint8Array): boolean;
  isTTY?: boolean | undefined;
  columns?: number | undefined;
  destroyed?: boolean | undefined;
}

/** Streamed hostile text is held back until its line ends, or until this much of one line has come. */
const HOLD_MAX = 4096;
/** When a long line is let out early, this much of its end stays back, so that redaction still sees a secret whole. */
const HOLD_TAIL = 512;

export class Output {
  private pending = "";
  private resolved: Sink | undefined;

  /** sink may be given as a function: the stream is then made only when something is printed (process.stdout costs start-up time). */
  constructor(
    private readonly target: Sink | (() => Sink),
    private redactor: Redacts,
  ) {}

  private get sink(): Sink {
    this.resolved ??= typeof this.target === "function" ? this.target() : this.target;
    return this.resolved;
  }

  /** The session's redactor, once the session exists (it knows the provider key and the secrets). */
  useRedactor(r: Redacts): void {
    this.redactor = r;
  }

  /** The same stream, redacting also what r knows (a run's secrets): for the lines about one run. */
  also(r: Redacts): Output {
    const mine = this.redactor;
    return new Output(() => this.sink, {
      text: (s) => r.text(mine.text(s)),
      value: <T>(v: T): T => r.value(mine.value(v)),
      unfinished: (s, shapes) => Math.max(mine.unfinished?.(s, shapes) ?? 0, r.unfinished?.(s, shapes) ?? 0),
      knownAt: (s) => [...(mine.knownAt?.(s) ?? []), ...(r.knownAt?.(s) ?? [])].sort((a, b) => a[0] - b[0]),
    });
  }

  /** The stream, for readline's own echo of what the user types. */
  get stream(): Sink {
    return this.sink;
  }

  get isTTY(): boolean {
    return Boolean(this.sink.isTTY);
  }

  private put(s: string): void {
    // A reader that went away (EPIPE): nothing more is written; main() exits quietly.
    if (this.sink.destroyed) return;
    this.sink.write(s);
  }

  /** The terminal's width, when there is a terminal: lines are broken before it would wrap them. */
  private width(): number | undefined {
    const c = this.sink.isTTY ? this.sink.columns : undefined;
    return c && c >= 8 ? c : undefined;
  }

  /** The physical lines a Text makes: own text as it is, hostile text neutralised and after MARGIN wherever it begins a line. */
  private render(t: Text): string[] {
    const lines: { text: string; own: boolean }[] = [{ text: "", own: true }];
    for (const seg of t.segments) {
      const shown = seg.own ? seg.text : visible(this.redactor.text(seg.text));
      const text = seg.max === undefined ? shown : cut(shown, seg.max);
      text.split("\n").forEach((p, i) => {
        if (i > 0) lines.push({ text: seg.own ? "" : MARGIN, own: seg.own });
        const cur = lines[lines.length - 1]!;
        // A line that begins with a hostile value begins with the margin.
        if (!seg.own && p && cur.own && cur.text === "") {
          cur.text = MARGIN;
          cur.own = false;
        }
        cur.text += seg.pad ? p.padEnd(seg.pad) : p;
      });
    }
    const width = this.width();
    const out: string[] = [];
    for (const l of lines) {
      if (l.own && l.text.startsWith(MARGIN[0]!)) throw new Error(`a line of Vak's own may not start with the margin (${MARGIN[0]}): ${l.text.slice(0, 40)}`);
      if (!width || displayWidth(l.text) <= width) {
        out.push(l.text);
        continue;
      }
      const [head, ...rest] = breakLine(l.text, width);
      out.push(head!, ...this.marginLines(rest.join("")));
    }
    return out;
  }

  /** Hostile text (already neutralised), every line of it after the margin, broken before the terminal's width. */
  private marginLines(text: string): string[] {
    const width = this.width();
    return text.split("\n").flatMap((l) => (width ? breakLine(l, width - displayWidth(MARGIN)) : [l])).map((l) => MARGIN + l);
  }

  /** Prints lines: fmt`…`'s own text as it is, its values hostile. Streamed text waiting for its line's end is let out first. */
  line(t: Text): void {
    this.endText();
    this.put(`${this.render(t).join("\n")}\n`);
  }

  /** The same, without ending the last line: a prompt the user answers on it. */
  prompt(t: Text): void {
    this.endText();
    this.put(this.render(t).join("\n"));
  }

  /** Lines already rendered exactly (src/text/exact.ts), each shown after the margin. */
  /** Redacts with the session's redactor (for text rendered exactly, which must be redacted before it is rendered). */
  redact(s: string): string {
    return this.redactor.text(s);
  }

  exact(lines: readonly string[]): void {
    this.endText();
    if (lines.length) this.put(`${this.marginLines(lines.join("\n")).join("\n")}\n`);
  }

  /**
   * Hostile text as it streams in (a model's reply): shown line by line, each
   * after the margin, and held back until its line ends (or grows long), so
   * that redaction sees a secret whole even when it came in two pieces.
   */
  text(delta: string): void {
    this.pending += delta;
    let nl = this.pending.lastIndexOf("\n");
    // A known secret begun on a line that ended may go on after its newline: from that line on, it waits.
    const r = this.redactor;
    if (nl >= 0 && r.unfinished && r.knownAt) nl = this.pending.lastIndexOf("\n", cutBefore(this.pending, nl + 1, { unfinished: (t, shapes) => r.unfinished!(t, shapes), knownAt: (t) => r.knownAt!(t) }) - 1);
    if (nl >= 0) {
      this.hostileLines(this.pending.slice(0, nl));
      this.pending = this.pending.slice(nl + 1);
    }
    if (this.pending.length > HOLD_MAX) {
      this.hostileLines(this.pending.slice(0, -HOLD_TAIL));
      this.pending = this.pending.slice(-HOLD_TAIL);
    }
  }

  /** Lets out streamed text still held back (its reply ended, or Vak prints a line of its own). */
  endText(): void {
    if (!this.pending) return;
    const rest = this.pending;
    this.pending = "";
    this.hostileLines(rest);
  }

  private hostileLines(text: string): void {
    // A known secret spelled across lines is taken out of each of them (the redactor sees one line's spellings).
    const r = this.redactor;
    let lines = text;
    if (r.knownAt && text.includes("\n")) {
      const split = text.split("\n");
      const cuts = cutsAcrossLines(split, (t) => r.knownAt!(t));
      if (cuts.size) lines = split.map((l, i) => withCuts(l, cuts.get(i) ?? [])).join("\n");
    }
    this.put(`${this.marginLines(visible(this.redactor.text(lines))).join("\n")}\n`);
  }

  /** One JSON line, for machines: redacted, with no control, C1, bidi or invisible character raw (after lead: a newline of Vak's own, or nothing). */
  json(value: unknown, lead: "" | "\n" = ""): void {
    this.endText();
    this.put(`${lead}${jsonText(this.redactor.value(value))}\n`);
  }

  /**
   * One line another module already made safe and labelled (an MCP server's
   * stderr: redacted, neutralised and after the server's name, by
   * src/mcp/stderr.ts): printed as it is if it holds no raw control character
   * and starts as a line of Vak's may; else, and for anything after a newline
   * in it, as hostile text.
   */
  relayed(text: string): void {
    const [first = "", ...rest] = text.replace(/\n$/, "").split("\n");
    const safe = !hasHidden(first) && !first.startsWith(MARGIN[0]!);
    this.line(rest.length ? fmt`${safe ? own(first) : first}\n${rest.join("\n")}` : safe ? own(first) : fmt`${first}`);
  }

  /** A JSON document for a person to read (indented), with nothing raw in it, like json(). */
  jsonBlock(value: unknown): void {
    this.endText();
    this.put(`${jsonText(this.redactor.value(value), 2)}\n`);
  }
}

/**
 * The process's own streams that something was printed to. Node makes
 * process.stdout and process.stderr on first use, which costs start-up time,
 * so they are touched only when an Output prints, and only those are waited
 * for at exit. (Process-wide, like the streams themselves.)
 */
const opened = new Set<NodeJS.WriteStream>();

/** A stream of the process's own, guarded against a reader that went away, and remembered for the flush at exit. */
function ownStream(s: NodeJS.WriteStream): NodeJS.WriteStream {
  if (!opened.has(s)) {
    opened.add(s);
    s.on("error", onStreamError);
  }
  return s;
}

/** Outputs on this process's own stdout and stderr (a redactor that knows no values yet knows credential shapes). */
/** A redactor that knows these secret values (and their spellings) besides the credential shapes: for a run given secrets. */
export function secretsRedactor(values: readonly string[]): Redactor {
  const r = new Redactor();
  for (const v of values) r.add(v);
  return r;
}

export function processOutput(redactor: Redacts = new Redactor()): { out: Output; err: Output } {
  return { out: new Output(() => ownStream(process.stdout), redactor), err: new Output(() => ownStream(process.stderr), redactor) };
}

/**
 * A reader that went away (`vak journal export ID | head`) ends the output
 * quietly: EPIPE stops further writes to that stream instead of crashing vak
 * with a stack trace.
 */
function onStreamError(this: NodeJS.WriteStream, e: NodeJS.ErrnoException): void {
  if (e.code === "EPIPE" || e.code === "ERR_STREAM_DESTROYED" || e.code === "ECONNRESET") {
    this.destroy();
    return;
  }
  throw e;
}

/**
 * Exits with code once everything written to stdout and stderr has reached
 * the kernel: process.exit() with writes still queued loses them (a pipe to a
 * slow reader took 67 KB of a 1.5 MB export). A stream whose reader went away
 * counts as flushed; a stream nothing was printed to is not waited for.
 */
export function exitWhenFlushed(code: number): void {
  process.exitCode = code;
  const streams = [...opened].filter((s) => !s.destroyed && !s.writableEnded);
  let waiting = streams.length;
  if (waiting === 0) process.exit(code);
  for (const s of streams)
    // The callback of an empty write runs once every write before it is flushed (or failed).
    s.write("", () => {
      waiting -= 1;
      if (waiting === 0) process.exit(code);
    });
}

/**
 * The MCP client's end of fd 1, for `vak mcp`: JSON-RPC for a program, not
 * text for a person (every message is checked by src/mcp/relay.ts, not here).
 * Node makes process.stdout blocking when it is a pipe, which would let a
 * client that stops reading freeze the relay; a socket of Vak's own on fd 1 is
 * non-blocking and says when it is full.
 */
export function protocolStdout(): Writable {
  const st = fstatSync(1);
  return st.isFIFO() || st.isSocket() ? new (process.getBuiltinModule("node:net").Socket)({ fd: 1, readable: false, writable: true }) : ownStream(process.stdout);
}
