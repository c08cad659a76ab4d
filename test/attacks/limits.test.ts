import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { BACKEND, sandboxSh } from "../support/vak.js";

/** A shell command: fork up to tries sleeping children until fork fails, then print what. */
const forkBomb = (tries: number, what: string) => `python3 -c "
import os, time
made = 0
for _ in range(${tries}):
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        made += 1
    except OSError:
        break
print(${what})
"`;

// These run as whatever user runs the tests; on this machine that is root, for
// whom the kernel waives RLIMIT_NPROC. The limits must hold anyway.
describe("resource limits hold, including for root", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  it("a fork bomb stops at --max-procs", async () => {
    const r = await sandboxSh(
      s.ws,
      forkBomb(500, "made, len([p for p in os.listdir('/proc') if p.isdigit()])"),
      ["--max-procs", "20"],
    );
    const [made, alive] = r.stdout.trim().split(" ").map(Number);
    expect(made).toBeGreaterThan(5);
    expect(made).toBeLessThan(20);
    expect(alive).toBeLessThanOrEqual(20 + 3); // the limit, plus init, the guard and the relay's slot
    // Root's limit is a pids cgroup; the container backend runs as an unprivileged user, whose limit the
    // launcher holds with RLIMIT_NPROC (and the engine's own pids cgroup, --pids-limit, around it).
    expect(r.summary?.limits).toMatchObject({ procs: BACKEND === "container" ? "rlimit" : "cgroup" });
    // Refused forks are counted where a pids cgroup counts them (RLIMIT_NPROC counts nothing).
    if (BACKEND !== "container") expect((r.summary?.limits as { procsHit: number }).procsHit).toBeGreaterThan(0);
  });

  it("without --max-procs, a default ceiling still stops a fork bomb (held by the pid namespace itself)", async () => {
    const r = await sandboxSh(
      s.ws,
      forkBomb(3000, "made"),
    );
    const made = Number(r.stdout.trim());
    expect(made).toBeGreaterThanOrEqual(1000);
    expect(made).toBeLessThan(1400);
    expect(r.summary?.limits).toMatchObject({ procs: "pid-namespace" });
  });

  it("a file cannot grow past --max-file-size", async () => {
    const r = await sandboxSh(s.ws, `head -c 100000 /dev/zero > big; echo status=$?`, ["--max-file-size", "4096"]);
    expect(r.stdout).not.toContain("status=0");
    expect(statSync(join(s.ws, "big")).size).toBeLessThanOrEqual(4096);
  });

  it("memory past --max-memory kills the allocating process", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "x = bytearray(300 * 1024 * 1024); x[::4096] = b'y' * len(x[::4096]); print('ALLOCATED')"; echo status=$?`, [
      "--max-memory", String(64 * 1024 * 1024),
    ]);
    expect(r.stdout).not.toContain("ALLOCATED");
    expect(r.stdout).toMatch(/status=(137|1)/);
  });

  it("output past --max-output stops the sandbox", async () => {
    const r = await sandboxSh(s.ws, `yes 0123456789`, ["--max-output", "10000"]);
    expect(r.code).toBe(125);
    expect(r.stdout.length).toBeLessThanOrEqual(10000);
    expect(r.stderr).toContain("output exceeded --max-output 10000 bytes");
  });

  it("--timeout stops the command with exit status 124", async () => {
    const started = Date.now();
    const r = await sandboxSh(s.ws, `sleep 30`, ["--timeout", "1"]);
    expect(r.code).toBe(124);
    expect(r.stderr).toContain("timed out after 1s");
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("CPU time past --max-cpu kills the spinning process", async () => {
    const r = await sandboxSh(s.ws, `timeout 20 sh -c 'while :; do :; done'; echo status=$?`, ["--max-cpu", "1"]);
    expect(r.stdout).toMatch(/status=(152|137|124)/);
    expect(r.stdout).not.toContain("status=124");
  });

  it("the private /tmp is bounded and discarded", async () => {
    const r = await sandboxSh(s.ws, `head -c 2000000000 /dev/zero > /tmp/fill; echo status=$?; du -sm /tmp | cut -f1`);
    expect(r.stdout).not.toContain("status=0");
    expect(Number(r.stdout.trim().split("\n").pop())).toBeLessThanOrEqual(1025);
    expect(existsSync("/tmp/fill")).toBe(false);
  });
});
