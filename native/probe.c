/* `vak-launcher --probe`: what this kernel can enforce, as one JSON object.
 * Every capability is tried for real in a throwaway child, not inferred. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"

/* Runs fn in a child; returns 0 if it exited 0, else the errno it exited with. */
static int try_in_child(int (*fn)(void)) {
  pid_t pid = fork();
  if (pid < 0) return errno;
  if (pid == 0) _exit(fn());
  int st;
  if (waitpid(pid, &st, 0) < 0) return errno;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static int try_userns(void) {
  return unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == 0 ? 0 : errno;
}

static int try_listener(void) {
  struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  struct sock_fprog fp = {1, f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fp) >= 0 ? 0 : errno;
}

static int syscall_exists(long nr) {
  /* Invalid arguments give EBADF/EINVAL/EFAULT; only ENOSYS means absent. */
  errno = 0;
  syscall(nr, -1, 0, 0, 0, 0);
  return errno != ENOSYS;
}

static int read_int(const char *path) {
  FILE *f = fopen(path, "re");
  int v = -1;
  if (f) {
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

int probe_main(void) {
  struct utsname u;
  uname(&u);
  int userns = try_in_child(try_userns);
  int listener = try_in_child(try_listener);
  /* What a default process limit would use, for a regular (not tiny) limit. */
  struct plan p = {.use_ns = userns == 0, .default_max_procs = 1024, .max_memory = 1};
  char kernel[128];
  jstr(kernel, sizeof kernel, u.release);
  printf("{\"kernel\":\"%s\",\"arch\":\"%s\",\"uid\":%u,\"landlock_abi\":%d,"
         "\"user_namespaces\":%s,\"user_namespaces_error\":\"%s\","
         "\"seccomp_listener\":%s,\"seccomp_addfd_send\":%s,\"seccomp_wait_killable\":%s,"
         "\"mount_api\":%s,\"openat2\":%s,\"pidfd_getfd\":%s,\"close_range\":%s,"
         "\"procs_limit\":\"%s\",\"memory_limit\":\"%s\",\"tiocsti_legacy\":%d,\"max_user_namespaces\":%d}\n",
         kernel, u.machine, (unsigned)getuid(), landlock_abi(), userns ? "false" : "true",
         userns ? strerror(userns) : "", listener ? "false" : "true", kernel_at_least(5, 14) ? "true" : "false",
         kernel_at_least(5, 19) ? "true" : "false", syscall_exists(SYS_mount_setattr) ? "true" : "false",
         syscall_exists(SYS_openat2) ? "true" : "false", syscall_exists(SYS_pidfd_getfd) ? "true" : "false",
         syscall_exists(SYS_close_range) ? "true" : "false", procs_mechanism_name(choose_procs(&p)), memory_mechanism(&p),
         read_int("/proc/sys/dev/tty/legacy_tiocsti"), read_int("/proc/sys/user/max_user_namespaces"));
  return 0;
}
