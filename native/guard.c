/* The write guard: performs filesystem writes on behalf of sandboxed processes,
 * after checking the path that will actually be touched.
 *
 * Why: protected paths must stay read-only at any depth inside a writable
 * workspace, including paths that do not exist yet. Which paths, and why each
 * one, is written in one place: src/policy/protected.ts (PROTECTED_PATHS),
 * which decide() passes here as --protect-tree/--protect-file rules; the guard
 * holds no list of its own, only the matcher and the git rules no pattern can
 * express (guard_rules.c). Mounts cannot mask a path that does not exist without leaving
 * a file on the host, and Landlock cannot carve a name out of a writable tree.
 *
 * How: the seccomp filter (seccomp.c) hands every path-taking write (opens for
 * writing, mkdir, rename, link, unlink, chmod, chown, utimes, xattrs,
 * truncate, connect and bind on a path) to this process. It copies the
 * arguments out of the caller once (guard_caller.c), resolves the path itself
 * one component at a time (guard_path.c), checks the resolved path against the
 * grants and the protection rules (guard_rules.c), and then performs the
 * operation itself (guard_open.c, guard_files.c, guard_sockets.c), relative to
 * directory fds it holds, without following links on the last component. The
 * result (or a new fd, installed atomically) goes back to the caller. It never
 * answers CONTINUE to a write, so rewriting the caller's memory after the check
 * changes nothing (only --explain's lookups continue: guard_explain.c).
 *
 * The guard runs inside the same Landlock domain and mount view as the sandbox,
 * with the same uid: it cannot do anything the sandbox could not do itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

#define MAX_DENIAL_LINES 200

static unsigned denials;

void log_denial(struct call *c, const char *path, const char *why) {
  if (++denials > MAX_DENIAL_LINES) return;
  char jp[1200], jw[600], line[2048];
  jstr(jp, sizeof jp, path);
  jstr(jw, sizeof jw, why);
  snprintf(line, sizeof line, "{\"event\":\"denied\",\"op\":\"%s\",\"path\":\"%s\",\"reason\":\"%s\",\"pid\":%d%s}", c->op, jp,
           jw, c->tgid, denials == MAX_DENIAL_LINES ? ",\"more\":true" : "");
  report_line(line);
}

void respond(struct call *c, long long val, int err) {
  struct seccomp_notif_resp resp = {.id = c->req->id, .val = err ? 0 : val, .error = err ? err : 0, .flags = 0};
  if (ioctl(c->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT)
    warn_step("guard", "answer: %s", strerror(errno));
}

/* Installs fd in the caller and returns it from the caller's syscall. */
void respond_fd(struct call *c, int fd, int flags) {
  struct seccomp_notif_addfd add = {
      .id = c->req->id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (__u32)fd, .newfd = 0,
      .newfd_flags = (flags & O_CLOEXEC) ? O_CLOEXEC : 0};
  if (ioctl(c->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0 && errno != ENOENT) respond(c, 0, -errno);
  close(fd);
}

static const struct guard_op *find_op(int nr) {
  const struct {
    const struct guard_op *ops;
    unsigned n;
  } tables[] = {{OPEN_OPS, NOPEN_OPS}, {FILE_OPS, NFILE_OPS}, {SOCKET_OPS, NSOCKET_OPS}, {REFUSAL_OPS, NREFUSAL_OPS}};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (unsigned i = 0; i < tables[t].n; i++)
      if (tables[t].ops[i].nr == nr) return &tables[t].ops[i];
  return NULL;
}

static void handle(struct call *c) {
  if (explain_lookup(c)) return;
  const struct guard_op *op = find_op(c->req->data.nr);
  if (!op) {
    /* The filter handed over a call no handler knows: refuse it. */
    c->op = "syscall";
    return respond(c, 0, -ENOSYS);
  }
  c->op = op->op;
  struct target t, u;
  target_init(&t);
  target_init(&u);
  int r = op->fn(c, c->req->data.args, &t, &u);
  target_close(&t);
  target_close(&u);
  if (r != ANSWERED) respond(c, 0, r);
}

void guard_run(const struct plan *p, int listener) {
  /* Keep sandboxed processes (same uid) out of our memory and fds. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die_step("guard", "PR_SET_DUMPABLE: %s", strerror(errno));
  prctl(PR_SET_NAME, "vak-guard", 0, 0, 0);
  struct sigaction sa = {.sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT};
  sigaction(SIGCHLD, &sa, NULL);
  struct seccomp_notif_sizes sizes;
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) die_step("guard", "notif sizes: %s", strerror(errno));
  size_t req_size = sizes.seccomp_notif > sizeof(struct seccomp_notif) ? sizes.seccomp_notif : sizeof(struct seccomp_notif);
  struct seccomp_notif *req = malloc(req_size);
  if (!req) die_step("guard", "out of memory");
  for (;;) {
    struct pollfd pfd = {.fd = listener, .events = POLLIN};
    if (poll(&pfd, 1, -1) < 0) {
      if (errno == EINTR) continue;
      die_step("guard", "poll: %s", strerror(errno));
    }
    if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) _exit(0); /* nobody left to guard */
    memset(req, 0, req_size);
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
      if (errno == EINTR || errno == ENOENT) continue;
      die_step("guard", "receive: %s", strerror(errno));
    }
    struct call c = {.plan = p, .listener = listener, .req = req, .tid = (pid_t)req->pid, .op = "syscall"};
    c.tgid = tgid_of(c.tid);
    if (c.tgid <= 0 || !still_valid(&c)) { respond(&c, 0, -ESRCH); continue; }
    handle(&c);
  }
}
