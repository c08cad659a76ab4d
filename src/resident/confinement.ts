import { readFileSync, statSync } from "node:fs";
import { cgroupEscape } from "./cgroup-limits.js";

/**
 * The namespaces a run's meaning depends on: paths (mnt), the gate's network
 * and names (net), who the user is (user), processes (pid), the hostname
 * (uts), IPC, and the cgroup view. A client in any other than the host's sees
 * another machine: the host would resolve its paths, grants and cwd in the
 * host's view, not the client's.
 */
const NAMESPACES = ["mnt", "net", "user", "pid", "uts", "ipc", "cgroup"] as const;

/** The capability sets a client must hold all of the host's in: those a command the host runs would have (execFile of a cmd: secret). */
const CAP_SETS = ["CapPrm", "CapEff", "CapBnd"] as const;

/**
 * What /proc/PID/status says of a process's confinement: no_new_privs (Landlock needs it), seccomp, and its
 * capability sets (hex masks).
 */
export function confinementOf(status: string): { noNewPrivs: number; seccomp: number; caps: Record<(typeof CAP_SETS)[number], bigint> } | undefined {
  const nnp = /^NoNewPrivs:\s*(\d+)$/m.exec(status);
  const sec = /^Seccomp:\s*(\d+)$/m.exec(status);
  const caps = CAP_SETS.map((k) => new RegExp(`^${k}:\\s*([0-9a-f]+)$`, "m").exec(status));
  if (!nnp || !sec || caps.some((c) => !c)) return undefined;
  return { noNewPrivs: Number(nnp[1]), seccomp: Number(sec[1]), caps: Object.fromEntries(CAP_SETS.map((k, i) => [k, BigInt(`0x${caps[i]![1]}`)])) as Record<(typeof CAP_SETS)[number], bigint> };
}

/**
 * Why a client is not the host's to serve, from the kernel's word on the peer
 * SO_PEERCRED named (/proc/PID/ns/*, /proc/PID/status), or undefined. A client
 * in other namespaces, or confined where the host is not (no_new_privs, which
 * Landlock and an unprivileged seccomp filter need; a seccomp filter), is
 * inside some sandbox of its own: served by the host, its command would run
 * outside that sandbox, with the host's view and authority. So is a client
 * that holds fewer capabilities than the host (a root process with a reduced
 * bounding set), and one whose cgroups set limits the host's do not
 * (cgroup-limits.ts). It runs
 * in-process instead, under its own confinement, exactly as without a host.
 */
export function confinedClient(pid: number): string | undefined {
  for (const ns of NAMESPACES) {
    let mine: number;
    let theirs: number;
    try {
      mine = statSync(`/proc/self/ns/${ns}`).ino;
      theirs = statSync(`/proc/${pid}/ns/${ns}`).ino;
    } catch (e) {
      return `the client's ${ns} namespace cannot be compared with the host's (${(e as NodeJS.ErrnoException).code ?? "error"})`;
    }
    if (mine !== theirs) return `the client is in a ${ns} namespace other than the host's`;
  }
  let mine: ReturnType<typeof confinementOf>;
  let theirs: ReturnType<typeof confinementOf>;
  try {
    mine = confinementOf(readFileSync("/proc/self/status", "latin1"));
    theirs = confinementOf(readFileSync(`/proc/${pid}/status`, "latin1"));
  } catch (e) {
    return `the client's confinement cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`;
  }
  if (!mine || !theirs) return "the client's confinement cannot be read (/proc/PID/status without NoNewPrivs or Seccomp)";
  if (theirs.noNewPrivs > mine.noNewPrivs) return "the client runs with no_new_privs (as under Landlock or a seccomp sandbox) and the host does not";
  if (theirs.seccomp > mine.seccomp) return "the client runs under a seccomp filter and the host does not";
  // Served, its cmd: secrets' commands (found on its PATH) would run with the host's capabilities, not its own.
  for (const k of CAP_SETS)
    if ((mine.caps[k] & ~theirs.caps[k]) !== 0n) return `the client holds fewer capabilities than the host (${k} ${theirs.caps[k].toString(16)} against ${mine.caps[k].toString(16)})`;
  return cgroupEscape(pid);
}
