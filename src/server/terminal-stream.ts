import type { TextFilter } from "./browser-text.js";

/**
 * A terminal's output on its way to the browser, redacted across chunk
 * boundaries. A program can print a secret one byte at a time, so each chunk
 * redacted alone would let the value through in pieces. The stream holds back
 * the end of what it has seen while it could still be the start of something
 * the redactor hides (`Redactor.unfinished`: a prefix of a known secret's
 * spelling, or an unfinished credential-shaped run), and sends it once the
 * next bytes settle it. What is held is bounded (MAX_HELD): past the bound it
 * is sent, filtered as it stands. A terminal's bytes keep their escapes (the
 * emulator needs them): each run of printable text is filtered (redacted and
 * neutralised: bidi and invisible characters are shown as escapes), each
 * control character passed as is.
 */
export const MAX_HELD = 8 * 1024;

export class TerminalStream {
  private pending = "";

  constructor(
    private readonly filter: TextFilter,
    private readonly unfinished: (s: string) => number,
  ) {}

  /** The bytes that may be shown now, after this chunk. */
  push(chunk: string): string {
    const text = this.pending + chunk;
    let hold = this.unfinished(text);
    if (hold > MAX_HELD || hold > text.length) hold = 0;
    // A held tail never starts inside a surrogate pair.
    let cut = text.length - hold;
    if (cut > 0 && cut < text.length && /[\uDC00-\uDFFF]/.test(text[cut]!)) cut -= 1;
    this.pending = text.slice(cut);
    return filterRuns(this.filter, text.slice(0, cut));
  }

  /** Everything still held (the stream ended), filtered. */
  end(): string {
    const rest = this.pending;
    this.pending = "";
    return filterRuns(this.filter, rest);
  }

  get held(): number {
    return this.pending.length;
  }
}

/** Each printable run filtered whole, each control character kept as is. */
export function filterRuns(filter: TextFilter, text: string): string {
  return text.replace(/[^\u0000-\u001f\u007f-\u009f]+/g, (run) => filter(run));
}
