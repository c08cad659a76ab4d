/**
 * The one neutraliser: text a model, a file, a command or a server chose,
 * made safe to put on a terminal. Control characters (which could erase a
 * line, move the cursor, set the title, write the clipboard with OSC 52),
 * C1 controls (U+0080–U+009F: a terminal may read U+009B as CSI), format
 * characters (bidi overrides and isolates, zero-width characters, the soft
 * hyphen, tag characters), line and paragraph separators, lone surrogates and
 * invisible fillers are shown as escapes instead of being obeyed. Newlines and
 * tabs stay: the caller (src/cli/output.ts) puts its margin after each newline.
 */
export const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\u115f\u1160\u180b-\u180f\u3164\uffa0]/gu;
const HIDDEN_ONE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\u115f\u1160\u180b-\u180f\u3164\uffa0]/u;

export function visible(s: string): string {
  return s.replace(HIDDEN, (c) => (c === "\n" || c === "\t" ? c : `\\u{${c.codePointAt(0)!.toString(16)}}`));
}

/**
 * The same characters replaced by `by` instead of escaped (newlines and tabs
 * kept): for text a model reads (a fetched page), where hidden characters
 * would only carry words a person cannot see, and an escape would be noise.
 */
export function hiddenReplaced(s: string, by: string): string {
  return s.replace(HIDDEN, (c) => (c === "\n" || c === "\t" ? c : by));
}

/** Whether a string holds anything visible() would escape (newlines and tabs aside). */
export function hasHidden(s: string): boolean {
  for (const m of s.matchAll(HIDDEN)) if (m[0] !== "\n" && m[0] !== "\t") return true;
  return false;
}

/** Whether one character (a code point) is one the neutraliser escapes. */
export function isHidden(c: string): boolean {
  return HIDDEN_ONE.test(c) && c !== "\n" && c !== "\t";
}

/**
 * How many terminal columns a line of neutralised text takes, counted
 * conservatively: every code point outside ASCII as two (wide CJK and emoji
 * take two; anything narrower only makes the count safe), a tab as eight.
 * Used to break hostile lines before the terminal wraps them, so that no part
 * of them lands at column 0.
 */
export function displayWidth(s: string): number {
  let w = 0;
  for (const c of s) w += c === "\t" ? 8 : c.charCodeAt(0) < 0x80 ? 1 : 2;
  return w;
}

/** Cuts a line into pieces of at most width columns (as displayWidth counts them). */
export function breakLine(s: string, width: number): string[] {
  const out: string[] = [];
  let cur = "";
  let w = 0;
  for (const c of s) {
    const cw = c === "\t" ? 8 : c.charCodeAt(0) < 0x80 ? 1 : 2;
    if (w + cw > width && cur) {
      out.push(cur);
      cur = "";
      w = 0;
    }
    cur += c;
    w += cw;
  }
  out.push(cur);
  return out;
}
