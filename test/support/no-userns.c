/* Test helper: runs a command where creating a user namespace fails with EPERM,
 * the way it does on kernels or distributions that forbid it. Used to prove that
 * Vak refuses, or runs its reduced mode, instead of quietly running weaker. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DENY_IF_NEWUSER(nr)                                                  \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 3),                             \
  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])), \
  BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),                 \
  BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1)

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      DENY_IF_NEWUSER(SYS_unshare),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      DENY_IF_NEWUSER(SYS_clone),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 38 /* ENOSYS */),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
    perror("no-userns: seccomp");
    return 2;
  }
  execvp(argv[1], argv + 1);
  perror("no-userns: exec");
  return 127;
}
