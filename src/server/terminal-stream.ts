import { cutBefore, cutsAcrossLines, type KnowsSpellings, withCuts } from "../secrets/across-lines.js";
import type { TextFilter } from "./browser-text.js";

/**
 * A terminal's output on its way to the browser, redacted across chunk
 * boundaries, escape sequences and lines. A program can print a secret one
 * byte at a time, put an escape sequence or a control character in the middle
 * of it (the emulator shows the pieces side by side), or end a line inside it,
 * so each piece redacted alone would let the value through.
 *
 * Redaction is decided on what the emulator would print: the text with its
 * escape sequences and controls taken out (`project`). The stream holds back
 * the end of what it has seen while it could still be the start of something
 * the redactor hides (`unfinished`: a prefix of a known secret's spelling, or
 * an unfinished credential-shaped run), a known secret's prefix at the end of
 * a line (the next line may finish it), and an escape sequence not yet ended.
 * What is held is bounded (MAX_HELD): past the bound it is sent, filtered as
 * it stands.
 *
 * A line with nothing to hide keeps its escapes (the emulator needs them):
 * each run of printable text is filtered (redacted and neutralised: bidi and
 * invisible characters are shown as escapes), each control passed as is. A
 * line with something to hide is sent as its printed text, redacted, with
 * only its colour changes (SGR) after it, so the colours of later lines stay
 * right; its cursor movements are dropped. A program that moves the cursor
 * to compose a secret from pieces printed out of order is not caught: that
 * would need the emulator itself run on the host.
 */
export const MAX_HELD = 8 * 1024;

/** What the stream needs of the host's redactor (src/secrets/redact.ts). */
export interface StreamRedactor extends KnowsSpellings {
  text(s: string): string;
}

/**
 * Escape sequences (CSI, OSC, DCS/SOS/PM/APC, two-character escapes, C1 CSI)
 * and control characters, newline and tab aside: what a terminal obeys
 * without printing it.
 */
const ESCAPE = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[ -/]*[0-~]|\x9b[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
/** An escape sequence still being written when the text ends. */
const OPEN_ESCAPE = /(?:\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[PX^_][^\x1b]*\x1b?|[ -/]*)|\x9b[0-?]*[ -/]*)$/;
const SGR = /\x1b\[[0-9;:]*m/g;

/** The text a terminal would print (newlines kept), and where each of its characters is in the raw text. */
export function project(raw: string): { text: string; at: number[] } {
  let text = "";
  const at: number[] = [];
  let from = 0;
  const keep = (to: number) => {
    for (let i = from; i < to; i++) {
      text += raw[i];
      at.push(i);
    }
  };
  for (const m of raw.matchAll(ESCAPE)) {
    keep(m.index);
    from = m.index + m[0].length;
  }
  keep(raw.length);
  return { text, at };
}

export class TerminalStream {
  private pending = "";

  constructor(
    private readonly filter: TextFilter,
    private readonly redactor: StreamRedactor,
  ) {}

  /** The bytes that may be shown now, after this chunk. */
  push(chunk: string): string {
    const text = this.pending + chunk;
    const open = OPEN_ESCAPE.exec(text);
    const end = open && open[0].length > 0 ? open.index : text.length;
    let cut = this.settled(text.slice(0, end));
    if (text.length - cut > MAX_HELD) cut = text.length - end > MAX_HELD ? text.length : end;
    // A held tail never starts inside a surrogate pair.
    if (cut > 0 && cut < text.length && /[\uDC00-\uDFFF]/.test(text[cut]!)) cut -= 1;
    this.pending = text.slice(cut);
    return this.render(text.slice(0, cut));
  }

  /** Everything still held (the stream ended), filtered. */
  end(): string {
    const rest = this.pending;
    this.pending = "";
    return this.render(rest);
  }

  get held(): number {
    return this.pending.length;
  }

  /** Where the part that cannot become a secret any more ends, in raw text. */
  private settled(raw: string): number {
    const { text, at } = project(raw);
    // A known secret's prefix may also end a line and go on after the newline.
    const keep = cutBefore(text, text.length - this.redactor.unfinished(text), this.redactor);
    return keep < text.length ? at[keep]! : raw.length;
  }

  /** Settled text, line by line: kept as it is where there is nothing to hide, printed text redacted where there is. */
  private render(raw: string): string {
    if (!raw) return "";
    const lines = raw.split(/(?<=\n)/);
    const bodies = lines.map((line) => line.replace(/\r?\n$/, ""));
    const printed = bodies.map((body) => project(body).text);
    const cuts = cutsAcrossLines(printed, (s) => this.redactor.knownAt(s));
    return lines
      .map((line, i) => {
        const body = bodies[i]!;
        const shown = printed[i]!;
        const masked = withCuts(shown, cuts.get(i) ?? []);
        if (masked === shown && this.redactor.text(shown) === shown) return filterRuns(this.filter, line);
        return this.filter(masked) + (body.match(SGR) ?? []).join("") + line.slice(body.length);
      })
      .join("");
  }
}

/** Each printable run filtered whole, each control character kept as is. */
export function filterRuns(filter: TextFilter, text: string): string {
  return text.replace(/[^\u0000-\u001f\u007f-\u009f]+/g, (run) => filter(run));
}
