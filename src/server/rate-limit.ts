/**
 * Failed credentials, counted per (kind of credential, peer address) in a
 * fixed window. While a key is over its limit, every credential of that kind
 * from that peer is refused unchecked (429), the right one too, so that a
 * guesser learns nothing. Keys are separate so that a web page that floods
 * `/?token=wrong` (all it can do from a browser) delays a new login by at most
 * a window, but cannot log out a browser already in or lock out programs that
 * send the bearer.
 */
export interface RateLimit {
  failures: number;
  windowMs: number;
}

export const DEFAULT_RATE_LIMIT: RateLimit = { failures: 10, windowMs: 60_000 };

/** How many keys are tracked at most; the oldest windows go first. */
const MAX_KEYS = 4096;

export class FailureLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly limit: RateLimit = DEFAULT_RATE_LIMIT,
    private readonly now: () => number = Date.now,
  ) {}

  /** Milliseconds until this key may try again, or 0 if it may now. */
  blockedFor(key: string): number {
    const w = this.windows.get(key);
    if (!w) return 0;
    const left = w.start + this.limit.windowMs - this.now();
    if (left <= 0) {
      this.windows.delete(key);
      return 0;
    }
    return w.count >= this.limit.failures ? left : 0;
  }

  fail(key: string): void {
    const t = this.now();
    const w = this.windows.get(key);
    if (!w || t - w.start >= this.limit.windowMs) {
      this.windows.delete(key);
      this.windows.set(key, { start: t, count: 1 });
      if (this.windows.size > MAX_KEYS) this.windows.delete(this.windows.keys().next().value!);
    } else w.count += 1;
  }
}
