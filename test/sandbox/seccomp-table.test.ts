import { execFileSync } from "node:child_process";
import { describe, expect, inject, it } from "vitest";

// The seccomp table's own tests (test/support/seccomp-table.c): every variant
// of the filter (command or guard, namespaces or reduced, with or without the
// network and the guard, with --explain's lookups or a --deny-read path's opens: 64) compiled from native/seccomp.c by native/bpf.c, run
// through a BPF interpreter and compared, call by call, with what the table
// says; each program loaded into the kernel; and the compiler's refusals.
describe("the seccomp table and its compiler", () => {
  it("every compiled variant answers every probe as the table says, and the kernel accepts it", () => {
    const out = execFileSync(inject("seccompTable"), ["check"], { encoding: "utf8" });
    expect(out).not.toMatch(/MISMATCH|COMPILE|KERNEL|NO \(compiled\)/);
    expect(out.match(/^variant when=\d+: \d+ instructions, \d+ probes, 0 mismatches$/gm)?.length).toBe(64);
    expect(out.match(/^refuses /gm)?.length).toBe(4);
    expect(out).toMatch(/probes over 64 variants; ok/);
  });
});
