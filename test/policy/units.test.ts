import { describe, expect, it } from "vitest";
import { formatDuration, formatSize, parseDuration, parseSeconds, parseSize } from "../../src/policy/units.js";

// One rule for sizes and one for durations, as a table: what is accepted and what it means, and what is refused and why.
describe("sizes: K, M, G, T are powers of 1024", () => {
  const ok: [string, number][] = [
    ["1", 1], ["1048576", 1048576], ["1B", 1], ["10k", 10240], ["10K", 10240], ["10KiB", 10240], ["10kib", 10240],
    ["50M", 50 * 1024 ** 2], ["50MiB", 50 * 1024 ** 2], ["1G", 1024 ** 3], ["1.5G", 1.5 * 1024 ** 3], ["0.5K", 512],
    ["2T", 2 * 1024 ** 4], ["1.0", 1], [String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
  ];
  for (const [text, bytes] of ok) it(`${text} is ${bytes} bytes`, () => expect(parseSize(text)).toBe(bytes));

  const refused: [string, RegExp][] = [
    ["50MB", /ambiguous \(MB means 1000\^n to some tools and 1024\^n to others\): write 50M or 50MiB/],
    ["1kb", /ambiguous.*write 1K or 1KiB/], ["2GB", /ambiguous/], ["1TB", /ambiguous/],
    ["0", /more than zero/], ["0K", /more than zero/], ["0.1K", /whole number of bytes/], ["1.5", /whole number of bytes/],
    ["-5", /not a size/], ["5 M", /not a size/], ["", /not a size/], ["1e6", /not a size/], ["M", /not a size/],
    ["5X", /unknown unit 'X'/], ["5P", /unknown unit 'P'/], ["0x10", /not a size/], ["1,000", /not a size/],
    ["8193T", /too large/], [String(Number.MAX_SAFE_INTEGER + 2), /too large/], ["99999999999999999999999", /too large/],
  ];
  for (const [text, why] of refused) it(`${JSON.stringify(text)} is refused`, () => expect(() => parseSize(text)).toThrow(why));
});

describe("durations: seconds, or parts with ms, s, m, h, d", () => {
  const ok: [string, number][] = [
    ["600", 600_000], ["1.5", 1500], ["90s", 90_000], ["10m", 600_000], ["1h30m", 5_400_000], ["250ms", 250],
    ["1.5s", 1500], ["2d", 172_800_000], ["1m30s", 90_000],
  ];
  for (const [text, ms] of ok) it(`${text} is ${ms} ms`, () => expect(parseDuration(text)).toBe(ms));
  const refused: [string, RegExp][] = [
    ["1M", /not a duration/], ["10 m", /not a duration/], ["soon", /not a duration/], ["0", /more than zero/], ["0s", /more than zero/],
    ["0.5ms", /whole number of milliseconds/], ["-1s", /not a duration/], ["999999999999999d", /too long/], ["1y", /not a duration/],
  ];
  for (const [text, why] of refused) it(`${JSON.stringify(text)} is refused`, () => expect(() => parseDuration(text)).toThrow(why));
  it("CPU time counts whole seconds", () => {
    expect(parseSeconds("30")).toBe(30);
    expect(parseSeconds("2m")).toBe(120);
    expect(() => parseSeconds("1500ms")).toThrow(/whole number of seconds/);
  });
});

describe("read back as people write them", () => {
  it("the largest unit that divides exactly", () => {
    expect([1024, 10240, 52428800, 1536 * 1024, 1000, 1024 ** 3].map(formatSize)).toEqual(["1K", "10K", "50M", "1536K", "1000", "1G"]);
    expect([1500, 1000, 90_000, 600_000, 3_600_000, 5_400_000].map(formatDuration)).toEqual(["1500ms", "1s", "90s", "10m", "1h", "90m"]);
  });
});
