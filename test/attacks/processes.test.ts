import { spawn, type ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// A host process the sandbox must neither see, signal nor trace.
describe("host processes are invisible and untouchable", () => {
  let s: Scratch;
  let host: ChildProcess;
  let hostPid = 0;
  beforeAll(() => {
    s = scratch();
    host = spawn("sleep", ["600"], { stdio: "ignore" });
    hostPid = host.pid!;
  });
  afterAll(() => {
    host.kill("SIGKILL");
    s.cleanup();
  });

  it("only the sandbox's own processes are listed in /proc", async () => {
    const r = await sandboxSh(s.ws, `ls /proc | grep -E '^[0-9]+$' | wc -l; ps -e 2>/dev/null | wc -l; test -e /proc/${hostPid} && echo VISIBLE; true`);
    const [count] = r.stdout.trim().split("\n").map(Number);
    expect(count).toBeLessThan(10);
    expect(r.stdout).not.toContain("VISIBLE");
  });

  it("kill by the host pid number reaches nothing on the host", async () => {
    const r = await sandboxSh(s.ws, `kill -9 ${hostPid}; kill -9 -1; true`);
    expect(r.code).toBe(0);
    expect(host.exitCode).toBeNull();
    expect(() => process.kill(hostPid, 0)).not.toThrow();
  });

  it("ptrace is refused, to a sibling in the sandbox and to anything else", async () => {
    const r = await sandboxSh(
      s.ws,
      `sleep 30 & python3 -c "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in (int(sys.argv[1]), 1, ${hostPid}):
    r = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    print('attach', pid, r, os.strerror(ctypes.get_errno()))
" $!; strace -f true 2>&1 | head -1; kill %1`,
    );
    expect(r.stdout).not.toMatch(/attach \d+ 0 /);
    expect(r.stdout.match(/attach \d+ -1/g)?.length).toBe(3);
  });

  it("TIOCSTI cannot push keystrokes into a terminal", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "
import fcntl, termios, os, errno
fd = os.open('/dev/null', os.O_RDWR)
try:
    fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('ALLOWED')
except OSError as e: print('refused', errno.errorcode[e.errno])
"`);
    expect(r.stdout.trim()).toBe("refused EPERM");
  });
});
