import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { LAUNCHER } from "../support/paths.js";
import { sandboxSh, spawnVak } from "../support/vak.js";

/** Host pids of the launcher processes (monitor, init, guard) of the sandbox whose command line contains marker. */
/** The processes whose command line names the marker and starts with prefix (the launcher's, by default). */
function launcherTree(marker: string, prefix: string = LAUNCHER): { pid: number; ppid: number; comm: string }[] {
  const out: { pid: number; ppid: number; comm: string }[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, "utf8");
      if (!cmd.startsWith(prefix) || !cmd.includes(marker)) continue;
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      out.push({ pid: Number(e), ppid: Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]), comm: readFileSync(`/proc/${e}/comm`, "utf8").trim() });
    } catch {
      // gone
    }
  }
  return out;
}

// The write guard is code of ours inside the sandbox, facing hostile input.
describe("the write guard holds up", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());

  it("cannot be reached through /proc/<its pid>: not its memory, not its fds (the launch report)", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "
import os
pids = [p for p in os.listdir('/proc') if p.isdigit() and p not in (str(os.getpid()), '1')]
hits = []
for p in pids:
    for leaf in ('mem', 'environ', 'fd/3', 'fd/4'):
        try:
            fd = os.open('/proc/%s/%s' % (p, leaf), os.O_RDWR | os.O_CREAT)
            hits.append('%s/%s' % (p, leaf))
        except OSError:
            pass
print('HITS', hits)
"`);
    expect(r.stdout.trim()).toBe("HITS []");
    expect(r.summary?.setupError).toBeNull();
  });

  it("O_TMPFILE (Python's TemporaryFile) works and the guard lives on", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "
import tempfile, os
with tempfile.TemporaryFile(dir='.') as f: f.write(b'x')
os.mkdir('after')
print('ok')
"`);
    expect(r.stdout.trim()).toBe("ok");
  });

  it("does not inherit the command's file size and CPU ceilings", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "
import os
try: os.truncate('README', 1 << 20)
except OSError as e: print('truncate refused', e.errno)
for i in range(3000):
    os.mkdir('d'); os.rmdir('d')
open('after', 'w').write('ok')
print('alive')
"`, ["--max-file-size", "4096", "--max-cpu", "30"]);
    expect(r.stdout).toContain("alive");
    expect(readFileSync(join(s.ws, "after"), "utf8")).toBe("ok");
  });

  it("a blocking connect to a full backlog does not stall everyone else's writes", async () => {
    const r = await sandboxSh(s.ws, `python3 -c "
import socket, threading, os, time
srv = socket.socket(socket.AF_UNIX); srv.bind('busy.sock'); srv.listen(0)
held = []
def fill():
    for _ in range(8):
        c = socket.socket(socket.AF_UNIX); held.append(c); c.connect('busy.sock')
threading.Thread(target=fill, daemon=True).start()
time.sleep(1)
t = time.time(); open('written', 'w').write('x'); print('write took', round(time.time() - t, 2), flush=True)
os._exit(0)
"`, ["--timeout", "20"]);
    const took = Number(/write took ([\d.]+)/.exec(r.stdout)?.[1] ?? 99);
    expect(took).toBeLessThan(2);
  });

  it("refuses file attribute ioctls the guard cannot see (chattr on a protected hook)", async () => {
    writeFileSync(join(s.ws, ".git/hooks/pre-commit.sample"), "#!/bin/sh\n");
    const r = await sandboxSh(s.ws, `python3 -c "
import fcntl, os, errno, struct
fd = os.open('.git/hooks/pre-commit.sample', os.O_RDONLY)
try: fcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x20)); print('SET')
except OSError as e: print('refused', errno.errorcode[e.errno])
"`);
    expect(r.stdout.trim()).toBe("refused EPERM");
  });

  it("if the guard dies, the run is stopped and reported, not continued half-broken", async () => {
    const marker = `guard-death-${process.pid}-${Date.now()}`;
    const child = spawnVak(["exec", "--", "/bin/sh", "-c", `echo ${marker} >/dev/null; sleep 30; echo AFTER > after`], { cwd: s.ws });
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.on("close", (c) => r(c)));
    let guard: number | undefined;
    // A container takes a while to start on a loaded machine: look for up to 30 s.
    for (let i = 0; i < 600 && guard === undefined; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const tree = launcherTree(marker);
      const monitor = tree.find((t) => !tree.some((u) => u.pid === t.ppid));
      // The monitor's child that has children of its own (on the container backend the monitor also has a
      // childless lifeline watcher, native/hostdir.c).
      const init = tree.find((t) => t.ppid === monitor?.pid && tree.some((u) => u.ppid === t.pid));
      // Until the command has been exec'd, init's child with the launcher's command line may be the
      // payload (or the short-lived process that forks the guard), not the guard.
      const execd = init !== undefined && launcherTree(marker, "/bin/sh").some((t) => t.ppid === init.pid);
      // init's children are also the resolver (and with a network grant the relay): the guard is named.
      if (execd) guard = tree.find((t) => t.ppid === init.pid && t.comm === "vak-guard")?.pid;
    }
    expect(guard).toBeDefined();
    process.kill(guard!, "SIGKILL");
    expect(await exited).toBe(125);
    expect(stderr).toContain("the write guard died");
  });
});
