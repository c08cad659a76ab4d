import { isHidden } from "./visible.js";

/**
 * Text rendered exactly, for a person deciding whether to allow it (an
 * approval): nothing it holds can hide, and nothing in the rendering is
 * ambiguous. Every character the neutraliser escapes becomes a marker
 * (⟨ESC⟩, ⟨U+202E⟩); a tab is ⇥; a run of more than MAX_RUN spaces becomes
 * ⟨N spaces⟩, so that padding cannot push the rest of a command out of view;
 * and the marker characters themselves, when the text holds them, are
 * markers too (⟨U+27E8⟩, ⟨U+21E5⟩), so that text cannot imitate a marker.
 */
const MAX_RUN = 8;
const NAMES: Record<number, string> = { 0: "NUL", 7: "BEL", 8: "BS", 0xb: "VT", 0xc: "FF", 0xd: "CR", 0x1b: "ESC", 0x7f: "DEL", 0x9b: "CSI", 0x200b: "ZWSP", 0xfeff: "BOM" };
const OPEN = "⟨";
const TAB = "⇥";

function marker(c: string): string {
  const cp = c.codePointAt(0)!;
  return `${OPEN}${NAMES[cp] ?? `U+${cp.toString(16).toUpperCase().padStart(4, "0")}`}⟩`;
}

/** One line (no newline in it) rendered exactly. */
export function exactLine(line: string): string {
  let out = "";
  let spaces = 0;
  const endRun = () => {
    out += spaces > MAX_RUN ? `${OPEN}${spaces} spaces⟩` : " ".repeat(spaces);
    spaces = 0;
  };
  for (const c of line) {
    if (c === " ") {
      spaces += 1;
      continue;
    }
    if (spaces) endRun();
    if (c === "\t") out += TAB;
    else if (c === OPEN || c === TAB || isHidden(c)) out += marker(c);
    else out += c;
  }
  if (spaces) endRun();
  return out;
}

/** Text split into lines, each rendered exactly. A final newline does not make an empty last line. */
export function exactLines(text: string): string[] {
  const lines = text.split("\n");
  if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
  return lines.map(exactLine);
}
