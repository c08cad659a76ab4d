import { randomBytes } from "node:crypto";
import { closeSync, constants as fsc, existsSync, mkdirSync, openSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type IPty, spawn } from "node-pty";
import type { WebSocket } from "ws";
import type { InteractiveSandbox } from "../broker/broker.js";
import { vakDirs } from "../policy/state.js";
import { launcherArgs, launcherEnv, launcherPath } from "../sandbox/launcher.js";
import { parseReport } from "../sandbox/report.js";
import type { TextFilter } from "./browser-text.js";
import type { LiveSession } from "./live-session.js";
import { type StreamRedactor, TerminalStream } from "./terminal-stream.js";
import { TerminalSize } from "./wire.js";

/**
 * The web terminal: a real PTY (node-pty) whose shell runs inside the
 * session's sandbox, with exactly the session's grants, through the same
 * launcher and plan as the agent's commands. It is not approval-gated (a
 * person types into it), so it is off unless the user's config turns it on,
 * and the upgrade that opens it is loopback-pinned (upgrade.ts). The broker
 * stops it with its other workers when the mode changes or the session ends.
 *
 * node-pty makes the shell's terminal its controlling terminal (Ctrl-C,
 * job control), but passes no other descriptor, so a host /bin/sh opens the
 * launcher's report file and gate token file as fds 3 and 4 and execs the
 * launcher; both files live in Vak's private runtime directory, which no
 * sandbox can see, and the token file is removed as soon as the launcher
 * runs. The launcher's own argv (visible inside as pid 1's) carries no token.
 *
 * What the shell prints goes to xterm.js as a terminal's bytes (a terminal
 * emulator needs its escapes; the page disables links and clipboard writes),
 * redacted and neutralised across chunk boundaries (terminal-stream.ts).
 */
const SHELLS = ["/bin/bash", "/bin/sh"];
const MAX_INPUT = 64 * 1024;
/**
 * Output sent but not yet taken by the browser's socket, past which the pty is
 * no longer read (the shell's writes then block in the kernel) until half of
 * it has gone: a shell that floods a browser that stops reading holds this
 * much of the server's memory, not all it prints.
 */
export const MAX_UNSENT = 1024 * 1024;

interface Term {
  pty: IPty;
  exited: Promise<void>;
}

/** Kills a terminal's shell and waits for node-pty to report its exit. */
async function kill(term: Term): Promise<void> {
  try {
    // A paused pty never reads the end of its output, and node-pty reports the exit only after that.
    term.pty.resume();
    term.pty.kill("SIGKILL");
  } catch {
    // gone already
  }
  await term.exited;
}

function privateDir(): string {
  const d = vakDirs();
  const dir = join(d.runtime ?? join(d.state, "run"), "tmp");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

function privateFile(content: string): string {
  const path = join(privateDir(), `terminal-${process.pid}-${randomBytes(8).toString("hex")}`);
  const fd = openSync(path, fsc.O_RDWR | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600);
  try {
    if (content) writeFileSync(fd, content);
  } finally {
    closeSync(fd);
  }
  return path;
}

export class Terminals {
  private readonly bySession = new Map<string, Set<Term>>();

  constructor(private readonly deps: { filter: TextFilter; redactor: StreamRedactor; log: (line: string) => void }) {}

  /** Why a terminal cannot open for this session now, or undefined. */
  refusal(live: LiveSession | undefined): string | undefined {
    if (!live) return "no such live session";
    if (!live.hosted.interactive) return "this session has no shell (a workload's components are not a terminal)";
    const st = live.state();
    if (st.switching) return "the mode is being switched";
    return undefined;
  }

  open(ws: WebSocket, live: LiveSession): void {
    void this.start(ws, live).catch((e: Error) => {
      ws.close(1011, this.deps.filter(e.message).slice(0, 120));
    });
  }

  private async start(ws: WebSocket, live: LiveSession): Promise<void> {
    const shell = SHELLS.find((s) => existsSync(s))!;
    let term: Term | undefined;
    // Asked to stop before the shell runs (the broker revoking while the sandbox is set up): it never starts.
    let stopped = false;
    const stop = async () => {
      stopped = true;
      if (term) await kill(term);
    };
    // Keystrokes and resizes that arrive while the sandbox is being set up (its record, its gate) are kept, in
    // order and bounded, and replayed once the shell runs: a user who types at once loses nothing.
    let early: { text: string; binary: boolean }[] | undefined = [];
    let earlySize = 0;
    let deliver = (text: string, binary: boolean): void => {
      if (!early || earlySize + text.length > MAX_INPUT) return;
      early.push({ text, binary });
      earlySize += text.length;
    };
    ws.on("message", (data, binary) => {
      const text = Buffer.isBuffer(data) ? data.toString("utf8") : Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data).toString("utf8");
      if (text.length > MAX_INPUT) return;
      deliver(text, binary);
    });
    const sb: InteractiveSandbox = await live.hosted.interactive!([shell, "-i"], stop);
    if (stopped) {
      sb.exited(125, []);
      throw new Error("the session's policy changed while the terminal was starting; open it again");
    }
    const report = privateFile("");
    const token = sb.gate ? privateFile(sb.gate.token) : undefined;
    const script = token ? 'r=$1; t=$2; shift 2; exec "$@" 3>>"$r" 4<"$t"' : 'r=$1; shift 1; exec "$@" 3>>"$r"';
    const env: Record<string, string> = { ...launcherEnv(sb.plan), TERM: "xterm-256color" };
    let pty: IPty;
    try {
      pty = spawn("/bin/sh", ["-c", script, "sh", report, ...(token ? [token] : []), launcherPath(), ...launcherArgs(sb.plan, 3, sb.gate)], { name: "xterm-256color", cols: 80, rows: 24, cwd: "/", env });
    } catch (e) {
      rmSync(report, { force: true });
      if (token) rmSync(token, { force: true });
      sb.exited(125, []);
      throw e;
    }
    if (token) void this.removeOnceLaunched(pty.pid, token);
    let resolveExit!: () => void;
    term = { pty, exited: new Promise<void>((r) => (resolveExit = r)) };
    const set = this.bySession.get(live.id) ?? new Set<Term>();
    set.add(term);
    this.bySession.set(live.id, set);
    sb.started(pty.pid);

    // Redacted across chunks, escapes and lines: a secret printed in pieces is held until it is whole (terminal-stream.ts).
    const stream = new TerminalStream(this.deps.filter, this.deps.redactor);
    let unsent = 0;
    let paused = false;
    const send = (out: string) => {
      if (!out || ws.readyState !== ws.OPEN) return;
      const n = Buffer.byteLength(out);
      unsent += n;
      // Called once the socket has handed these bytes to the kernel (or failed to).
      ws.send(out, () => {
        unsent -= n;
        if (paused && unsent <= MAX_UNSENT / 2) {
          paused = false;
          pty.resume();
        }
      });
      if (!paused && unsent > MAX_UNSENT) {
        paused = true;
        pty.pause();
      }
    };
    pty.onData((d) => send(stream.push(d)));
    pty.onExit(({ exitCode }) => {
      set.delete(term!);
      let denied: string[] = [];
      try {
        denied = readFileSync(report, "utf8").split("\n").map(parseReport).flatMap((r) => (r?.event === "denied" ? [`${r.op} ${r.path}: ${r.reason}`] : []));
      } catch {
        // no report: nothing was refused on the record
      }
      rmSync(report, { force: true });
      if (token) rmSync(token, { force: true });
      sb.exited(exitCode, denied);
      send(stream.end());
      if (ws.readyState === ws.OPEN) ws.close(1000, `the shell exited (${exitCode})`);
      resolveExit();
    });
    deliver = (text, binary) => {
      if (!binary) {
        // Text frames are control messages (a resize); keystrokes come as binary frames.
        try {
          const r = TerminalSize.safeParse(JSON.parse(text));
          if (r.success) pty.resize(r.data.cols, r.data.rows);
        } catch {
          // not a control message: ignored
        }
        return;
      }
      pty.write(text);
    };
    for (const m of early) deliver(m.text, m.binary);
    early = undefined;
    ws.on("close", () => void stop());
    // Closed while the sandbox was being set up: its close event has passed, and no one is left to type.
    if (ws.readyState !== ws.OPEN) void stop();
  }

  /** Removes the token file once the launcher has replaced the shell (it has opened fd 4 by then), or after 5 s. */
  private async removeOnceLaunched(pid: number, token: string): Promise<void> {
    const launcher = launcherPath();
    for (let i = 0; i < 500; i++) {
      try {
        if (readlinkSync(`/proc/${pid}/exe`) === launcher) break;
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    rmSync(token, { force: true });
  }

  /** Stops every terminal of one session and waits for them to exit. */
  async stopSession(id: string): Promise<void> {
    const set = this.bySession.get(id);
    if (!set) return;
    await Promise.allSettled([...set].map(kill));
  }

  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.bySession.keys()].map((id) => this.stopSession(id)));
  }
}
