/**
 * Sizes and durations as people write them, for every byte and time limit
 * (flags, and any config that names a limit). One rule each, with no guessing:
 *
 * - A size is a whole number of bytes, or a number with K, M, G or T, which
 *   are powers of 1024 (KiB, MiB, GiB, TiB are the same units spelled out;
 *   the letter's case does not matter). KB, MB, GB and TB are refused: some
 *   tools read them as powers of 1000 and others as 1024, and a limit that
 *   means two things is not a limit. A fraction is allowed when it comes to a
 *   whole number of bytes (1.5G, not 0.1K).
 * - A duration is a number of seconds, or one or more parts with ms, s, m, h
 *   or d (10m, 1h30m, 1.5s). Lower case only: M is a size, not a minute.
 *
 * Messages do not repeat the value: the caller names the flag or key and the value.
 * Zero, a negative number, or a value past 2^53 - 1 is refused. Plain code,
 * no zod: `vak exec` parses its flags with this on its start-up path.
 */

export class UnitError extends Error {}

const SIZE_UNITS: Record<string, number> = { "": 1, b: 1, k: 1024, kib: 1024, m: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gib: 1024 ** 3, t: 1024 ** 4, tib: 1024 ** 4 };
const AMBIGUOUS = new Set(["kb", "mb", "gb", "tb"]);
const TIME_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** number × unit, exactly: the number's digits as an integer scaled by 10^decimals, or undefined if not whole. */
function exact(num: string, unit: number): number | undefined {
  const [whole, frac = ""] = num.split(".");
  const digits = BigInt(`${whole}${frac}`);
  const scale = 10n ** BigInt(frac.length);
  const product = digits * BigInt(unit);
  if (product % scale !== 0n) return undefined;
  const v = product / scale;
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(v);
}

/** Bytes from "1048576", "50M", "1.5GiB", "10k". Throws a UnitError naming what to write instead. */
export function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)([A-Za-z]*)$/.exec(text);
  if (!m) throw new UnitError(`not a size: write a number of bytes, or a number with K, M, G or T (powers of 1024), such as 50M`);
  const [, num, rawUnit] = m as unknown as [string, string, string];
  const unit = rawUnit.toLowerCase();
  if (AMBIGUOUS.has(unit))
    throw new UnitError(`ambiguous (${rawUnit} means 1000^n to some tools and 1024^n to others): write ${num}${rawUnit[0]!.toUpperCase()} or ${num}${rawUnit[0]!.toUpperCase()}iB for powers of 1024, or the number of bytes`);
  const factor = SIZE_UNITS[unit];
  if (factor === undefined) throw new UnitError(`unknown unit '${rawUnit}'; sizes take K, M, G or T (powers of 1024), KiB, MiB, GiB or TiB`);
  const v = exact(num, factor);
  if (v === undefined) throw new UnitError(`not a whole number of bytes`);
  if (v === Infinity) throw new UnitError(`too large (at most 2^53 - 1 bytes, about 8 PiB)`);
  if (v <= 0) throw new UnitError(`must be more than zero`);
  return v;
}

/** Milliseconds from "600" (seconds), "10m", "1h30m", "1.5s", "250ms". Throws a UnitError naming what to write instead. */
export function parseDuration(text: string): number {
  if (/^\d+(?:\.\d+)?$/.test(text)) return checkTime(text, exact(text, 1000));
  if (!/^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/.test(text))
    throw new UnitError(`not a duration: write seconds, or parts with ms, s, m, h or d, such as 90s, 10m or 1h30m`);
  let total = 0;
  for (const [, num, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) {
    const v = exact(num!, TIME_UNITS[unit!]!);
    if (v === undefined || v === Infinity) return checkTime(text, v);
    total += v;
  }
  return checkTime(text, total > Number.MAX_SAFE_INTEGER ? Infinity : total);
}

function checkTime(text: string, ms: number | undefined): number {
  if (ms === undefined) throw new UnitError(`not a whole number of milliseconds`);
  if (ms === Infinity) throw new UnitError(`too long`);
  if (ms <= 0) throw new UnitError(`must be more than zero`);
  return ms;
}

/** Whole seconds from a duration ("30", "2m"): for limits the kernel counts in seconds (CPU time). */
export function parseSeconds(text: string): number {
  const ms = parseDuration(text);
  if (ms % 1000 !== 0) throw new UnitError(`not a whole number of seconds`);
  return ms / 1000;
}

/** A size as a person reads it back: the largest unit that divides it exactly ("50M", "1536K", "1000"). */
export function formatSize(bytes: number): string {
  for (const [u, f] of [["T", 1024 ** 4], ["G", 1024 ** 3], ["M", 1024 ** 2], ["K", 1024]] as const)
    if (bytes >= f && bytes % f === 0) return `${bytes / f}${u}`;
  return String(bytes);
}

/** A duration as a person reads it back ("10m", "90s", "1500ms"). */
export function formatDuration(ms: number): string {
  for (const [u, f] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1000]] as const)
    if (ms >= f && ms % f === 0) return `${ms / f}${u}`;
  return `${ms}ms`;
}
