import { REDACTED } from "./redact.js";

/** A part of one line that belongs to a secret spelled across lines; the line where it starts gets the marker. */
export type LineCut = [from: number, to: number, marked: boolean];

/**
 * Known secrets a program or a model spelled across line breaks: each line's
 * cuts, for lines as they are shown (line breaks are not part of a secret, so
 * the lines are joined without them to look). Spellings within one line are
 * left to the redactor, which sees a line whole.
 */
export function cutsAcrossLines(lines: readonly string[], knownAt: (s: string) => Array<[number, number]>): Map<number, LineCut[]> {
  const cuts = new Map<number, LineCut[]>();
  if (lines.length < 2) return cuts;
  const starts: number[] = [];
  let joined = "";
  for (const l of lines) {
    starts.push(joined.length);
    joined += l;
  }
  const lineOf = (pos: number) => {
    let i = 0;
    while (i + 1 < starts.length && starts[i + 1]! <= pos) i++;
    return i;
  };
  for (const [from, to] of knownAt(joined)) {
    const first = lineOf(from);
    const last = lineOf(to - 1);
    if (first === last) continue;
    for (let i = first; i <= last; i++) {
      const cut: LineCut = [Math.max(from, starts[i]!) - starts[i]!, Math.min(to, starts[i]! + lines[i]!.length) - starts[i]!, i === first];
      cuts.set(i, [...(cuts.get(i) ?? []), cut]);
    }
  }
  return cuts;
}

/** A line with its cuts taken out, the marker where a secret starts. */
export function withCuts(line: string, cuts: readonly LineCut[]): string {
  let out = line;
  for (const [from, to, marked] of [...cuts].sort((a, b) => b[0] - a[0])) out = out.slice(0, from) + (marked ? REDACTED : "") + out.slice(to);
  return out;
}

/** What the cut needs of a redactor (src/secrets/redact.ts's Redactor has both). */
export interface KnowsSpellings {
  unfinished(s: string, shapes?: boolean): number;
  knownAt(s: string): Array<[number, number]>;
}

/**
 * The latest point at or before `cut` where text shown so far may end, so
 * that no known spelling is split there across line breaks: one begun at the
 * end (the next line may finish it) or a whole one that crosses the cut.
 */
export function cutBefore(text: string, cut: number, r: KnowsSpellings): number {
  let joined = "";
  const at: number[] = [];
  for (let i = 0; i < text.length; i++)
    if (text[i] !== "\n") {
      joined += text[i];
      at.push(i);
    }
  let keep = cut;
  const begun = r.unfinished(joined, false);
  if (begun > 0) keep = Math.min(keep, at[joined.length - begun]!);
  for (const [from, to] of r.knownAt(joined).reverse()) if (at[from]! < keep && keep <= at[to - 1]!) keep = at[from]!;
  return keep;
}
