/* The write guard, reading the caller: its memory (arguments are copied out
 * once, then only the copy is used), its fds, its thread group and umask, and
 * whether the notification is still live. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "guard.h"

int read_mem(pid_t tid, __u64 addr, void *buf, size_t len) {
  struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
  ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
  return n == (ssize_t)len ? 0 : -EFAULT;
}

/* Reads a NUL-terminated string page by page, so that a string ending just
 * before an unmapped page is still read. */
int read_str(pid_t tid, __u64 addr, char *buf, size_t cap) {
  if (!addr) return -EFAULT;
  size_t got = 0;
  while (got < cap) {
    size_t page_left = 4096 - ((addr + got) & 4095);
    size_t want = page_left < cap - got ? page_left : cap - got;
    if (read_mem(tid, addr + got, buf + got, want) != 0) return -EFAULT;
    char *nul = memchr(buf + got, 0, want);
    if (nul) return 0;
    got += want;
  }
  return -ENAMETOOLONG;
}

pid_t tgid_of(pid_t tid) {
  char p[64], line[256];
  snprintf(p, sizeof p, "/proc/%d/status", tid);
  FILE *f = fopen(p, "re");
  if (!f) return -1;
  pid_t t = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "Tgid:", 5)) { t = (pid_t)atoi(line + 5); break; }
  fclose(f);
  return t;
}

mode_t umask_of(pid_t tid) {
  char p[64], line[256];
  snprintf(p, sizeof p, "/proc/%d/status", tid);
  FILE *f = fopen(p, "re");
  mode_t m = 022;
  if (!f) return m;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "Umask:", 6)) { m = (mode_t)strtol(line + 6, NULL, 8); break; }
  fclose(f);
  return m;
}

/* A duplicate of one of the caller's fds (the same open file). */
int caller_fd(struct call *c, int fd) {
  /* The calling thread's own fd table (it may have unshared it). */
  int pidfd = (int)syscall(SYS_pidfd_open, c->tid, O_EXCL /* PIDFD_THREAD, Linux 6.9 */);
  if (pidfd < 0) pidfd = (int)syscall(SYS_pidfd_open, c->tgid, 0);
  if (pidfd < 0) return -errno;
  int dup = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  int e = errno;
  close(pidfd);
  return dup < 0 ? -e : dup;
}



int still_valid(struct call *c) {
  __u64 id = c->req->id;
  return ioctl(c->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}
