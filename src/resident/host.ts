import { chmodSync, closeSync, constants as fsConstants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, readlinkSync, renameSync, statSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { constants, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { isatty, WriteStream } from "node:tty";
import { execCommand, type ExecContext, type ExecOptions } from "../cli/exec.js";
import { EXIT_REFUSED } from "../cli/exit.js";
import { parseExec } from "../cli/main.js";
import { fmt, Output, type Sink } from "../cli/output.js";
import { Redactor } from "../secrets/redact.js";
import type { Journal } from "../journal/journal.js";
import { openJournal } from "../journal/open.js";
import { isVakError, VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import { vakDirs } from "../policy/state.js";
import { upgradeError } from "../cli/upgraded.js";
import { WalkCache } from "../policy/walk-cache.js";
import { visible } from "../text/visible.js";
import { loadResident, socketFd } from "./native.js";
import type { Spawner } from "../sandbox/launcher.js";
import { clientTerminal, terminalNotServed } from "./terminal.js";
import { confinedClient } from "./confinement.js";
import { Installed } from "./installed.js";
import { closeOrphans, servedBy } from "./orphans.js";
import { decodeRequest, MAX_BODY, sameSettings, type Request } from "./request.js";

/** How long a connected client has to send its whole request. */
const REQUEST_TIMEOUT_MS = 2000;
/** How often the host checks that its socket is still its own (another host may have taken the name). */
const WATCH_MS = 2000;
/** How long a host that stopped serving (Vak was upgraded) keeps answering `fallback` once idle, before it exits. */
const RETIRE_GRACE_MS = 500;
/** The stop signals a client may forward, by number (native/client.c sends "signal N"). */
const FORWARDED = new Map<number, NodeJS.Signals>((["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"] as const).map((s) => [constants.signals[s], s]));
const MAX_CLIENT_LINE = 64;
/** The client's terminal changed size (native/client.c forwards SIGWINCH as "signal 28"). */
const WINCH = constants.signals.SIGWINCH;

/** Where the host listens: Vak's runtime directory, as native/client.c computes it. */
export function hostSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  const d = vakDirs(env);
  return join(d.runtime ?? join(d.state, "run"), "host.sock");
}

/** The runtime directory, made if missing, and refused unless it is this user's alone. */
function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const uid = process.getuid?.() ?? -1;
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o077) !== 0)
    throw new VakError("sandbox-setup", `${dir} must be a directory of uid ${uid} with mode 0700 (it is ${st.isDirectory() ? "a directory" : "not a directory"} of uid ${st.uid}, mode ${(st.mode & 0o777).toString(8)}); the resident host does not start`);
}

/**
 * What the host says back on its connection: a line each (see native/client.c), which the client may print.
 * A reason can carry what the client chose (its cwd, its cgroups' names, an error about its request): it is
 * neutralised, and kept to its one line.
 */
const oneLine = (why: string) => visible(why).replace(/[\n\t]/g, " ");
const reply = {
  exit: (code: number) => `exit ${code}\n`,
  fallback: (why: string) => `fallback ${oneLine(why)}\n`,
  refused: (why: string) => `refused ${oneLine(why)}\n`,
  /** Vak's installation is no longer this host's code: the client runs the command in-process, with the installed code. */
  outdated: (why: string) => `fallback ${oneLine(`Vak's installation changed since this host started (${why}): the installed code runs it`)}\n`,
};

/** A path naming the resolving process's own files: in the host they would be the host's, not the client's. */
const SELF_PATH = /(^|[=,:@\s])\/(proc\/(self|thread-self)(\/|$)|dev\/(fd(\/|$)|std(in|out|err)\b))/;

/** Why a request is served by the client's own CLI instead (never a weaker run: the same code, in-process). */
function notServed(opts: ExecOptions): string | undefined {
  if (opts.fullAccess || opts.mode === "full-access") return "--full-access";
  // --ca-file /dev/stdin, --allow-read /proc/self/fd/3, a secret file: ref of /dev/fd/N: the client's, in-process.
  if (Object.values(opts).some((v) => (Array.isArray(v) ? v : [v]).some((x) => typeof x === "string" && SELF_PATH.test(x))))
    return "a path naming the process's own files (/proc/self, /dev/fd, /dev/stdin): they are the client's";
  if (opts.sandbox !== undefined && opts.sandbox !== "namespaces") return `--sandbox ${opts.sandbox}`;
  if (opts.printPlan || opts.dryRun || opts.explain) return "--dry-run, --print-plan or --explain (they print to stdout)";
  return undefined;
}

export interface ResidentHost {
  path: string;
  server: Server;
  close(): void;
}

/** The journal the host holds open for every run it serves, or why it could not be opened. */
type HostJournal = Promise<Journal | Error>;

/**
 * The resident host: one process per user that runs `vak exec` for the native
 * client with the same code as the in-process CLI (the plan, the launcher, the
 * record). Only a peer of this uid is served (SO_PEERCRED, besides the 0700
 * directory); a peer of another is refused, and that is recorded. It exits
 * after idleMs without sessions, or when its socket is no longer its own. Once
 * Vak's installation is no longer the one it started from (an upgrade, a
 * rebuild), it serves nothing more: each request goes back to its client, which
 * runs it in-process with the installed code, and the host exits once the runs
 * it still serves have ended.
 */
export function startHost(idleMs: number, onExit: () => void): ResidentHost {
  // What the installation is, with what changed since this process started and read its code (a build then).
  const installed = Installed.at(installation().root);
  const addon = loadResident();
  const path = hostSocketPath();
  if (Buffer.byteLength(path) >= 108) throw new VakError("unsupported", `the host's socket path is too long for a unix socket (${path})`);
  privateDir(dirname(path));
  const uid = process.getuid?.() ?? -1;
  let sessions = 0;
  let idle: NodeJS.Timeout | undefined;
  let ino = -1;
  // Opened once, as the host starts (the spooled runs of in-process commands are taken in then): every run the
  // host serves is recorded straight into it, with no spool file and no ingest after.
  const journal: HostJournal = openJournal().then(
    (j) => {
      // Runs a killed host could not end are ended now, as interrupted (in the background: nothing waits for it).
      closeOrphans(j).catch(() => undefined);
      return j;
    },
    (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
  );
  // The held-path walk's directories, for every run this host serves (all of one uid): a tree walked before costs
  // an lstat per directory.
  const walkCache = new WalkCache();
  let down = false;
  /** Why this host serves nothing more (Vak's installation changed since it started), once it does not. */
  let retired: string | undefined;

  /** The socket's name goes, if it is still this host's: the next client starts another host. */
  const unlinkSocket = () => {
    try {
      if (statSync(path).ino === ino) unlinkSync(path);
    } catch {
      // gone already
    }
  };
  /** ...and the pid file, which names the host that serves the socket. */
  const unlinkOwn = () => {
    unlinkSocket();
    try {
      if (readFileSync(pidFile, "utf8") === String(process.pid)) unlinkSync(pidFile);
    } catch {
      // gone already
    }
  };
  const shutdown = () => {
    if (down) return;
    down = true;
    clearInterval(watch);
    if (idle) clearTimeout(idle);
    server.close();
    unlinkOwn();
    // Every commit queued is written before the host exits.
    void journal.then((j) => (j instanceof Error ? undefined : j.close())).catch(() => undefined).finally(onExit);
  };
  /** The journal failed: this host serves nothing more (the next command runs in-process, through the spool). */
  const journalFailed = () => {
    server.close();
    unlinkSocket();
    arm();
  };
  /**
   * This host serves nothing more: its name goes at once (the next client starts a new host), the runs it serves
   * go on undisturbed, and it exits once they have ended. It keeps listening meanwhile, and for RETIRE_GRACE_MS
   * after, to answer `fallback` to a client that connected before the name went (closed, the listening socket
   * would reset it, and that client would say the host went away).
   */
  const retire = (why: string) => {
    if (retired) return;
    retired = why;
    unlinkOwn();
    arm();
  };
  /** Why this host must not serve (Vak's installation is no longer the one it started from), or undefined. */
  const outdated = (): string | undefined => {
    if (!retired) {
      const why = installed.changed();
      if (why) retire(why);
    }
    return retired;
  };
  const arm = () => {
    if (idle) clearTimeout(idle);
    idle = sessions === 0 ? setTimeout(shutdown, retired ? RETIRE_GRACE_MS : idleMs) : undefined;
  };

  const server = createServer({ pauseOnConnect: true }, (socket) => {
    sessions += 1;
    arm();
    socket.on("error", () => undefined);
    socket.once("close", () => {
      sessions -= 1;
      arm();
    });
    let fd: number;
    let who: { pid: number; uid: number; gid: number };
    try {
      fd = socketFd(socket);
      who = addon.peer(fd);
    } catch {
      socket.destroy();
      return;
    }
    if (who.uid !== uid) {
      void refusePeer(journal, path, who, uid);
      finish(socket, reply.refused(`this host serves uid ${uid} only`));
      return;
    }
    addon.receive(fd, MAX_BODY, REQUEST_TIMEOUT_MS, (r) => {
      // Checked before this host's code decides anything of the request (a newer client's may be another format).
      const old = outdated();
      if (old) {
        for (const x of r.fds) closeQuietly(x);
        finish(socket, reply.outdated(old));
        return;
      }
      const d = decodeRequest(r);
      if (!d.ok) {
        for (const x of r.fds) closeQuietly(x);
        finish(socket, reply.refused(`${d.message} (${d.code})`));
        return;
      }
      serve(socket, d.request, who.pid, { journal, journalFailed, outdated, retire }, addon, walkCache).finally(() => {
        for (const x of d.request.fds) closeQuietly(x);
      });
    });
  });

  const temp = `${path}.${process.pid}`;
  const pidFile = join(dirname(path), "host.pid");
  try {
    unlinkSync(temp);
  } catch {
    // none left over
  }
  server.listen(temp, () => {
    // Bound under a name of its own and renamed into place: two hosts started at once never serve one socket together.
    // Only this uid may connect (connect(2) needs write permission on the socket), whatever the umask; the
    // 0700 directory and SO_PEERCRED are the other two locks.
    chmodSync(temp, 0o600);
    renameSync(temp, path);
    ino = statSync(path).ino;
    // Who serves the socket, for `kill` and the tests; nothing trusts it.
    // Written whole and renamed into place: a reader never sees it empty.
    writeFileSync(`${pidFile}.${process.pid}`, String(process.pid), { mode: 0o600 });
    renameSync(`${pidFile}.${process.pid}`, pidFile);
    arm();
  });
  const watch = setInterval(() => {
    let now = -1;
    try {
      now = statSync(path).ino;
    } catch {
      // removed
    }
    if (ino !== -1 && now !== ino && sessions === 0) shutdown();
  }, WATCH_MS);
  return { path, server, close: shutdown };
}

/**
 * The last line on a connection, then the connection closed from this side: a
 * paused socket would not notice its peer hang up, and would keep whatever
 * descriptors were still in flight in it (the client's stdout, say) open.
 */
function finish(socket: Socket, line: string): void {
  socket.write(line, () => socket.destroy());
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // closed already
  }
}

/** A peer of another uid: refused, and on the record (a session of its own in the journal). */
async function refusePeer(journal: HostJournal, path: string, who: { pid: number; uid: number; gid: number }, uid: number): Promise<void> {
  try {
    const j = await journal;
    if (j instanceof Error) return;
    const actor = { component: "host", identity: userInfo().username };
    const s = j.startSession({ kind: "host", title: `refused a connection from uid ${who.uid}`, actor });
    void s.append("decision", actor, 0, { op: "connect", path, allowed: false, reason: `the peer's uid ${who.uid} (pid ${who.pid}, gid ${who.gid}) is not this host's uid ${uid}` }).catch(() => undefined);
    await s.end("refused");
  } catch {
    // The refusal stands even if it cannot be recorded.
  }
}

/** This host, as the records of the runs it serves name it. */
const me = servedBy();

/** What of the host a run it serves needs: its journal, and its two ways to stop serving. */
interface HostState {
  journal: HostJournal;
  /** A commit failed: nothing more is served. */
  journalFailed: () => void;
  /** Why this host's code is no longer the installation's (and it stops serving), or undefined. */
  outdated: () => string | undefined;
  /** This host's code is not the installation's: it serves nothing more. */
  retire: (why: string) => void;
}

/** Checks what the kernel says against what the request says, then runs it as the in-process CLI would. */
async function serve(socket: Socket, req: Request, peerPid: number, host: HostState, spawner: Spawner, walkCache: WalkCache): Promise<void> {
  const { journal, journalFailed } = host;
  const cwdFd = req.fds[3];
  let where: string;
  try {
    if (!fstatSync(cwdFd).isDirectory()) throw new Error("not a directory");
    where = readlinkSync(`/proc/self/fd/${cwdFd}`);
  } catch (e) {
    finish(socket, reply.refused(`the request's cwd descriptor is not a directory (${(e as Error).message}) (request-cwd)`));
    return;
  }
  if (where !== req.cwd) {
    finish(socket, reply.refused(`the request names the cwd ${JSON.stringify(req.cwd).slice(0, 300)} but its directory descriptor is ${JSON.stringify(where).slice(0, 300)} (request-cwd)`));
    return;
  }
  // A client inside a sandbox of its own (other namespaces, no_new_privs, seccomp) is not served: through the
  // host its command would run outside that sandbox. In-process it runs under the client's own confinement.
  const confined = confinedClient(peerPid);
  if (confined) {
    finish(socket, reply.fallback(confined));
    return;
  }
  const differs = sameSettings(process.env, req.env);
  if (differs) {
    finish(socket, reply.fallback(`${differs} differs from the host's`));
    return;
  }
  const parsed = await parseExec(req.argv);
  if (!parsed) {
    finish(socket, reply.fallback("the arguments are for the CLI to explain"));
    return;
  }
  const term = clientTerminal(peerPid, req.fds);
  const why = terminalNotServed(term) ?? notServed(parsed.opts);
  if (why) {
    finish(socket, reply.fallback(why));
    return;
  }
  const j = await journal;
  if (j instanceof Error) {
    // In-process the run records itself through the spool; the journal's trouble is said there, if it is the spool's too.
    finish(socket, reply.fallback(`the host could not open the journal (${j.message.slice(0, 300)})`));
    return;
  }

  // Again as late as can be (parsing and the checks above took turns of the loop): nothing is awaited between this
  // and execCommand. A change after it is one during the run (the catch below says what it did).
  const old = host.outdated();
  if (old) {
    finish(socket, reply.outdated(old));
    return;
  }

  // From here the command may run: the client's death, or the host's, stops it.
  let stop: ((s: NodeJS.Signals) => void) | undefined;
  let resize: (() => void) | undefined;
  /** A change before the launcher was there to tell: told once it is (it blocks SIGWINCH before it reads the size). */
  let resizedEarly = false;
  let gone = false;
  let pending = "";
  socket.on("data", (chunk: Buffer) => {
    pending += chunk.toString("latin1");
    let nl: number;
    while ((nl = pending.indexOf("\n")) >= 0) {
      const m = /^signal (\d{1,3})$/.exec(pending.slice(0, nl));
      pending = pending.slice(nl + 1);
      const sig = m ? FORWARDED.get(Number(m[1])) : undefined;
      if (sig) stop?.(sig);
      else if (m && Number(m[1]) === WINCH) {
        if (resize) resize();
        else resizedEarly = true;
      }
    }
    if (pending.length > MAX_CLIENT_LINE) socket.destroy();
  });
  socket.once("close", () => {
    gone = true;
    stop?.("SIGKILL");
  });
  socket.resume();
  const errFd = req.fds[2];
  const ctx: ExecContext = {
    cwd: req.cwd,
    env: req.env,
    stdio: [req.fds[0], req.fds[1], req.fds[2]],
    errFd,
    err: clientOutput(errFd),
    journal: j,
    // The launcher by posix_spawn: a fork of this process (its heap, its page tables) stops the loop for milliseconds.
    spawner,
    walkCache,
    servedBy: { ...me },
    terminal: term.tty.some(Boolean)
      ? {
          foreground: term.foreground,
          client: peerPid,
          onResize(fn) {
            resize = fn;
            if (resizedEarly) fn();
            return () => {
              resize = undefined;
            };
          },
        }
      : undefined,
    onStop(fn) {
      stop = fn;
      if (gone) fn("SIGKILL");
      return () => {
        stop = undefined;
      };
    },
  };
  let code: number;
  try {
    code = await execCommand(parsed.command, parsed.opts, ctx);
  } catch (caught) {
    // Vak upgraded or rebuilt while this ran: a chunk of the host's bundle it asked for is gone, or anything else
    // of old code against a new installation. Said as that; this host serves nothing more.
    const changed = host.outdated();
    const e = upgradeError(caught, changed) ?? caught;
    if (isVakError(e) && e.code === "upgraded" && !changed) host.retire("a file of its code is gone");
    ctx.err.line(fmt`vak: ${isVakError(e) ? e.message : `internal error: ${(e as Error).message}`}`);
    code = EXIT_REFUSED;
    // A journal that failed a commit fails every one after: nothing more is served here (fail closed).
    if (isVakError(e) && e.code === "journal") journalFailed();
  }
  if (!gone) finish(socket, reply.exit(code));
}

/**
 * How wide the terminal on fd is, read now (the window may have changed). Asked of a descriptor of our own for
 * the same terminal (O_NOCTTY: the host takes no controlling terminal), which the TTY handle may replace and
 * closes; the client's stays as it is.
 */
function columnsOf(fd: number): number | undefined {
  let mine: number;
  try {
    mine = openSync(`/proc/self/fd/${fd}`, fsConstants.O_WRONLY | fsConstants.O_NOCTTY | fsConstants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  let stream: WriteStream | undefined;
  try {
    stream = new WriteStream(mine);
    return stream.columns || undefined;
  } catch {
    if (!stream) closeSync(mine);
    return undefined;
  } finally {
    stream?.destroy();
  }
}

/**
 * Vak's own lines for one client, on the stderr descriptor it sent: the CLI's
 * output module (src/cli/output.ts), so every value is redacted and
 * neutralised exactly as in-process. Written synchronously (a line at a time,
 * as process.stderr does on a file or a terminal); a client whose stderr is
 * gone gets nothing more.
 */
export function clientOutput(fd: number): Output {
  let destroyed = false;
  const tty = isatty(fd);
  const sink: Sink = {
    get destroyed() {
      return destroyed;
    },
    isTTY: tty,
    // The client's terminal's width, as process.stderr.columns gives in-process: without it, hostile text long
    // enough to wrap was not broken before the terminal wrapped it, and its rest could start a row at column 0.
    get columns() {
      return tty ? columnsOf(fd) : undefined;
    },
    write(chunk) {
      try {
        if (typeof chunk === "string") writeSync(fd, chunk);
        else writeSync(fd, chunk);
      } catch {
        destroyed = true;
      }
      return true;
    },
  };
  return new Output(sink, new Redactor());
}
