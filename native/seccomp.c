/* The seccomp filter: what no sandboxed process may ask the kernel for, and
 * which filesystem writes are handed to the write guard (guard.c).
 *
 * The table below is the whole policy, one rule per system call; bpf.c
 * compiles it for the plan at hand. To deny a system call, add a rule here
 * (and a probe expectation in test/attacks/seccomp.test.ts if it needs
 * particular arguments): test/sandbox/seccomp-table.test.ts checks every
 * compiled variant against the table, and test/attacks/seccomp.test.ts makes
 * each call for real inside the sandbox.
 *
 * Denials return an errno rather than killing, so that programs that probe
 * (glibc's clone3, libuv's io_uring) fall back cleanly. Arguments are
 * compared on their low 32 bits, which is what the kernel reads for every
 * int-sized argument tested here (flags, domains, ioctl requests, pids). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bpf.h"
#include "launcher.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#define NR_FIRST_UNKNOWN 463 /* setxattrat and later: too new to have been reviewed */

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                  CLONE_NEWNET | CLONE_NEWTIME)
#define WRITE_OPEN_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)

#define ALLOW SECCOMP_RET_ALLOW
#define ERR(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))
#define NOTIFY SECCOMP_RET_USER_NOTIF

/* Tests on an argument's low 32 bits. */
#define EQ(a, v) {(a), SC_EQ, 0xffffffffu, (uint32_t)(v)}
#define MASKED(a, m, v) {(a), SC_EQ, (uint32_t)(m), (uint32_t)(v)}
#define ANY(a, m) {(a), SC_ANY, (uint32_t)(m), 0}

/* Counts are taken by the compiler, never written by hand. */
#define CLAUSE(w, act, ...) \
  {.when = (w), .action = (act), .test = {__VA_ARGS__}, .ntests = sizeof((struct sc_test[]){__VA_ARGS__}) / sizeof(struct sc_test)}
#define CLAUSES(...) .clause = {__VA_ARGS__}, .nclauses = sizeof((struct sc_clause[]){__VA_ARGS__}) / sizeof(struct sc_clause)
#define RULE(call, w, act, why_) {.nr = SYS_##call, .name = #call, .when = (w), .action = (act), .why = (why_)}
#define CHECKED(call, w, act, why_, ...) \
  {.nr = SYS_##call, .name = #call, .when = (w), .action = (act), .why = (why_), CLAUSES(__VA_ARGS__)}

#define EPERM_ALL(call, why_) RULE(call, W_ALL, ERR(EPERM), why_)
#define GUARDED(call, why_) RULE(call, W_COMMAND | W_GUARD, NOTIFY, why_)
/* --explain: every other open (flags & 0 == 0 always holds) goes to the guard, which lets it go on. */
#define EXPLAINED(flags_arg) CLAUSE(W_EXPLAIN, NOTIFY, MASKED(flags_arg, 0, 0))
/* A --deny-read path in the view: every other open, and execve, go to the guard, which refuses a read of it by
 * name (guard_noread.c) and lets the rest go on; no stat, so that a command's fstat()s cost nothing. */
#define NOREAD(arg) CLAUSE(W_NOREAD, NOTIFY, MASKED(arg, 0, 0))
#define LOOKUP(call) RULE(call, W_COMMAND | W_GUARD | W_EXPLAIN, NOTIFY, "--explain: a lookup, reported when it misses")
#define REDUCED_IPC(call) RULE(call, W_REDUCED, ERR(EPERM), "reduced mode: the host's IPC objects")
/* Reduced mode: only the caller itself (0) may be named. */
#define SELF_ONLY(call, arg) \
  CHECKED(call, W_REDUCED, ERR(EPERM), "reduced mode: another process's limits or scheduling", CLAUSE(W_ALL, ALLOW, EQ(arg, 0)))

static const struct sc_rule RULES[] = {
    RULE(io_uring_setup, W_ALL, ERR(ENOSYS), "io_uring bypasses seccomp per operation; libuv falls back"),
    RULE(io_uring_enter, W_ALL, ERR(ENOSYS), "io_uring"),
    RULE(io_uring_register, W_ALL, ERR(ENOSYS), "io_uring"),
    RULE(clone3, W_ALL, ERR(ENOSYS), "its flags live in memory seccomp cannot read; glibc falls back to clone"),
    RULE(openat2, W_COMMAND, ERR(ENOSYS), "its flags are in a struct; libc falls back to openat (the guard resolves with it)"),

    RULE(ptrace, W_ALL, ERR(EPERM), "reads and writes other processes"),
    RULE(process_vm_readv, W_COMMAND, ERR(EPERM), "reads other processes (the guard reads its callers)"),
    RULE(process_vm_writev, W_ALL, ERR(EPERM), "writes other processes"),
    EPERM_ALL(bpf, "kernel programs"),
    EPERM_ALL(perf_event_open, "kernel and process observation"),
    EPERM_ALL(userfaultfd, "stalls the kernel mid-copy (race amplifier)"),
    EPERM_ALL(keyctl, "kernel keyrings"),
    EPERM_ALL(add_key, "kernel keyrings"),
    EPERM_ALL(request_key, "kernel keyrings"),
    EPERM_ALL(mount, "mounts"),
    EPERM_ALL(umount2, "mounts"),
    EPERM_ALL(pivot_root, "mounts"),
    EPERM_ALL(move_mount, "mounts"),
    EPERM_ALL(open_tree, "mounts"),
    EPERM_ALL(fsopen, "mounts"),
    EPERM_ALL(fsconfig, "mounts"),
    EPERM_ALL(fsmount, "mounts"),
    EPERM_ALL(fspick, "mounts"),
    EPERM_ALL(mount_setattr, "mounts"),
    EPERM_ALL(setns, "namespaces"),
    EPERM_ALL(kexec_load, "kernel replacement"),
    EPERM_ALL(kexec_file_load, "kernel replacement"),
    EPERM_ALL(init_module, "kernel modules"),
    EPERM_ALL(finit_module, "kernel modules"),
    EPERM_ALL(delete_module, "kernel modules"),
    EPERM_ALL(swapon, "swap"),
    EPERM_ALL(swapoff, "swap"),
    EPERM_ALL(reboot, "the machine"),
    EPERM_ALL(acct, "process accounting"),
    EPERM_ALL(quotactl, "quotas"),
    EPERM_ALL(quotactl_fd, "quotas"),
    EPERM_ALL(syslog, "the kernel log"),
    EPERM_ALL(iopl, "hardware ports"),
    EPERM_ALL(ioperm, "hardware ports"),
    EPERM_ALL(chroot, "a root of its own"),
    EPERM_ALL(uselib, "obsolete loader"),
    EPERM_ALL(vhangup, "hangs up the terminal"),
    EPERM_ALL(settimeofday, "the clock"),
    EPERM_ALL(clock_settime, "the clock"),
    EPERM_ALL(clock_adjtime, "the clock"),
    EPERM_ALL(adjtimex, "the clock"),
    EPERM_ALL(open_by_handle_at, "opens files by handle, around every path check"),
    EPERM_ALL(move_pages, "other processes' memory"),
    EPERM_ALL(migrate_pages, "other processes' memory"),
    EPERM_ALL(kcmp, "other processes' kernel objects"),
    RULE(pidfd_getfd, W_COMMAND, ERR(EPERM), "takes another process's fds (the guard takes its callers')"),
    EPERM_ALL(process_madvise, "other processes' memory"),
    EPERM_ALL(fanotify_init, "file system observation"),
    EPERM_ALL(lookup_dcookie, "kernel profiling"),
    EPERM_ALL(nfsservctl, "obsolete"),

    /* Refused; where the guard runs, it refuses them itself, to say so (guard_refusals.c). */
    CHECKED(unshare, W_ALL, ALLOW, "no namespace of its own",
            CLAUSE(W_COMMAND | W_GUARD, NOTIFY, ANY(0, NS_FLAGS)), CLAUSE(W_ALL, ERR(EPERM), ANY(0, NS_FLAGS))),
    /* A later USER_NOTIF filter takes precedence over ours, and its supervisor
     * could answer CONTINUE: no sandboxed process may install one. */
    CHECKED(seccomp, W_ALL, ALLOW, "no listener that could answer CONTINUE for the guard",
            CLAUSE(W_ALL, ERR(EPERM), ANY(1, SECCOMP_FILTER_FLAG_NEW_LISTENER))),
    CHECKED(clone, W_ALL, ALLOW, "no namespace of its own",
            CLAUSE(W_COMMAND | W_GUARD, NOTIFY, ANY(0, NS_FLAGS)), CLAUSE(W_ALL, ERR(EPERM), ANY(0, NS_FLAGS))),
    /* No faking terminal input, no console or line-discipline tricks on a
     * terminal, and no file attributes that the guard cannot see (immutable
     * and append-only flags, project ids, verity, encryption policies). */
    CHECKED(ioctl, W_ALL, ALLOW, "terminal input injection and unguarded file attributes",
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, TIOCSTI)), CLAUSE(W_ALL, ERR(EPERM), EQ(1, TIOCLINUX)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, TIOCSETD)), CLAUSE(W_ALL, ERR(EPERM), EQ(1, TIOCCONS)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x40086602 /* FS_IOC_SETFLAGS */)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x40046602 /* FS_IOC32_SETFLAGS */)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x401c5820 /* FS_IOC_FSSETXATTR */)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x40806685 /* FS_IOC_ENABLE_VERITY */)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x800c6613 /* FS_IOC_SET_ENCRYPTION_POLICY */)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x40087602 /* FS_IOC_SETVERSION */)),
            CLAUSE(W_ALL, ERR(EPERM), EQ(1, 0x40047602 /* FS_IOC32_SETVERSION */))),
    /* Unix stream and seqpacket always; inet TCP only with a network grant
     * (and then only inside the private network namespace, where the only way
     * out is the relay to the egress gate); UDP only inside that namespace,
     * which has nothing but loopback (no route, so a datagram cannot leave;
     * the sandbox's own resolver on 127.0.0.1:53 answers every name at once);
     * unix datagrams (SOCK_DGRAM, and SOCK_RAW, which the kernel turns into
     * one), netlink, packet and the rest never. A unix datagram socket can
     * sendto() any socket path without connect(), which is what the guard
     * checks. Reduced mode has no namespace of its own: no UDP there. */
    CHECKED(socket, W_ALL, ERR(EACCES), "only unix streams, TCP with a network grant, UDP inside the private network namespace",
            CLAUSE(W_ALL, ALLOW, EQ(0, AF_UNIX), MASKED(1, 0xf, SOCK_STREAM)),
            CLAUSE(W_ALL, ALLOW, EQ(0, AF_UNIX), MASKED(1, 0xf, SOCK_SEQPACKET)),
            CLAUSE(W_REDUCED, ERR(EACCES), EQ(0, AF_INET), MASKED(1, 0xf, SOCK_DGRAM)),
            CLAUSE(W_REDUCED, ERR(EACCES), EQ(0, AF_INET6), MASKED(1, 0xf, SOCK_DGRAM)),
            CLAUSE(W_ALL, ALLOW, EQ(0, AF_INET), MASKED(1, 0xf, SOCK_DGRAM)),
            CLAUSE(W_ALL, ALLOW, EQ(0, AF_INET6), MASKED(1, 0xf, SOCK_DGRAM)),
            CLAUSE(W_INET, ALLOW, EQ(0, AF_INET), MASKED(1, 0xf, SOCK_STREAM)),
            CLAUSE(W_INET, ALLOW, EQ(0, AF_INET6), MASKED(1, 0xf, SOCK_STREAM)),
            /* Without a grant: refused by the guard, which says so (guard_refusals.c). */
            CLAUSE(W_COMMAND | W_GUARD, NOTIFY, EQ(0, AF_INET), MASKED(1, 0xf, SOCK_STREAM)),
            CLAUSE(W_COMMAND | W_GUARD, NOTIFY, EQ(0, AF_INET6), MASKED(1, 0xf, SOCK_STREAM))),
    CHECKED(socketpair, W_ALL, ERR(EACCES), "only unix streams (Node's child processes and IPC need them)",
            CLAUSE(W_ALL, ALLOW, EQ(0, AF_UNIX), MASKED(1, 0xf, SOCK_STREAM)),
            CLAUSE(W_ALL, ALLOW, EQ(0, AF_UNIX), MASKED(1, 0xf, SOCK_SEQPACKET))),

    /* Without namespaces (reduced mode) the host's processes and IPC objects
     * share ours: no System V or POSIX message IPC, and no changing another
     * process's limits, priority or scheduling. Signals are scoped by
     * Landlock (ABI 6, which reduced mode requires). */
    REDUCED_IPC(shmget), REDUCED_IPC(shmat), REDUCED_IPC(shmctl), REDUCED_IPC(shmdt), REDUCED_IPC(msgget),
    REDUCED_IPC(msgsnd), REDUCED_IPC(msgrcv), REDUCED_IPC(msgctl), REDUCED_IPC(semget), REDUCED_IPC(semop),
    REDUCED_IPC(semctl), REDUCED_IPC(semtimedop), REDUCED_IPC(mq_open), REDUCED_IPC(mq_unlink),
    REDUCED_IPC(mq_timedsend), REDUCED_IPC(mq_timedreceive), REDUCED_IPC(mq_notify), REDUCED_IPC(mq_getsetattr),
    SELF_ONLY(prlimit64, 0), SELF_ONLY(sched_setaffinity, 0),
    /* Who 0 is the caller, or its process group (its own: the command leads a
     * session of its own), never "every process of this user". */
    CHECKED(setpriority, W_REDUCED, ERR(EPERM), "reduced mode: another process's priority",
            CLAUSE(W_ALL, ALLOW, EQ(0, 0 /* PRIO_PROCESS */), EQ(1, 0)), CLAUSE(W_ALL, ALLOW, EQ(0, 1 /* PRIO_PGRP */), EQ(1, 0))),
    CHECKED(ioprio_set, W_REDUCED, ERR(EPERM), "reduced mode: another process's I/O priority",
            CLAUSE(W_ALL, ALLOW, EQ(0, 1 /* IOPRIO_WHO_PROCESS */), EQ(1, 0)), CLAUSE(W_ALL, ALLOW, EQ(0, 2 /* IOPRIO_WHO_PGRP */), EQ(1, 0))),
    SELF_ONLY(sched_setscheduler, 0), SELF_ONLY(sched_setparam, 0), SELF_ONLY(sched_setattr, 0),

    /* Path-taking writes the guard performs on the caller's behalf; a socket
     * path is a path too: host services are reached through it. */
    CHECKED(open, W_COMMAND | W_GUARD, ALLOW, "opens for writing", CLAUSE(W_ALL, NOTIFY, ANY(1, WRITE_OPEN_FLAGS)), EXPLAINED(1), NOREAD(1)),
    CHECKED(openat, W_COMMAND | W_GUARD, ALLOW, "opens for writing", CLAUSE(W_ALL, NOTIFY, ANY(2, WRITE_OPEN_FLAGS)), EXPLAINED(2), NOREAD(2)),
    /* --explain only: lookups, seen by the guard and let go on (CONTINUE: the kernel does
     * what it would have done without the filter; nothing the guard decides rests on them). */
    LOOKUP(stat), LOOKUP(lstat), LOOKUP(newfstatat), LOOKUP(statx), LOOKUP(access), LOOKUP(faccessat), LOOKUP(faccessat2),
    CHECKED(execve, W_COMMAND | W_GUARD, ALLOW, "--explain or a --deny-read path in the view: seen by the guard, which lets it go on unless it is denied",
            EXPLAINED(0), NOREAD(0)),
    LOOKUP(readlink), LOOKUP(readlinkat),
    GUARDED(creat, "creates"), GUARDED(mkdir, "creates"), GUARDED(mkdirat, "creates"), GUARDED(mknod, "creates"),
    GUARDED(mknodat, "creates"), GUARDED(symlink, "creates"), GUARDED(symlinkat, "creates"), GUARDED(link, "creates"),
    GUARDED(linkat, "creates"), GUARDED(rename, "moves"), GUARDED(renameat, "moves"), GUARDED(renameat2, "moves"),
    GUARDED(unlink, "removes"), GUARDED(unlinkat, "removes"), GUARDED(rmdir, "removes"), GUARDED(truncate, "writes"),
    GUARDED(chmod, "metadata"), GUARDED(fchmod, "metadata"), GUARDED(fchmodat, "metadata"),
    GUARDED(fchmodat2, "metadata"), GUARDED(chown, "metadata"), GUARDED(fchown, "metadata"),
    GUARDED(lchown, "metadata"), GUARDED(fchownat, "metadata"), GUARDED(utime, "metadata"),
    GUARDED(utimes, "metadata"), GUARDED(futimesat, "metadata"), GUARDED(utimensat, "metadata"),
    GUARDED(setxattr, "metadata"), GUARDED(lsetxattr, "metadata"), GUARDED(fsetxattr, "metadata"),
    GUARDED(removexattr, "metadata"), GUARDED(lremovexattr, "metadata"), GUARDED(fremovexattr, "metadata"),
    GUARDED(connect, "a socket path"), GUARDED(bind, "a socket path"),
};

static const struct sc_filter FILTER = {
    .arch = AUDIT_ARCH_X86_64,
    .bad_arch = SECCOMP_RET_KILL_PROCESS, /* i386 and x32 calls are another numbering entirely */
    .first_unknown = NR_FIRST_UNKNOWN,
    .unknown_action = ERR(ENOSYS),
    .default_action = ALLOW,
    .rules = RULES,
    .nrules = sizeof RULES / sizeof RULES[0],
};

const struct sc_filter *seccomp_table(void) { return &FILTER; }

unsigned seccomp_conditions(const struct plan *p, int for_guard) {
  unsigned w = (p->use_ns ? 0 : W_REDUCED) | (p->allow_inet ? W_INET : 0);
  if (!for_guard) w |= W_COMMAND | (p->guard ? W_GUARD : 0) | (p->guard && p->explain ? W_EXPLAIN : 0) | (p->guard && p->read_denied ? W_NOREAD : 0);
  return w;
}

static struct sock_fprog program(const struct plan *p, int for_guard, struct sock_filter *buf) {
  const char *err = "";
  int n = sc_compile(&FILTER, seccomp_conditions(p, for_guard), buf, SC_MAX_INSNS, &err);
  if (n < 0) die_step("seccomp", "compile the filter: %s", err);
  return (struct sock_fprog){.len = (unsigned short)n, .filter = buf};
}

int install_seccomp(const struct plan *pl, int want_listener) {
  struct sock_filter buf[SC_MAX_INSNS];
  struct sock_fprog fp = program(pl, 0, buf);
  if (!want_listener) {
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) die_step("seccomp", "%s", strerror(errno));
    return -1;
  }
  long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                    SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, &fp);
  if (fd < 0 && errno == EINVAL) /* before Linux 5.19 */
    fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp);
  if (fd < 0) die_step("seccomp", "install filter with listener: %s", strerror(errno));
  return (int)fd;
}

void install_guard_seccomp(const struct plan *pl) {
  struct sock_filter buf[SC_MAX_INSNS];
  struct sock_fprog fp = program(pl, 1, buf);
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) die_step("seccomp", "guard filter: %s", strerror(errno));
}

/* `vak-launcher --seccomp-table`: the table as one JSON object, for the
 * container backend, which makes the engine's outer profile from it
 * (src/sandbox/container-seccomp.ts). Actions are the kernel's values. */
int seccomp_table_main(void) {
  const struct sc_filter *f = &FILTER;
  printf("{\"arch\":%u,\"bad_arch\":%u,\"first_unknown\":%d,\"unknown_action\":%u,\"default_action\":%u,\"rules\":[",
         f->arch, f->bad_arch, f->first_unknown, f->unknown_action, f->default_action);
  for (unsigned i = 0; i < f->nrules; i++) {
    const struct sc_rule *r = &f->rules[i];
    printf("%s{\"nr\":%d,\"name\":\"%s\",\"when\":%u,\"action\":%u,\"clauses\":[", i ? "," : "", r->nr, r->name, r->when, r->action);
    for (unsigned k = 0; k < r->nclauses; k++) {
      const struct sc_clause *c = &r->clause[k];
      printf("%s{\"when\":%u,\"action\":%u,\"tests\":[", k ? "," : "", c->when, c->action);
      for (unsigned t = 0; t < c->ntests; t++)
        printf("%s{\"arg\":%u,\"op\":\"%s\",\"mask\":%u,\"value\":%u}", t ? "," : "", c->test[t].arg,
               c->test[t].op == SC_ANY ? "any" : "eq", c->test[t].mask, c->test[t].value);
      printf("]}");
    }
    printf("]}");
  }
  printf("]}\n");
  return 0;
}
