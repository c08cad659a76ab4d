import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT, VAK_BIN } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

// vak run from a real terminal (a pseudo-terminal this test owns, as a user's
// terminal emulator would): the command must never hold the user's terminal,
// only a pty the launcher owns and counts, and the terminal must come back as
// it was on every way out.

type Step = { wait: string } | { send: string } | { sleep: number } | { winsize: [number, number] } | { signal: number };
interface Driven {
  output: string;
  piped: string;
  code: number;
  timedOut: boolean;
  termiosBefore: number[];
  termiosAfter: number[];
  unread: string;
}

function drive(cwd: string, vakArgs: string[], steps: Step[], opts: { stdin?: "tty" | "null"; stdout?: "tty" | "pipe"; rows?: number; cols?: number; timeout?: number } = {}): Promise<Driven> {
  const spec = {
    argv: [process.execPath, VAK_BIN, ...vakArgs], cwd, env: { ...baseEnv(), TERM: "xterm-256color" },
    rows: opts.rows ?? 24, cols: opts.cols ?? 80, stdin: opts.stdin ?? "tty", stdout: opts.stdout ?? "tty", timeout: opts.timeout ?? 30, steps,
  };
  return new Promise((resolve, reject) => {
    execFile("/usr/bin/python3", [join(ROOT, "test/support/pty-drive.py"), JSON.stringify(spec)], { maxBuffer: 64 << 20 }, (err, stdout) => {
      if (err) return reject(err);
      resolve(JSON.parse(stdout) as Driven);
    });
  });
}

const sh = (script: string) => ["exec", "--", "/bin/sh", "-c", script];

describe("the terminal", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
  });
  afterAll(() => s.cleanup());

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
});
