/**
 * The container engine's seccomp profile, made from the launcher's own table
 * (native/seccomp.c, printed by `vak-launcher --seccomp-table`).
 *
 * Inside the container the launcher still installs its exact per-role filters
 * on the command, the guard and the relay; this outer profile is the wall
 * around all of them, the launcher's setup included. So it refuses what the
 * table refuses to every role, allows what any role may call, and allows the
 * few calls the launcher itself makes before any filter is on (mounts, user
 * namespaces, the guard's listener): LAUNCHER_CALLS, each with why. Argument
 * checks that the engine's libseccomp cannot express faithfully (it compares
 * an argument once per rule, and "allow everything but TIOCSTI" needs more)
 * stay in the launcher's filter, which compiles them exactly. Numbers the
 * table has not reviewed, and names the engine does not know, get ENOSYS (the
 * default action). Pure: the table and the system call names come in.
 */

/** The table as `vak-launcher --seccomp-table` prints it. */
export interface SeccompTable {
  arch: number;
  bad_arch: number;
  first_unknown: number;
  unknown_action: number;
  default_action: number;
  rules: SeccompRule[];
}
export interface SeccompRule {
  nr: number;
  name: string;
  when: number;
  action: number;
  clauses: { when: number; action: number; tests: { arg: number; op: "eq" | "any"; mask: number; value: number }[] }[];
}

/** The OCI/Docker/Podman profile format (moby's `types.Seccomp`, the parts used here). */
export interface EngineProfile {
  defaultAction: "SCMP_ACT_ERRNO";
  defaultErrnoRet: number;
  architectures: string[];
  syscalls: EngineRule[];
}
export interface EngineRule {
  names: string[];
  action: "SCMP_ACT_ALLOW" | "SCMP_ACT_ERRNO";
  errnoRet?: number;
  args?: { index: number; value: number; valueTwo: number; op: "SCMP_CMP_MASKED_EQ" }[];
  comment: string;
}

// The kernel's values (linux/seccomp.h), as the table carries them.
const RET_ACTION = 0xffff0000;
const RET_ERRNO = 0x00050000;
const RET_ALLOW = 0x7fff0000;
const RET_USER_NOTIF = 0x7fc00000;
const AUDIT_ARCH_X86_64 = 0xc000003e;
const ENOSYS = 38;

// The conditions of native/bpf.h.
const W_COMMAND = 1;
const W_GUARD = 2;
const W_INET = 8;

const AF_INET = 2;
const SOCK_DGRAM = 2;

/**
 * What the launcher calls itself, outside every filter of its own, that the
 * table refuses to the command. Reviewed by hand: each is what native/ does
 * before the command's filter exists (or in the guard, whose filter allows it).
 */
export const LAUNCHER_CALLS: Record<string, string> = {
  clone: "the monitor clones init into new user, mount, pid, ipc, uts, net and cgroup namespaces (main.c)",
  unshare: "`vak-launcher --probe` tries user namespaces with it (probe.c)",
  mount: "init mounts the staging and root tmpfs, /proc, devpts, and makes the view private and read-only (view.c)",
  umount2: "init detaches the host root once the view is built (view.c)",
  pivot_root: "init pivots to the staging root and then to the view (view.c)",
  open_tree: "init clones each granted path beneath the old root (view.c)",
  move_mount: "init attaches each clone in the view (view.c)",
  mount_setattr: "init makes each clone nosuid, nodev and read-only (view.c)",
  seccomp: "the payload installs the filter with the guard's user-notification listener (seccomp.c)",
};

/** Socket kinds the launcher itself opens that no sandboxed role's filter allows. */
const LAUNCHER_SOCKETS: { family: number; type: number; why: string }[] = [
  { family: AF_INET, type: SOCK_DGRAM, why: "init brings the loopback interface up with ioctl on an AF_INET datagram socket (view.c)" },
];

const actionOf = (a: number) => (a & RET_ACTION) >>> 0;
const errnoOf = (a: number) => a & 0xffff;
/** A rule or clause holds under conditions `have` when it requires nothing else. */
const holds = (when: number, have: number) => (when & ~have) === 0;

/**
 * The profile for a container whose sandbox has (net) or has not a network
 * grant. `names` maps each x86-64 system call number below the table's
 * first_unknown to its name.
 */
export function containerProfile(table: SeccompTable, names: ReadonlyMap<number, string>, net: boolean): EngineProfile {
  if (table.arch !== AUDIT_ARCH_X86_64) throw new Error(`the launcher's table is for audit architecture ${table.arch}, not x86-64`);
  // What any role of the launcher may call: the command (with the guard) and the guard or relay, with or without a grant.
  const roles = W_COMMAND | W_GUARD | (net ? W_INET : 0);
  // A refusal holds around everything only when every role's filter has it: it requires no role of its own.
  const everyRole = net ? W_INET : 0;
  const byNr = new Map<number, SeccompRule>();
  for (const r of table.rules) byNr.set(r.nr, r);

  const allowed: string[] = [];
  const out: EngineRule[] = [];
  for (const [nr, name] of [...names].sort((a, b) => a[0] - b[0])) {
    if (nr >= table.first_unknown) continue; // not reviewed: ENOSYS by default
    const r = byNr.get(nr);
    if (!r || !holds(r.when, everyRole) || LAUNCHER_CALLS[name] !== undefined) {
      allowed.push(name);
      continue;
    }
    const act = actionOf(r.action);
    if (act === RET_ALLOW || act === RET_USER_NOTIF) {
      // Refused only for some arguments (or handed to the guard): the launcher's own filter decides those.
      allowed.push(name);
      continue;
    }
    if (act !== RET_ERRNO) throw new Error(`${name}: the table's action ${r.action} has no engine equivalent`);
    // A clause the launcher hands to its guard (which refuses with a line saying which grant would do) is let
    // through here as well: refused out here, the call would fail with no line, and the inner filter still decides.
    const allows = r.clauses.filter((c) => (actionOf(c.action) === RET_ALLOW || actionOf(c.action) === RET_USER_NOTIF) && holds(c.when, roles));
    if (allows.length === 0) {
      out.push({ names: [name], action: "SCMP_ACT_ERRNO", errnoRet: errnoOf(r.action), comment: `refused to every role by the launcher's table` });
      continue;
    }
    // Allowed for some arguments only: the engine allows those, and its default (ENOSYS) answers the rest.
    for (const c of allows) {
      if (c.tests.some((t) => t.op !== "eq")) {
        allowed.push(name); // not expressible as one comparison per argument: the launcher's filter holds it
        continue;
      }
      out.push({
        names: [name], action: "SCMP_ACT_ALLOW", comment: "as the launcher's table allows it",
        args: c.tests.map((t) => ({ index: t.arg, value: t.mask >>> 0, valueTwo: (t.value & t.mask) >>> 0, op: "SCMP_CMP_MASKED_EQ" })),
      });
    }
    if (name === "socket")
      for (const s of LAUNCHER_SOCKETS)
        out.push({
          names: [name], action: "SCMP_ACT_ALLOW", comment: s.why,
          args: [{ index: 0, value: 0xffffffff, valueTwo: s.family, op: "SCMP_CMP_MASKED_EQ" }, { index: 1, value: 0xf, valueTwo: s.type, op: "SCMP_CMP_MASKED_EQ" }],
        });
  }
  return {
    defaultAction: "SCMP_ACT_ERRNO",
    defaultErrnoRet: ENOSYS,
    architectures: ["SCMP_ARCH_X86_64"],
    syscalls: [{ names: [...new Set(allowed)], action: "SCMP_ACT_ALLOW", comment: "allowed by the launcher's table to some role, or called by the launcher itself" }, ...out],
  };
}

/**
 * x86-64 system call names from the kernel headers' unistd_64.h text, and the
 * numbers past what Debian 12's headers know up to the table's first_unknown
 * (reviewed against the kernel's syscall_64.tbl).
 */
export function syscallNames(unistdHeader: string): Map<number, string> {
  const m = new Map<number, string>();
  for (const line of unistdHeader.split("\n")) {
    const x = /^#define __NR_([a-z0-9_]+) (\d+)$/.exec(line.trim());
    if (x) m.set(Number(x[2]), x[1]!);
  }
  const newer: [number, string][] = [
    [451, "cachestat"], [452, "fchmodat2"], [453, "map_shadow_stack"], [454, "futex_wake"], [455, "futex_wait"],
    [456, "futex_requeue"], [457, "statmount"], [458, "listmount"], [459, "lsm_get_self_attr"],
    [460, "lsm_set_self_attr"], [461, "lsm_list_modules"], [462, "mseal"],
  ];
  for (const [nr, name] of newer) if (!m.has(nr)) m.set(nr, name);
  return m;
}
