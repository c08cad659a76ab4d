/**
 * Text from a model, a file or a command, made safe to put on a terminal:
 * control characters (which could erase a line, hide text, move the cursor
 * or set the title) and invisible or direction-changing characters are shown
 * as escapes instead of being obeyed. Newlines and tabs stay.
 */
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]/g;

export function visible(s: string): string {
  return s.replace(HIDDEN, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}
