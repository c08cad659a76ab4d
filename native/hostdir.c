/* `--host-dir DIR`: how the launcher talks to vak when vak could not start it
 * itself (the container backend: the engine starts the launcher inside a
 * container, and no file descriptor of vak's can be handed over). DIR is a
 * private directory of vak's, bound into the container at the same path:
 *
 *   report    the report (JSON lines), opened for appending
 *   token     the worker's egress-gate token, read and removed at once
 *   env       the command's whole environment, NUL-separated NAME=VALUE, read
 *             and removed at once: never an engine's argv or its on-disk
 *             container config, and nothing the engine adds (HOSTNAME,
 *             container=...) reaches the command
 *   lifeline  a unix socket vak listens on; when vak's end closes (vak exited,
 *             or was killed with -9), the launcher's monitor is killed, so init
 *             and everything in the sandbox die with it
 *
 * Every name is opened beneath DIR without following a link. The command never
 * sees DIR: it is not in the plan's view. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher.h"

#define MAX_ENV_BYTES (1 << 20)
#define MAX_ENV_VARS 4096

static int dir_fd = -1;

static int open_beneath(const char *name, int flags) {
  struct open_how how = {.flags = (unsigned long long)(flags | O_NOFOLLOW | O_CLOEXEC), .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
  return (int)syscall(SYS_openat2, dir_fd, name, &how, sizeof how);
}

void hostdir_open(struct plan *p, const char *dir) {
  dir_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) die_step("args", "--host-dir %s: %s", dir, strerror(errno));
  p->host_dir = dir;
  int fd = open_beneath("report", O_WRONLY | O_APPEND);
  if (fd < 0) die_step("args", "--host-dir: report: %s", strerror(errno));
  p->report_fd = fd;
  report_init(fd);
}

/* Reads a whole small file beneath DIR into buf (NUL-terminated) and removes it. */
static ssize_t take(const char *name, char *buf, size_t cap) {
  int fd = open_beneath(name, O_RDONLY);
  if (fd < 0) return -1;
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die_step("args", "--host-dir: read %s: %s", name, strerror(errno));
    if (n == 0) break;
    got += (size_t)n;
    if (got == cap - 1) die_step("args", "--host-dir: %s is larger than %zu bytes", name, cap - 1);
  }
  close(fd);
  if (unlinkat(dir_fd, name, 0) != 0) die_step("args", "--host-dir: remove %s: %s", name, strerror(errno));
  buf[got] = 0;
  return (ssize_t)got;
}

void hostdir_token(struct plan *p) {
  char buf[sizeof p->net_token];
  ssize_t n = take("token", buf, sizeof buf);
  if (n < 16) die_step("args", "--host-dir: no egress-gate token");
  for (ssize_t k = 0; k < n; k++)
    if (!strchr("0123456789abcdef", buf[k])) die_step("args", "--host-dir: malformed token");
  memcpy(p->net_token, buf, (size_t)n + 1);
}

/* The command's environment is exactly the file's: the engine's own variables are dropped. */
void hostdir_env(void) {
  static char buf[MAX_ENV_BYTES + 1];
  ssize_t n = take("env", buf, sizeof buf);
  if (n < 0) die_step("args", "--host-dir: env: %s", strerror(errno));
  if (n > 0 && buf[n - 1] != 0) die_step("args", "--host-dir: env does not end with a NUL");
  if (clearenv() != 0) die_step("args", "clearenv failed");
  int count = 0;
  for (char *e = buf; e < buf + n; e += strlen(e) + 1) {
    char *eq = strchr(e, '=');
    if (!eq || eq == e) die_step("args", "--host-dir: env: an entry without NAME=");
    if (++count > MAX_ENV_VARS) die_step("args", "--host-dir: env: more than %d variables", MAX_ENV_VARS);
    if (putenv(e) != 0) die_step("args", "putenv: %s", strerror(errno));
  }
}

/* Connects to vak's lifeline and forks a watcher that kills the monitor (this
 * process) when it closes. The watcher dies with the monitor, holds nothing
 * else, and is not in the sandbox. */
void hostdir_lifeline(void) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) die_step("lifeline", "socket: %s", strerror(errno));
  /* connect() takes a path: name the socket through the directory fd. */
  int lf = open_beneath("lifeline", O_PATH);
  if (lf < 0) die_step("lifeline", "open: %s", strerror(errno));
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d", lf);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) die_step("lifeline", "connect: %s (vak is gone)", strerror(errno));
  close(lf);
  pid_t monitor = getpid();
  pid_t w = fork();
  if (w < 0) die_step("lifeline", "fork: %s", strerror(errno));
  if (w > 0) {
    close(s);
    return;
  }
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != monitor) _exit(0);
  for (int fd = 0; fd < 3; fd++) if (fd != s) close(fd);
  if (s > 3) syscall(SYS_close_range, 3, s - 1, 0);
  syscall(SYS_close_range, s + 1, ~0U, 0);
  char byte;
  for (;;) {
    ssize_t n = read(s, &byte, 1);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    break;
  }
  kill(monitor, SIGKILL);
  _exit(0);
}
