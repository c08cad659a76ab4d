/** Runs start() with a timer of the same process ticking beside it: how long it took, and the longest the timer waited. */
export async function servedWhile<T>(start: () => Promise<T>): Promise<{ value: T; ms: number; maxGap: number }> {
  const t0 = Date.now();
  let last = t0;
  let maxGap = 0;
  const tick = setInterval(() => {
    maxGap = Math.max(maxGap, Date.now() - last);
    last = Date.now();
  }, 5);
  try {
    const value = await start();
    return { value, ms: Date.now() - t0, maxGap: Math.max(maxGap, Date.now() - last) };
  } finally {
    clearInterval(tick);
  }
}
