import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT, VAK_BIN } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

// vak exec from a real terminal (a pseudo-terminal this test owns, as a user's
// terminal emulator would): the command must never hold the user's terminal,
// only a pty the launcher owns and counts, and the terminal must come back as
// it was on every way out. Every test runs twice: in-process (node bin/vak.cjs),
// and through the resident host's native client (src/resident/, native/client.c)
// with VAK_RESIDENT=only wherever the terminal is interactive, so that the host
// serves it or the run fails; a terminal the host leaves to the CLI (only
// written to, or read in a pipeline) runs through the client too, in-process.

type Step = { wait: string } | { send: string } | { sleep: number } | { winsize: [number, number] } | { signal: number };
interface Driven {
  output: string;
  piped: string;
  code: number;
  timedOut: boolean;
  termiosBefore: number[];
  termiosAfter: number[];
  unread: string;
  ttyName: string;
  ttyRdev: number;
}
interface DriveOpts {
  /** Through the host: VAK_RESIDENT=only (served or refused) or not (left to the CLI); by default, only when interactive. */
  only?: boolean;
  stdin?: "tty" | "null";
  stdout?: "tty" | "pipe";
  rows?: number;
  cols?: number;
  timeout?: number;
}

const CLIENT = join(ROOT, "build/Release/vak-client");

/** How vak is started: in-process, or the native client of a host this file started (its runtime directory). */
type Way = { kind: "in-process" } | { kind: "host"; rt: string };

function driveWay(way: Way, cwd: string, vakArgs: string[], steps: Step[], opts: DriveOpts = {}, wrapper: string[] = []): Promise<Driven> {
  const interactive = (opts.stdin ?? "tty") === "tty" && (opts.stdout ?? "tty") === "tty";
  const argv = way.kind === "host" ? [...wrapper, CLIENT, ...vakArgs] : [...wrapper, process.execPath, VAK_BIN, ...vakArgs];
  const env = way.kind === "host" ? baseEnv({ XDG_RUNTIME_DIR: way.rt, TERM: "xterm-256color", ...((opts.only ?? interactive) ? { VAK_RESIDENT: "only" } : { VAK_RESIDENT: "no-start" }) }) : { ...baseEnv(), TERM: "xterm-256color" };
  const spec = {
    argv, cwd, env,
    rows: opts.rows ?? 24, cols: opts.cols ?? 80, stdin: opts.stdin ?? "tty", stdout: opts.stdout ?? "tty", timeout: opts.timeout ?? 30, steps,
  };
  return new Promise((resolve, reject) => {
    execFile("/usr/bin/python3", [join(ROOT, "test/support/pty-drive.py"), JSON.stringify(spec)], { maxBuffer: 64 << 20 }, (err, stdout) => {
      if (err) return reject(err);
      resolve(JSON.parse(stdout) as Driven);
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A resident host of this file's own, in a runtime directory of its own; stopped by its pid. */
async function startHost(): Promise<{ rt: string; child: ChildProcess; pid: number; stop(): void }> {
  const base = mkdtempSync(join(tmpdir(), "vak-term-host-"));
  const rt = join(base, "rt");
  mkdirSync(rt, { mode: 0o700 });
  // A session of its own, as native/client.c starts it (setsid): a terminal it opened without O_NOCTTY would become its own.
  const child = spawn(process.execPath, [VAK_BIN, "host", "--idle-seconds", "900"], { env: baseEnv({ XDG_RUNTIME_DIR: rt }), stdio: "ignore", detached: true });
  const pidFile = join(rt, "vak", "host.pid");
  const end = Date.now() + 20_000;
  while (!existsSync(pidFile)) {
    if (Date.now() > end) throw new Error("the resident host did not start");
    await sleep(25);
  }
  const pid = Number(readFileSync(pidFile, "utf8"));
  if (!Number.isInteger(pid) || pid <= 1 || pid !== child.pid) throw new Error(`${pidFile} holds no pid of the host started here`);
  return {
    rt, child, pid,
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      rmSync(base, { recursive: true, force: true });
    },
  };
}

const sh = (script: string) => ["exec", "--", "/bin/sh", "-c", script];

describe.each(["in-process", "through the resident host"] as const)("the terminal, %s", (kind) => {
  let s: Scratch;
  let way: Way = { kind: "in-process" };
  let host: Awaited<ReturnType<typeof startHost>> | undefined;
  beforeAll(async () => {
    s = scratch();
    if (kind === "through the resident host") {
      host = await startHost();
      way = { kind: "host", rt: host.rt };
    }
  }, 30_000);
  afterAll(() => {
    host?.stop();
    s.cleanup();
  });
  const drive = (cwd: string, vakArgs: string[], steps: Step[], opts: DriveOpts = {}, wrapper: string[] = []) => driveWay(way, cwd, vakArgs, steps, opts, wrapper);

  it("a shell reads a line typed at the terminal, and stty size sees the window", async () => {
    const r = await drive(s.ws, sh("stty size; printf 'name? '; read line; echo got:$line"), [{ wait: "name? " }, { send: "hello\r" }, { wait: "got:" }], { rows: 30, cols: 100 });
    expect(r.output).toContain("30 100");
    expect(r.output).toContain("got:hello");
    expect(r.code).toBe(0);
    expect(r.termiosAfter).toEqual(r.termiosBefore);
  });

  it("the window size follows the terminal's", async () => {
    const r = await drive(s.ws, sh("echo ready; read x; stty size"), [{ wait: "ready" }, { winsize: [40, 120] }, { sleep: 800 }, { send: "\r" }, { wait: "40 120" }]);
    expect(r.output).toContain("40 120");
    expect(r.code).toBe(0);
  });

  it("Ctrl-C stops the command, and colours and escape sequences pass through", async () => {
    const started = Date.now();
    // exec: a shell between echo and fork would catch the SIGINT and wait for sleep (dash with -c does).
    const r = await drive(s.ws, sh("printf '\\033[31mred\\033[0m\\n'; echo ready; exec sleep 30"), [{ wait: "ready" }, { sleep: 200 }, { send: "\x03" }]);
    expect(r.output).toContain("\x1b[31mred\x1b[0m");
    expect(r.code, r.output).toBe(130);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(r.termiosAfter).toEqual(r.termiosBefore);
  });

  it("Ctrl-Z on a command that is not a shell does not leave it stopped for ever", async () => {
    const r = await drive(s.ws, sh("echo ready; sleep 1; echo after"), [{ wait: "ready" }, { send: "\x1a" }, { wait: "after" }], { timeout: 15 });
    expect(r.timedOut).toBe(false);
    expect(r.output).toContain("after");
    expect(r.code).toBe(0);
  });

  it("job control works in an interactive shell", async () => {
    const r = await drive(s.ws, ["exec", "--", "/bin/bash", "--norc", "--noprofile", "-i"], [
      { sleep: 500 }, { send: "sleep 20 & jobs; kill %1; wait; echo done-$((40+2))\r" }, { wait: "done-42" }, { send: "exit\r" },
    ]);
    expect(r.output).toContain("done-42");
    expect(r.output).not.toMatch(/no job control|cannot set terminal process group/);
    expect(r.code).toBe(0);
  });

  it("/dev/tty cannot be opened when stdin is not the terminal (no controlling terminal)", async () => {
    const r = await drive(s.ws, sh("echo PWNED > /dev/tty; echo write=$?; read x < /dev/tty; echo read=$?"), [{ wait: "read=" }], { stdin: "null" });
    expect(r.output).not.toContain("PWNED");
    expect(r.output).toMatch(/write=[1-9]/);
    expect(r.output).toMatch(/read=[1-9]/);
  });

  it("keystrokes cannot be read with stdin at /dev/null: not from /dev/tty, nor fd 1 or 2", async () => {
    const r = await drive(s.ws, sh(`echo ready; read a < /dev/tty; echo "tty:$a"; timeout 2 sh -c 'read b <&1; echo "fd1:$b"'; timeout 2 sh -c 'read c <&2; echo "fd2:$c"'; echo end`),
      [{ wait: "ready" }, { send: "secret1\rsecret2\rsecret3\r" }, { wait: "end" }], { stdin: "null" });
    expect(r.output).toContain("end");
    expect(r.output).not.toMatch(/(tty|fd1|fd2):secret/);
    expect(r.unread).toContain("secret1"); // still waiting for the user's own shell
  });

  it("TIOCSTI stays blocked on the terminal the command is given", async () => {
    const r = await drive(s.ws, ["exec", "--", "/usr/bin/python3", "-c", `import fcntl, termios, os
for fd in (0, os.open('/dev/tty', os.O_RDWR)):
    try: fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('INJECTED')
    except OSError as e: print('refused', e.errno)`], []);
    expect(r.output).not.toContain("INJECTED");
    expect(r.output.match(/refused 1\b/g)?.length).toBe(2);
  });

  it("writes past --max-output through the terminal stop the sandbox, counted", async () => {
    for (const [script, stdin] of [["yes > /dev/tty", "tty"], ["yes", "tty"], ["yes", "null"], ["yes >&2", "null"]] as const) {
      const r = await drive(s.ws, ["exec", "--max-output", "10000", "--", "/bin/sh", "-c", script], [], { stdin });
      expect(r.code, script).toBe(125);
      expect(r.output, script).toContain("output exceeded --max-output 10000 bytes");
      // What the command wrote, before the terminal's own newline translation.
      // vak starts its own line on a line of its own: the newline before "vak: " may be its own.
      const body = r.output.slice(0, r.output.indexOf("vak: ")).replace(/\r\n/g, "\n").replace(/\n$/, "");
      expect(body.length, script).toBeLessThanOrEqual(10000);
      expect(body.length, script).toBeGreaterThan(5000);
      expect(r.termiosAfter, script).toEqual(r.termiosBefore);
    }
  });

  it("the terminal comes back as it was after a timeout, a kill of the command and SIGTERM to vak", async () => {
    const raw = "stty raw -echo; echo ready;";
    const timeout = await drive(s.ws, ["exec", "--timeout", "1", "--", "/bin/sh", "-c", `${raw} sleep 30`], [{ wait: "ready" }]);
    expect(timeout.code).toBe(124);
    expect(timeout.termiosAfter).toEqual(timeout.termiosBefore);
    const killed = await drive(s.ws, sh(`${raw} kill -9 $$`), [{ wait: "ready" }]);
    expect(killed.code).toBe(137);
    expect(killed.termiosAfter).toEqual(killed.termiosBefore);
    const term = await drive(s.ws, sh(`${raw} trap '' TERM; while :; do sleep 1; done`), [{ wait: "ready" }, { signal: 15 }], { timeout: 20 });
    expect(term.timedOut).toBe(false);
    expect(term.termiosAfter).toEqual(term.termiosBefore);
  });

  it("in a pipeline the command reads its input from the terminal but cannot write to it", async () => {
    const r = await drive(s.ws, sh("read line; echo got:$line; echo PWNED >&0; echo PWNED2 > /dev/tty; echo end"), [{ sleep: 500 }, { send: "typed\r" }, { sleep: 1500 }], { stdout: "pipe" });
    expect(r.piped).toContain("got:typed");
    expect(r.piped).toContain("end");
    expect(r.output).not.toContain("PWNED");
  });

  it("once vak is stopped and the user's shell has the terminal back, what is typed there is the shell's: the command reads none of it", async () => {
    rmSync(join(s.ws, "started"), { force: true });
    rmSync(join(s.ws, "got"), { force: true });
    const r = await drive(s.ws, sh("touch started; cat > got"), [{ wait: "shell-has-it" }, { send: "typed-at-the-shell\r" }, { wait: "shell-read=" }, { sleep: 300 }], { timeout: 25 }, jobShell("read"));
    expect(r.output).toContain("shell-read=typed-at-the-shell");
    expect(readFileSync(join(s.ws, "got"), "utf8")).not.toContain("typed");
  });

  it("once vak is back in the foreground (fg), what is typed reaches the command again", async () => {
    rmSync(join(s.ws, "started"), { force: true });
    rmSync(join(s.ws, "got"), { force: true });
    const r = await drive(s.ws, sh("touch started; cat > got"), [{ wait: "job-has-it" }, { sleep: 300 }, { send: "typed-after-fg\r" }, { wait: "job-read-it" }], { timeout: 25 }, jobShell("fg"));
    expect(r.output).toContain("job-read-it");
    expect(readFileSync(join(s.ws, "got"), "utf8")).toContain("typed-after-fg");
  });

  it("the command holds no descriptor of the user's terminal: not at any fd, nor as /dev/tty", async () => {
    const probe = `import os, stat
seen = set()
for name in os.listdir('/proc/self/fd'):
    try: st = os.fstat(int(name))
    except OSError: continue
    if stat.S_ISCHR(st.st_mode): seen.add(st.st_rdev)
try: seen.add(os.fstat(os.open('/dev/tty', os.O_RDWR)).st_rdev)
except OSError: pass
print('RDEVS', *sorted(seen), 'END')`;
    for (const stdin of ["tty", "null"] as const) {
      const r = await drive(s.ws, ["exec", "--", "/usr/bin/python3", "-c", probe], [{ wait: "END" }], { stdin });
      const rdevs = /RDEVS ([\d ]*) END/.exec(r.output)?.[1]?.trim().split(" ").map(Number);
      expect(rdevs, r.output).toBeDefined();
      // It writes to a terminal: the launcher's own pty, never the one the user typed vak at.
      expect(rdevs!.length, r.output).toBeGreaterThan(0);
      expect(rdevs, `${stdin}: ${r.output}`).not.toContain(r.ttyRdev);
      expect(r.code).toBe(0);
    }
  });
});

/**
 * A shell's job control in a few lines: runs ARGV in the terminal's foreground as a job of its own; once the
 * command has started (it makes ./started), stops the job (SIGSTOP to its process group, as a shell does on Ctrl-Z),
 * takes the terminal back with its own modes, as a shell does. Then, "read": reads the line typed meanwhile (typed
 * ahead: a shell busy for a second), says what it read, and kills the job; "fg": gives the job the terminal back,
 * continues it, and waits until ./got holds a line typed after that.
 */
const jobShell = (then: "read" | "fg") => ["/usr/bin/python3", "-c", `import os, select, signal, sys, termios, time
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
saved = termios.tcgetattr(0)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    while os.tcgetpgrp(0) != os.getpgrp(): time.sleep(0.01)
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.execv(sys.argv[2], sys.argv[2:])
os.setpgid(pid, pid)
os.tcsetpgrp(0, pid)
while not os.path.exists("started"): time.sleep(0.02)
time.sleep(0.5)
os.killpg(pid, signal.SIGSTOP)
os.waitpid(pid, os.WUNTRACED)
os.tcsetpgrp(0, os.getpgrp())
termios.tcsetattr(0, termios.TCSANOW, saved)
os.write(1, b"shell-has-it\\r\\n")
if sys.argv[1] == "read":
    time.sleep(1)
    got = os.read(0, 1000) if select.select([0], [], [], 5)[0] else b""
    os.write(1, b"shell-read=" + got.strip() + b"\\r\\n")
else:
    time.sleep(0.5)
    os.tcsetpgrp(0, pid)
    os.killpg(pid, signal.SIGCONT)
    os.write(1, b"job-has-it\\r\\n")
    end = time.time() + 10
    while time.time() < end and b"typed-after-fg" not in (open("got", "rb").read() if os.path.exists("got") else b""): time.sleep(0.05)
    os.tcsetpgrp(0, os.getpgrp())
    os.write(1, b"job-read-it\\r\\n" if time.time() < end else b"job-read-nothing\\r\\n")
os.kill(pid, signal.SIGKILL)
os.waitpid(pid, 0)`, then];

/** A command that runs ARGV in a process group of its own: in its terminal's background. */
const inBackground = ["/usr/bin/python3", "-c", "import os, sys\npid = os.fork()\nif pid == 0:\n    os.setpgid(0, 0)\n    os.execv(sys.argv[1], sys.argv[1:])\nsys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))"];

describe("the terminal through the resident host: what the host takes from it", () => {
  let s: Scratch;
  let host: Awaited<ReturnType<typeof startHost>>;
  let way: Way;
  beforeAll(async () => {
    s = scratch();
    host = await startHost();
    way = { kind: "host", rt: host.rt };
  }, 30_000);
  afterAll(() => {
    host.stop();
    s.cleanup();
  });

  it("a client in its terminal's background is not served as interactive: the host refuses to take the terminal (the kernel's word, not the client's)", async () => {
    const cmd = ["exec", "--", "/bin/sh", "-c", "stty -a >/dev/null 2>&1; echo ran-$((6*7))"];
    const only = await driveWay(way, s.ws, cmd, [], { only: true }, inBackground);
    expect(only.code, only.output).toBe(125);
    expect(only.output).toContain("not read interactively in the foreground");
    expect(only.output).not.toContain("ran-42");
    expect(only.termiosAfter).toEqual(only.termiosBefore);
    // Left to the CLI, it runs as in-process: in the background, its terminal untouched.
    const left = await driveWay(way, s.ws, cmd, [], { only: false }, inBackground);
    expect(left.output).toContain("ran-42");
    expect(left.code).toBe(0);
    expect(left.termiosAfter).toEqual(left.termiosBefore);
  });

  it("the host keeps no descriptor of a client's terminal once its command ended, and has no controlling terminal", async () => {
    const r = await driveWay(way, s.ws, ["exec", "--", "/bin/sh", "-c", "echo ready; read x; echo done"], [{ wait: "ready" }, { send: "go\r" }, { wait: "done" }]);
    expect(r.code, r.output).toBe(0);
    const fds = readdirSync(`/proc/${host.pid}/fd`).map((f) => {
      try {
        // The terminal is gone by now (the driver closed it): its links read "/dev/pts/N (deleted)".
        return readlinkSync(`/proc/${host.pid}/fd/${f}`).replace(/ \(deleted\)$/, "");
      } catch {
        return "";
      }
    });
    expect(fds.length).toBeGreaterThan(3);
    expect(fds).not.toContain(r.ttyName);
    const stat = readFileSync(`/proc/${host.pid}/stat`, "latin1");
    expect(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[4]).toBe("0");
  });

  it("the host's death (kill -9) while the terminal is raw: the client says so, exits 125, and the terminal comes back as it was", async () => {
    const own = await startHost();
    try {
      const marker = join(s.ws, "started");
      rmSync(marker, { force: true });
      const running = driveWay({ kind: "host", rt: own.rt }, s.ws, ["exec", "--", "/bin/sh", "-c", "touch started; echo ready; sleep 30"], [{ wait: "ready" }], { timeout: 20 });
      const end = Date.now() + 15_000;
      while (!existsSync(marker) && Date.now() < end) await sleep(25);
      expect(existsSync(marker)).toBe(true);
      await sleep(200);
      process.kill(own.pid, "SIGKILL");
      const r = await running;
      expect(r.timedOut).toBe(false);
      expect(r.code, r.output).toBe(125);
      expect(r.output).toContain("the resident host went away while the command ran");
      expect(r.termiosAfter).toEqual(r.termiosBefore);
    } finally {
      own.stop();
    }
  });
});
