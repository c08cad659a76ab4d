/* The seccomp filter: what no sandboxed process may ask the kernel for, and
 * which filesystem writes are handed to the write guard (guard.c).
 *
 * Denials return an errno rather than killing, so that programs that probe
 * (glibc's clone3, libuv's io_uring) fall back cleanly. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#define NR_FCHMODAT2 452
#define NR_FIRST_UNKNOWN 463 /* setxattrat and later: too new to have been reviewed */
#define X32_BIT 0x40000000

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
                  CLONE_NEWNET | CLONE_NEWTIME)
#define WRITE_OPEN_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)

#define ALLOW SECCOMP_RET_ALLOW
#define ERR(e) (SECCOMP_RET_ERRNO | ((e) & SECCOMP_RET_DATA))
#define NOTIFY SECCOMP_RET_USER_NOTIF
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + (i) * sizeof(__u64))

struct prog {
  struct sock_filter f[512];
  unsigned short n;
};

static void put(struct prog *p, struct sock_filter s) {
  if (p->n >= sizeof p->f / sizeof p->f[0]) die_step("seccomp", "filter too long");
  p->f[p->n++] = s;
}

static void ret(struct prog *p, __u32 action) { put(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action)); }

/* if (nr == n) return action; */
static void on(struct prog *p, int nr, __u32 action) {
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)nr, 0, 1));
  ret(p, action);
}

/* if (nr == n) return (arg & mask) ? hit : miss; */
static void on_arg_bits(struct prog *p, int nr, int arg, __u32 mask, __u32 hit, __u32 miss) {
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)nr, 0, 4));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(arg)));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
  ret(p, hit);
  ret(p, miss);
}

static const int denied_eperm[] = {
    SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd,
    SYS_keyctl, SYS_add_key, SYS_request_key, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_move_mount,
    SYS_open_tree, SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_mount_setattr, SYS_setns,
    SYS_kexec_load, SYS_kexec_file_load, SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_swapon,
    SYS_swapoff, SYS_reboot, SYS_acct, SYS_quotactl, SYS_quotactl_fd, SYS_syslog, SYS_iopl, SYS_ioperm,
    SYS_chroot, SYS_uselib, SYS_vhangup, SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime, SYS_adjtimex,
    SYS_open_by_handle_at, SYS_move_pages, SYS_migrate_pages, SYS_kcmp, SYS_pidfd_getfd, SYS_process_madvise,
    SYS_fanotify_init, SYS_lookup_dcookie, SYS_nfsservctl,
};

static const int denied_enosys[] = {
    SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register, /* io_uring bypasses seccomp per operation */
    SYS_clone3,  /* flags live in memory seccomp cannot read; glibc falls back to clone on ENOSYS */
    SYS_openat2, /* same: its flags are in a struct */
};

/* Path-taking writes the guard performs on the caller's behalf. */
static const int guarded[] = {
    SYS_creat, SYS_mkdir, SYS_mkdirat, SYS_mknod, SYS_mknodat, SYS_symlink, SYS_symlinkat, SYS_link, SYS_linkat,
    SYS_rename, SYS_renameat, SYS_renameat2, SYS_unlink, SYS_unlinkat, SYS_rmdir, SYS_truncate, SYS_chmod,
    SYS_fchmod, SYS_fchmodat, NR_FCHMODAT2, SYS_chown, SYS_fchown, SYS_lchown, SYS_fchownat, SYS_utime,
    SYS_utimes, SYS_futimesat, SYS_utimensat, SYS_setxattr, SYS_lsetxattr, SYS_fsetxattr, SYS_removexattr,
    SYS_lremovexattr, SYS_fremovexattr,
    SYS_connect, SYS_bind, /* a socket path is a path: host services are reached through it */
};

static void build(struct prog *p, const struct plan *pl, int for_guard) {
  int notify = pl->guard && !for_guard;
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
  ret(p, SECCOMP_RET_KILL_PROCESS);
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_BIT, 0, 1));
  ret(p, SECCOMP_RET_KILL_PROCESS);
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, NR_FIRST_UNKNOWN, 0, 1));
  ret(p, ERR(ENOSYS));

  for (size_t i = 0; i < sizeof denied_enosys / sizeof denied_enosys[0]; i++) {
    if (for_guard && denied_enosys[i] == SYS_openat2) continue; /* the guard's own resolution uses it */
    on(p, denied_enosys[i], ERR(ENOSYS));
  }
  for (size_t i = 0; i < sizeof denied_eperm / sizeof denied_eperm[0]; i++) {
    /* The guard reads its callers' memory and nothing else's. */
    if (for_guard && (denied_eperm[i] == SYS_process_vm_readv || denied_eperm[i] == SYS_pidfd_getfd)) continue;
    on(p, denied_eperm[i], ERR(EPERM));
  }
  on_arg_bits(p, SYS_unshare, 0, NS_FLAGS, ERR(EPERM), ALLOW);
  /* A later USER_NOTIF filter takes precedence over ours, and its supervisor
   * could answer CONTINUE: no sandboxed process may install one. */
  on_arg_bits(p, SYS_seccomp, 1, SECCOMP_FILTER_FLAG_NEW_LISTENER, ERR(EPERM), ALLOW);
  on_arg_bits(p, SYS_clone, 0, NS_FLAGS, ERR(EPERM), ALLOW);

  /* ioctl: no faking terminal input, no console or line-discipline tricks on
   * an inherited terminal, and no file attributes that the guard cannot see
   * (immutable/append-only flags, project ids, verity, encryption policies). */
  const __u32 denied_ioctls[] = {
      TIOCSTI, TIOCLINUX, TIOCSETD, TIOCCONS,
      0x40086602 /* FS_IOC_SETFLAGS */, 0x40046602 /* FS_IOC32_SETFLAGS */, 0x401c5820 /* FS_IOC_FSSETXATTR */,
      0x40806685 /* FS_IOC_ENABLE_VERITY */, 0x800c6613 /* FS_IOC_SET_ENCRYPTION_POLICY */,
      0x40087602 /* FS_IOC_SETVERSION */, 0x40047602 /* FS_IOC32_SETVERSION */,
  };
  const unsigned nioctls = sizeof denied_ioctls / sizeof denied_ioctls[0];
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, (unsigned char)(nioctls + 3)));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
  for (unsigned k = 0; k < nioctls; k++)
    put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, denied_ioctls[k], (unsigned char)(nioctls - k), 0));
  ret(p, ALLOW);
  ret(p, ERR(EPERM));

  /* socket: unix stream and seqpacket always; inet TCP only with a network
   * grant (and then only inside the private network namespace, where the only
   * way out is the relay to the egress gate); unix datagrams (SOCK_DGRAM, and
   * SOCK_RAW, which the kernel turns into one), UDP, netlink, packet and the
   * rest never. A unix datagram socket can sendto() any socket path without
   * connect(), which is what the guard checks; UDP would be DNS. */
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 13));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 4));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
  put(p, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 7, 0));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 6, 5));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 1, 0));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 0, 3));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
  put(p, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, pl->allow_inet ? 1 : 0, 0));
  ret(p, ERR(EACCES));
  ret(p, ALLOW);

  /* socketpair: unix stream and seqpacket only, for the same reason. */
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socketpair, 0, 8));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_UNIX, 0, 4));
  put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)));
  put(p, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 2, 0));
  put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 1, 0));
  ret(p, ERR(EACCES));
  ret(p, ALLOW);

  /* Without namespaces (reduced mode) the host's processes and IPC objects
   * share our namespaces: no System V or POSIX message IPC, and no changing
   * another process's limits, priority or scheduling. Signals are scoped by
   * Landlock (ABI 6, which reduced mode requires). */
  if (!pl->use_ns) {
    static const int ipc[] = {SYS_shmget, SYS_shmat, SYS_shmctl, SYS_shmdt, SYS_msgget, SYS_msgsnd, SYS_msgrcv, SYS_msgctl,
                              SYS_semget, SYS_semop, SYS_semctl, SYS_semtimedop, SYS_mq_open, SYS_mq_unlink,
                              SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr};
    for (size_t k = 0; k < sizeof ipc / sizeof ipc[0]; k++) on(p, ipc[k], ERR(EPERM));
    static const int self_only[][2] = {{SYS_prlimit64, 0}, {SYS_setpriority, 1}, {SYS_ioprio_set, 1},
                                       {SYS_sched_setaffinity, 0}, {SYS_sched_setscheduler, 0}, {SYS_sched_setparam, 0},
                                       {SYS_sched_setattr, 0}};
    for (size_t k = 0; k < sizeof self_only / sizeof self_only[0]; k++) {
      put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)self_only[k][0], 0, 4));
      put(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(self_only[k][1])));
      put(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1));
      ret(p, ALLOW);
      ret(p, ERR(EPERM));
    }
  }

  if (notify) {
    on_arg_bits(p, SYS_open, 1, WRITE_OPEN_FLAGS, NOTIFY, ALLOW);
    on_arg_bits(p, SYS_openat, 2, WRITE_OPEN_FLAGS, NOTIFY, ALLOW);
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++) on(p, guarded[i], NOTIFY);
  }
  ret(p, ALLOW);
}

int install_seccomp(const struct plan *pl, int want_listener) {
  struct prog p = {.n = 0};
  build(&p, pl, 0);
  struct sock_fprog fp = {.len = p.n, .filter = p.f};
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
  struct prog p = {.n = 0};
  build(&p, pl, 1);
  struct sock_fprog fp = {.len = p.n, .filter = p.f};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0) die_step("seccomp", "guard filter: %s", strerror(errno));
}
