import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak, sandboxSh } from "../support/vak.js";

// Every limit that ends a command (or refuses something while it runs) gets a
// Vak line on stderr: which limit, its value, and the flag that raises it; and
// the journal's worker.exited says the same.
let s: Scratch;
beforeAll(() => {
  s = scratch();
});
afterAll(() => s.cleanup());

const vakLines = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("vak: "));

async function exitedEvent(): Promise<Record<string, unknown>> {
  const r = await runVak(["journal", "export", "last"], { cwd: s.ws });
  const events = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { kind: string; payload: Record<string, unknown> });
  return events.find((e) => e.kind === "worker.exited")!.payload;
}

describe("a Vak line for every limit", () => {
  it("--max-cpu: a process killed by SIGXCPU (exit 152)", async () => {
    const r = await sandboxSh(s.ws, "exec /bin/sh -c 'while :; do :; done'", ["--max-cpu", "1"]);
    expect(r.code).toBe(152);
    expect(vakLines(r.stderr)).toContainEqual(expect.stringMatching(/^vak: stopped: a process used up its CPU time, --max-cpu 1s, and was killed by SIGXCPU \(exit 152\); raise it with --max-cpu 2 or more$/));
    expect(r.summary?.limitsHit).toEqual([expect.objectContaining({ limit: "cpu", flag: "--max-cpu", value: "1", ended: true })]);
    expect((await exitedEvent()).limitsHit).toEqual([expect.objectContaining({ limit: "cpu", ended: true })]);
  });

  it("--max-cpu: a shell whose child was killed by SIGXCPU reports 152 too, and that is named", async () => {
    const r = await sandboxSh(s.ws, "/bin/sh -c 'while :; do :; done'; exit $?", ["--max-cpu", "1"]);
    expect(r.code).toBe(152);
    expect(vakLines(r.stderr).join("\n")).toMatch(/vak: stopped: a process used up its CPU time, --max-cpu 1s, .*SIGXCPU/);
  });

  it("--max-file-size: a write past it is killed by SIGXFSZ (exit 153); K is 1024", async () => {
    const ok = await sandboxSh(s.ws, "head -c 10240 /dev/zero > exact.bin", ["--max-file-size", "10K"]);
    expect(ok.code).toBe(0);
    expect(vakLines(ok.stderr)).toEqual([]);
    const r = await sandboxSh(s.ws, "exec head -c 10241 /dev/zero > big.bin", ["--max-file-size", "10K"]);
    expect(r.code).toBe(153);
    expect(vakLines(r.stderr)).toContainEqual(expect.stringMatching(/^vak: stopped: a process wrote past --max-file-size 10K and was killed by SIGXFSZ \(exit 153\); raise it with --max-file-size 20K or more$/));
    expect((await exitedEvent()).limitsHit).toEqual([expect.objectContaining({ limit: "file-size", value: "10K" })]);
  });

  it("--max-output: stdout and stderr past it stop the sandbox (exit 125); 1K is 1024 bytes", async () => {
    const ok = await sandboxSh(s.ws, "head -c 1024 /dev/zero", ["--max-output", "1K"]);
    expect(ok.code).toBe(0);
    const r = await sandboxSh(s.ws, "head -c 5000 /dev/zero; sleep 5", ["--max-output", "1K"]);
    expect(r.code).toBe(125);
    expect(r.stdout.length).toBe(1024);
    expect(vakLines(r.stderr)).toContainEqual(expect.stringMatching(/^vak: stopped: output exceeded --max-output 1024 bytes \(1K\); raise it with --max-output 2K or more$/));
    expect((await exitedEvent()).limitsHit).toEqual([expect.objectContaining({ limit: "output", ended: true })]);
  });

  it("--timeout with a unit: stopped after it (exit 124)", async () => {
    const r = await sandboxSh(s.ws, "sleep 30", ["--timeout", "1500ms"]);
    expect(r.code).toBe(124);
    expect(vakLines(r.stderr)).toContainEqual(expect.stringMatching(/^vak: stopped: timed out after 1500ms; raise it with --timeout 3s or more$/));
    expect((await exitedEvent()).limitsHit).toEqual([expect.objectContaining({ limit: "timeout", value: "1500ms" })]);
  });

  it("--max-memory: the kernel's kill for memory is named, with the flag", async () => {
    const r = await sandboxSh(s.ws, "exec python3 -c 'x = bytearray(256 * 1024 * 1024)'", ["--max-memory", "32M"]);
    expect(r.code).not.toBe(0);
    const limits = r.summary?.limits as { memoryCgroup: boolean } | null;
    // Held by a memory cgroup (the kernel kills) or RLIMIT_DATA (the allocation fails): a line either way.
    expect(vakLines(r.stderr).join("\n")).toMatch(limits?.memoryCgroup ? /vak: stopped: the memory limit, --max-memory 32M, killed 1 process; raise it with --max-memory 64M or more/ : /--max-memory 32M is held as RLIMIT_DATA here/);
    expect((await exitedEvent()).limitsHit).toEqual([expect.objectContaining({ limit: "memory", value: "32M" })]);
  });

  it("--max-procs: refused forks are counted and named", async () => {
    const r = await sandboxSh(s.ws, "for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait", ["--max-procs", "4"]);
    expect(vakLines(r.stderr)).toContainEqual(expect.stringMatching(/^vak: the process limit, --max-procs 4, refused \d+ forks?; raise it with --max-procs 8 or more$/));
  });

  it("a limit that was not hit says nothing, and an exit status of 152 without --max-cpu is the command's own", async () => {
    const r = await sandboxSh(s.ws, "exit 152", ["--max-file-size", "1M", "--timeout", "1m"]);
    expect(r.code).toBe(152);
    expect(vakLines(r.stderr)).toEqual([]);
    expect(r.summary?.limitsHit).toEqual([]);
  });
});
