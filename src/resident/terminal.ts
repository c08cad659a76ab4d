import { fstatSync, readFileSync } from "node:fs";
import { isatty } from "node:tty";

/**
 * The client's terminal as the kernel describes it, never as the client says:
 * which of the descriptors it sent are terminals, and whether fd 0 is its
 * controlling terminal with its process group in the foreground
 * (/proc/PID/stat of the peer SO_PEERCRED named). The host is in no session of
 * that terminal, so neither it nor its launcher can ask the terminal (tcgetpgrp
 * answers only a process of the terminal's session).
 */
export interface ClientTerminal {
  /** fds 0, 1, 2: a terminal each? */
  tty: [boolean, boolean, boolean];
  /** fd 0 is the client's controlling terminal and the client's process group is its foreground group. */
  foreground: boolean;
}

/** pgrp, tty_nr and tpgid of a process, from /proc/PID/stat (fields after the command's name, which may hold anything). */
export function statFields(stat: string): { pgrp: number; ttyNr: number; tpgid: number } | undefined {
  const close = stat.lastIndexOf(")");
  if (close < 0) return undefined;
  const f = stat.slice(close + 2).split(" ");
  const [pgrp, ttyNr, tpgid] = [Number(f[2]), Number(f[4]), Number(f[5])];
  if (![pgrp, ttyNr, tpgid].every(Number.isInteger)) return undefined;
  return { pgrp, ttyNr, tpgid };
}

export function clientTerminal(pid: number, fds: readonly number[]): ClientTerminal {
  const tty = [0, 1, 2].map((k) => isatty(fds[k]!)) as [boolean, boolean, boolean];
  if (!tty[0]) return { tty, foreground: false };
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return { tty, foreground: false };
  }
  const s = statFields(stat);
  // Both encode the device as the kernel's new_encode_dev does (libuv's makedev, for majors below 4096).
  const foreground = s !== undefined && s.ttyNr !== 0 && s.ttyNr === fstatSync(fds[0]!).rdev && s.tpgid === s.pgrp && s.pgrp > 0;
  return { tty, foreground };
}

/**
 * Why a command on a terminal goes back to the client's CLI, or undefined when
 * the host serves it. The host serves the interactive case, where the command
 * owns the terminal as in-process (the launcher's pty in between, raw mode,
 * Ctrl-C and Ctrl-Z typed to the command, the window size forwarded). Where the
 * terminal is only written to, or read in a pipeline, or in the background, the
 * user's shell does job control on vak itself (Ctrl-Z stops the whole job,
 * `fg` resumes it): through the host only the client would stop, so those run
 * in-process, exactly as without a host.
 */
export function terminalNotServed(t: ClientTerminal): string | undefined {
  if (!t.tty.some(Boolean)) return undefined;
  if (t.tty[0] && t.tty[1] && t.foreground) return undefined;
  return "a terminal not read interactively in the foreground (the user's shell does job control on vak there)";
}
