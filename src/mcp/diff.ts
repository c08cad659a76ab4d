import { canonicalJson } from "./pins.js";

/**
 * A line diff of two tool definitions, pretty-printed with sorted keys, for
 * `vak mcp trust`: what the user is asked to accept is shown, not summarised.
 * Lines are the server's text: the caller neutralises them before a terminal.
 */
export function pretty(v: unknown): string[] {
  return JSON.stringify(JSON.parse(canonicalJson(v)), null, 2).split("\n");
}

/** The longest common subsequence, as "  ", "- " and "+ " lines; past MAX lines each side is shown whole. */
const MAX = 2000;

export function lineDiff(before: readonly string[], after: readonly string[]): string[] {
  if (before.length > MAX || after.length > MAX) return [...before.map((l) => `- ${l}`), ...after.map((l) => `+ ${l}`)];
  const n = before.length;
  const m = after.length;
  // lcs[i][j]: the LCS length of before[i..] and after[j..].
  const lcs: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = before[i] === after[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (before[i] === after[j]) {
      out.push(`  ${before[i]}`);
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push(`- ${before[i++]}`);
    else out.push(`+ ${after[j++]}`);
  }
  while (i < n) out.push(`- ${before[i++]}`);
  while (j < m) out.push(`+ ${after[j++]}`);
  return out;
}

/** The diff of a tool's pinned definition and the one now listed (or of nothing and a new tool). */
export function definitionDiff(pinned: unknown, listed: unknown): string[] {
  return lineDiff(pinned === undefined ? [] : pretty(pinned), pretty(listed));
}
