/* vak exec --explain: the command's lookups (opens for reading, stat, access,
 * readlink, execve) come to the guard too, only when asked for. The guard
 * notes the path when it does not exist in the view, reports it once, and
 * answers CONTINUE: the kernel then does exactly what it would have done with
 * no filter, Landlock and the mount view unchanged. CONTINUE is safe here
 * because nothing rests on what the guard read: an open's flags come from the
 * registers seccomp saw (one with a write flag is not a lookup and goes to the
 * write path, which never continues), and the path is only a hint that vak
 * checks again on the host. Without --explain the filter has none of this,
 * unless a --deny-read path lies in the view: then the same lookups come here
 * so that guard_noread.c can refuse a read of it by name first. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

#define WRITE_OPEN_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)
#define MAX_MISSING_LINES 500
#define SEEN_SLOTS 4096

static unsigned missing;
static unsigned long long seen[SEEN_SLOTS];

/* Whether this path was reported already; remembers it. Full: treated as seen. */
static int seen_before(const char *s) {
  unsigned long long h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  if (h == 0) h = 1;
  for (unsigned i = 0; i < SEEN_SLOTS; i++) {
    unsigned long long *slot = &seen[(h + i) % SEEN_SLOTS];
    if (*slot == h) return 1;
    if (*slot == 0) { *slot = h; return 0; }
  }
  return 1;
}

/* Which argument holds the directory fd (-1: none, AT_FDCWD) and the path; 0 when the call is no lookup. */
static int lookup_args(const struct seccomp_data *d, int *dir_arg, int *path_arg) {
  switch (d->nr) {
  case SYS_open: *dir_arg = -1; *path_arg = 0; return !(d->args[1] & WRITE_OPEN_FLAGS);
  case SYS_openat: *dir_arg = 0; *path_arg = 1; return !(d->args[2] & WRITE_OPEN_FLAGS);
  case SYS_stat: case SYS_lstat: case SYS_access: case SYS_readlink: case SYS_execve:
    *dir_arg = -1; *path_arg = 0; return 1;
  case SYS_newfstatat: case SYS_statx: case SYS_faccessat: case SYS_faccessat2: case SYS_readlinkat:
    *dir_arg = 0; *path_arg = 1; return 1;
  default: return 0;
  }
}

static void note_missing(struct call *c, int dir_arg, int path_arg) {
  if (missing >= MAX_MISSING_LINES) return;
  char path[PATH_MAX], full[PATH_MAX + PATH_MAX / 2];
  if (read_str(c->tid, c->req->data.args[path_arg], path, sizeof path) != 0 || !path[0]) return;
  if (path[0] == '/') {
    snprintf(full, sizeof full, "%s", path);
  } else {
    char base[64], dir[PATH_MAX];
    int dirfd = dir_arg < 0 ? AT_FDCWD : (int)c->req->data.args[dir_arg];
    if (dirfd == AT_FDCWD) snprintf(base, sizeof base, "/proc/%d/cwd", c->tid);
    else if (dirfd >= 0) snprintf(base, sizeof base, "/proc/%d/fd/%d", c->tid, dirfd);
    else return;
    ssize_t n = readlink(base, dir, sizeof dir - 1);
    if (n <= 0 || dir[0] != '/') return;
    dir[n] = 0;
    if (snprintf(full, sizeof full, "%s/%s", dir, path) >= (int)sizeof full) return;
  }
  struct stat st;
  if (fstatat(AT_FDCWD, full, &st, AT_SYMLINK_NOFOLLOW) == 0 || (errno != ENOENT && errno != ENOTDIR)) return;
  if (seen_before(full)) return;
  missing++;
  char jp[PATH_MAX * 2], line[PATH_MAX * 2 + 128];
  jstr(jp, sizeof jp, full);
  snprintf(line, sizeof line, "{\"event\":\"missing\",\"op\":\"%s\",\"path\":\"%s\"%s}", c->op, jp,
           missing == MAX_MISSING_LINES ? ",\"more\":true" : "");
  report_line(line);
}

int explain_lookup(struct call *c) {
  int dir_arg, path_arg;
  if (!(c->plan->explain || c->plan->read_denied) || !lookup_args(&c->req->data, &dir_arg, &path_arg)) return 0;
  if (c->plan->read_denied && refuse_denied_read(c, dir_arg, path_arg)) return 1;
  c->op = c->req->data.nr == SYS_open || c->req->data.nr == SYS_openat ? "open" : c->req->data.nr == SYS_execve ? "execve" : "stat";
  if (c->plan->explain) note_missing(c, dir_arg, path_arg);
  struct seccomp_notif_resp resp = {.id = c->req->id, .val = 0, .error = 0, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE};
  if (ioctl(c->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT)
    warn_step("guard", "continue: %s", strerror(errno));
  return 1;
}
