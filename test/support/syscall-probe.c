/* Test helper, run inside the sandbox: makes system calls for real and says
 * what the kernel answered, one line per call read from stdin:
 *   in:  "MODE ARCH NR A0 A1 A2 A3 A4 A5"   (numbers in C notation)
 *   out: "ok" | "errno N" | "killed N"
 *
 * MODE trace: the call runs in a child that first adds a filter of its own
 * answering SECCOMP_RET_TRACE for NR. With no tracer attached, a call that the
 * sandbox's filter allows is then not executed at all and fails with ENOSYS,
 * while the sandbox's ERRNO (stronger than TRACE) and USER_NOTIF (the write
 * guard answers) come through as they are. So any call can be probed with any
 * arguments without running it, and an allowed call is told apart from a
 * denied one by the errno.
 * MODE raw: the call runs as is (for expectations of ENOSYS or a kill, and
 * only with arguments the kernel refuses anyway).
 * ARCH i386 makes the call through int $0x80. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int trace_only(unsigned long nr) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog p = {sizeof f / sizeof f[0], f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p) == 0;
}

static long i386_call(unsigned long nr, const unsigned long *a) {
  long r;
  __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a[0]), "c"(a[1]), "d"(a[2]), "S"(a[3]), "D"(a[4]) : "memory");
  return r;
}

int main(void) {
  /* Read every probe first, then make fd 0 /dev/null: probes with zero
   * arguments name fd 0, and the write guard really performs what it allows. */
  static char input[1 << 20];
  size_t len = fread(input, 1, sizeof input - 1, stdin);
  input[len] = 0;
  int null = open("/dev/null", O_RDONLY);
  if (null < 0 || dup2(null, 0) != 0) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  char *save = NULL;
  for (char *line = strtok_r(input, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char mode[16], arch[16];
    unsigned long nr, a[6];
    if (sscanf(line, "%15s %15s %lx %lx %lx %lx %lx %lx %lx", mode, arch, &nr, &a[0], &a[1],
               &a[2], &a[3], &a[4], &a[5]) != 9) {
      printf("bad input\n");
      continue;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      if (!strcmp(mode, "trace") && !trace_only(nr)) _exit(254);
      long r;
      if (!strcmp(arch, "i386")) {
        r = i386_call(nr, a);
        _exit(r < 0 ? (int)-r : 0);
      }
      r = syscall((long)nr, a[0], a[1], a[2], a[3], a[4], a[5]);
      /* The exit status carries the answer; _exit still works when NR is exit_group (glibc falls back to exit). */
      _exit(r < 0 ? errno : 0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid) return 2;
    if (WIFSIGNALED(st)) printf("killed %d\n", WTERMSIG(st));
    else if (WEXITSTATUS(st) == 0) printf("ok\n");
    else printf("errno %d\n", WEXITSTATUS(st));
  }
  return 0;
}
