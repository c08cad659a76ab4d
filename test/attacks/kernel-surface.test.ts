import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

/** Calls one raw syscall from python inside the sandbox and prints its errno name. */
const raw = (nr: number, ...args: number[]) => `python3 -c "
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(${[nr, ...args].join(", ")})
print('ok' if r >= 0 else errno.errorcode[ctypes.get_errno()])
"`;

describe("kernel attack surface", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());

  it("no nested user namespace (unshare -U, unshare(2), clone(2))", async () => {
    // unshare(CLONE_NEWUSER) and clone(CLONE_NEWUSER|SIGCHLD) straight from libc.
    const r = await sandboxSh(s.ws, `unshare -Ur true && echo NESTED; ${raw(272, 0x10000000)}; ${raw(56, 0x10000000 | 17, 0, 0, 0, 0)}; true`);
    expect(r.stdout).not.toContain("NESTED");
    expect(r.stdout.trim().split("\n")).toEqual(["EPERM", "EPERM"]);
    // Refused by the guard, which says why, so that a tool whose own sandbox failed is not a mystery.
    expect(r.stderr).toMatch(/vak: refused (unshare|clone) \(a new user namespace\): a sandbox inside the sandbox/);
    expect(r.stderr).toMatch(/… and \d+ more refused \((unshare|clone)\)/);
  });

  it("a nested namespace of every kind is refused, and each refusal names the namespaces asked for", async () => {
    const r = await sandboxSh(s.ws, `${raw(272, 0x40000000 | 0x20000000)}; ${raw(56, 0x20000000 | 0x04000000 | 17, 0, 0, 0, 0)}; true`);
    expect(r.stdout.trim().split("\n")).toEqual(["EPERM", "EPERM"]);
    expect(r.stderr).toMatch(/refused (unshare|clone) \(a new (network, pid|mount, network)|refused (unshare|clone) \(a new (pid, uts|mount)/);
  });

  it("no mount, bind mount or pivot_root to rewrite a protected path (the sandbox-runtime escape)", async () => {
    const before = readFileSync(join(s.ws, ".git/config"), "utf8");
    writeFileSync(join(s.ws, "evil-config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
    const r = await sandboxSh(
      s.ws,
      `unshare -Urm sh -c 'mount --bind evil-config .git/config && cat .git/config'; mount --bind evil-config .git/config; mount -t tmpfs none .git; ${raw(155, 0, 0)}; true`,
    );
    expect(r.code).toBe(0);
    expect(readFileSync(join(s.ws, ".git/config"), "utf8")).toBe(before);
    expect(r.stdout).not.toContain("fsmonitor");
    expect(r.stdout.trim()).toBe("EPERM"); // pivot_root
  });

  it("no io_uring (it bypasses seccomp per operation)", async () => {
    const r = await sandboxSh(s.ws, raw(425, 8, 0)); // io_uring_setup
    expect(r.stdout.trim()).toBe("ENOSYS");
  });

  it("no bpf, keyctl, perf_event_open, userfaultfd, kexec, module loading", async () => {
    for (const nr of [321, 250, 298, 323, 246, 175]) {
      const r = await sandboxSh(s.ws, raw(nr, 0, 0, 0, 0));
      expect(r.stdout.trim(), `syscall ${nr}`).toMatch(/^E(PERM|NOSYS)$/);
    }
  });

  it("no second seccomp listener that could answer CONTINUE for the guard", async () => {
    // seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, NULL)
    const r = await sandboxSh(s.ws, raw(317, 1, 8, 0));
    expect(r.stdout.trim()).toBe("EPERM");
  });

  it("clone3 answers ENOSYS so that libc falls back to clone, which is checked", async () => {
    const r = await sandboxSh(s.ws, raw(435, 0, 0));
    expect(r.stdout.trim()).toBe("ENOSYS");
  });

  it("32-bit and x32 system calls are not a way around the filter", async () => {
    // x32: the syscall number with bit 30 set; the filter kills the process.
    const r = await sandboxSh(s.ws, `${raw(0x40000000 + 39)}; echo status=$?`);
    expect(r.stdout).not.toContain("ok");
    expect(r.stdout).toMatch(/status=(159|137|1)/);
  });
});
