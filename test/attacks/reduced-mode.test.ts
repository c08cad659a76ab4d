import { createServer, type Server } from "node:net";
import { existsSync, lstatSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak, sandboxSh } from "../support/vak.js";

const isLink = (p: string) => lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink() ?? false;

// Every test here runs vak under a seccomp filter that makes creating a user
// namespace fail, as on hosts that forbid it. Nothing machine-wide changes.
describe("without user namespaces", () => {
  const wrapper = [inject("noUserns")];
  let s: Scratch;
  let host: Server;
  const hits: string[] = [];
  beforeAll(async () => {
    s = scratch({ git: true });
    writeFileSync(join(s.outside, "secret"), "reduced-secret\n");
    host = createServer((c) => {
      hits.push("unix");
      c.destroy();
    });
    await new Promise<void>((r) => host.listen(join(s.ws, "host.sock"), () => r()));
  });
  afterAll(() => {
    host.close();
    s.cleanup();
  });

  it("vak doctor reports the missing layer and the reduced sandbox", async () => {
    const r = await runVak(["doctor", "--json"], { cwd: s.ws, wrapper });
    const report = JSON.parse(r.stdout) as { ok: boolean; sandbox: string; smokeTest: string; probe: { user_namespaces: boolean } };
    expect(r.code).toBe(1);
    expect(report.probe.user_namespaces).toBe(false);
    expect(report.sandbox).toBe("reduced");
    expect(report.smokeTest).toBe("ok");
  });

  it("the default sandbox refuses to run rather than run weaker", async () => {
    const r = await sandboxSh(s.ws, "echo RAN", [], { wrapper });
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain("RAN");
    expect(r.stderr).toContain("user namespaces are unavailable");
    expect(r.stderr).toContain("--sandbox reduced");
  });

  it("reduced mode, asked for explicitly, still confines reads and writes", async () => {
    const r = await sandboxSh(s.ws, `cat ${s.outside}/secret; echo evil > ${s.outside}/new; ls $HOME/..; echo ok > inside; true`, ["--sandbox", "reduced"], { wrapper });
    expect(r.code).toBe(0);
    expect(r.summary?.sandbox).toBe("reduced");
    expect(r.stdout + r.stderr).not.toContain("reduced-secret");
    expect(existsSync(join(s.outside, "new"))).toBe(false);
    expect(existsSync(join(s.ws, "inside"))).toBe(true);
  });

  it("reduced mode keeps protected paths and refuses host sockets", async () => {
    const r = await sandboxSh(s.ws, `echo evil > .git/hooks/pre-commit; echo evil > .envrc; python3 -c "
import socket
s = socket.socket(socket.AF_UNIX)
try: s.connect('host.sock'); print('REACHED')
except OSError as e: print('refused', e.errno)
"; true`, ["--sandbox", "reduced"], { wrapper });
    expect(existsSync(join(s.ws, ".git/hooks/pre-commit"))).toBe(false);
    expect(existsSync(join(s.ws, ".envrc"))).toBe(false);
    expect(r.stdout).toContain("refused 13");
    expect(hits).toEqual([]);
  });

  it("reduced mode: a directory holding a link, renamed from the workspace into a host tool's state directory, does not arrive (no mounts there to answer EXDEV: the guard does)", async () => {
    const home = join(s.root, "home-links");
    mkdirSync(join(home, ".config", "vak"), { recursive: true });
    mkdirSync(join(home, "state"));
    writeFileSync(join(home, ".config", "vak", "config.toml"), `[profiles.tool]\nstate_dirs = ["~/state"]\n`);
    const r = await runVak(["exec", "--sandbox", "reduced", "--profile", "tool", "--", "sh", "-c",
      `mkdir -p carrier && ln -s ${s.outside} carrier/2026 && python3 -c 'import os; os.rename("carrier", "${home}/state/carrier")' 2>&1 | tail -1; ` +
      `mv carrier ${home}/state/moved 2>/dev/null; ln -s ${s.outside} ${home}/state/direct 2>/dev/null; true`],
      { cwd: s.ws, wrapper, env: baseEnv({ HOME: home, XDG_CONFIG_HOME: join(home, ".config") }) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("Invalid cross-device link");
    for (const p of ["carrier/2026", "moved/2026", "direct"]) expect(existsSync(join(home, "state", p)) || isLink(join(home, "state", p)), p).toBe(false);
  });

  it("reduced mode hides host processes' /proc and has no network", async () => {
    const r = await sandboxSh(s.ws, `cat /proc/1/cmdline && echo LEAK; python3 -c "
import socket
try: socket.socket(); print('INET')
except OSError as e: print('refused', e.errno)
"; true`, ["--sandbox", "reduced"], { wrapper });
    expect(r.stdout).not.toContain("LEAK");
    expect(r.stdout).toContain("refused 13");
  });

  it("reduced mode keeps the host's processes and IPC out of reach", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
def check(name, rc):
    print(name, 'refused' if rc < 0 else 'DONE', errno.errorcode.get(ctypes.get_errno(), ''))
check('shmget', libc.shmget(0, 4096, 0o1600))
check('msgget', libc.msgget(0, 0o1600))
check('prlimit-host', libc.prlimit(${process.pid}, 0, None, None))
check('setpriority-user', libc.setpriority(2, os.getuid(), 10))
try:
    fd = os.open('/proc', os.O_RDONLY | os.O_CREAT | os.O_DIRECTORY); print('proc DONE', len(os.listdir(fd)))
except OSError as e: print('proc refused')
"`, ["--sandbox", "reduced"], { wrapper });
    expect(r.stdout).not.toContain("DONE");
    expect(r.stdout.match(/refused/g)?.length).toBe(5);
  });

  it("reduced mode refuses what it cannot guarantee: --deny-read inside a grant", async () => {
    const r = await sandboxSh(s.ws, `echo RAN`, ["--sandbox", "reduced", "--deny-read", "README"], { wrapper });
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain("RAN");
    expect(r.stderr).toContain("reduced mode cannot hide a path inside a grant");
  });

  it("reduced mode still kills the whole tree on timeout", async () => {
    const marker = `${Math.floor(Math.random() * 1e6) + 1000}.7`;
    const r = await sandboxSh(s.ws, `sleep ${marker} & setsid sleep ${marker} & sleep ${marker}`, ["--sandbox", "reduced", "--timeout", "1"], { wrapper });
    expect(r.code).toBe(124);
    await new Promise((res) => setTimeout(res, 300));
    expect(processesWith(`sleep ${marker}`)).toEqual([]);
  });
});
