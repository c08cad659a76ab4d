import type { Reporter, TestModule } from "vitest/node";

/**
 * Prints "N passed, N failed" on its own line after every run, for .ci/run.
 * Skipped or todo tests are counted apart and never as passed; so are
 * `it.fails` tests, which pass while the attack they try still works (a known
 * hole, named in ARCHITECTURE's known limits). A file that failed to load and
 * any unhandled error count as failures.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    let holes = 0;
    for (const m of modules) {
      if (m.state() === "failed" && [...m.children.allTests()].length === 0) failed++;
      for (const t of m.children.allTests()) {
        const s = t.result().state;
        if (s === "passed" && t.options.fails) holes++;
        else if (s === "passed") passed++;
        else if (s === "failed") failed++;
        else skipped++;
      }
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
    if (skipped) process.stdout.write(`${skipped} skipped (not counted as passed)\n`);
    if (holes) process.stdout.write(`${holes} known holes (it.fails: the attack still works; not counted as passed)\n`);
  }
}
