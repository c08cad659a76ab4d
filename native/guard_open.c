/* The write guard's opens: open, openat and creat with a write mode, O_CREAT
 * or O_TRUNC (the filter hands over no other open). The path is resolved by
 * the guard, the target checked, and the file opened by the guard relative to
 * the directory fd it checked, O_NOFOLLOW and, when creating, O_EXCL (so that
 * something swapped in meanwhile makes it walk again); the new fd is
 * installed in the caller atomically with the answer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

static int open_existing(struct call *c, struct target *t, int flags, mode_t mode, int *out) {
  struct stat st;
  if (fstat(t->obj, &st) != 0) return -errno;
  if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) return -EEXIST;
  if (S_ISLNK(st.st_mode)) return -ELOOP;
  /* O_CREAT on something that exists, without a write mode, is only a read. */
  if (flags & (O_WRONLY | O_RDWR | O_TRUNC)) {
    int r = allow(c, t, ACCESS_CONTENT);
    if (r) return r;
  } else {
    /* A read through the guard must not exceed what the command may read
     * itself: the guard's outer Landlock layer adds /proc in reduced mode. */
    char path[PATH_MAX];
    if (!still_valid(c)) return -ESRCH;
    if (!c->plan->use_ns && target_path(t, path, sizeof path) == 0 && (!strncmp(path, "/proc/", 6) || !strcmp(path, "/proc")))
      return -EACCES;
  }
  if ((flags & O_TMPFILE) == O_TMPFILE && setid_added(mode, 0)) return refuse_setid(c, t, WHY_SETID);
  int reopen = flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW);
  if (S_ISFIFO(st.st_mode) && !(flags & O_NONBLOCK) && (flags & O_ACCMODE) != O_RDWR) {
    /* Opening a FIFO blocks until the other end opens; do it in a child so
     * that the guard keeps serving everyone else. */
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) {
      int fd = open(self_fd(t->obj), reopen, mode);
      if (fd < 0) respond(c, 0, -errno);
      else respond_fd(c, fd, flags);
      _exit(0);
    }
    *out = -2;
    return 0;
  }
  int fd = open(self_fd(t->obj), reopen, mode); /* the mode matters for O_TMPFILE */
  if (fd < 0) return -errno;
  *out = fd;
  return 0;
}

static int do_open(struct call *c, long dirfd, __u64 path_addr, int flags, mode_t mode) {
  char path[PATH_MAX];
  int r = read_str(c->tid, path_addr, path, sizeof path);
  if (r) return r;
  if ((flags & O_PATH) && !(flags & O_CREAT)) flags &= O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW;
  int follow = !(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
  for (int attempt = 0; attempt < MAX_RETRIES; attempt++) {
    struct target t;
    r = resolve(c, dirfd, path, follow, &t);
    if (r) return r;
    if (!still_valid(c)) { target_close(&t); return -ESRCH; }
    int fd = -1;
    if (t.obj >= 0) {
      r = open_existing(c, &t, flags, mode, &fd);
      target_close(&t);
      if (r) return r;
      if (fd == -2) return ANSWERED; /* by the child */
      respond_fd(c, fd, flags);
      return ANSWERED;
    }
    if (!(flags & O_CREAT)) { target_close(&t); return -ENOENT; }
    if (t.trailing_slash) { target_close(&t); return -EISDIR; }
    r = allow(c, &t, ACCESS_ENTRY);
    if (!r && setid_added(mode, 0)) r = refuse_setid(c, &t, WHY_SETID);
    if (r) { target_close(&t); return r; }
    umask(umask_of(c->tid));
    /* O_EXCL: if something appeared under this name since we looked, walk again. */
    fd = openat(t.parent, t.name, flags | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    target_close(&t);
    if (fd >= 0) {
      respond_fd(c, fd, flags);
      return ANSWERED;
    }
    if (e == EEXIST && !(flags & O_EXCL)) continue;
    if (e == ELOOP && !(flags & O_EXCL)) continue;
    return -e;
  }
  return -EAGAIN;
}

static int h_open(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return do_open(c, AT_FDCWD, a[0], (int)a[1], (mode_t)a[2]);
}

static int h_openat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return do_open(c, (long)(int)a[0], a[1], (int)a[2], (mode_t)a[3]);
}

static int h_creat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return do_open(c, AT_FDCWD, a[0], O_CREAT | O_WRONLY | O_TRUNC, (mode_t)a[1]);
}

const struct guard_op OPEN_OPS[] = {
    {SYS_open, "open", h_open},
    {SYS_openat, "openat", h_openat},
    {SYS_creat, "creat", h_creat},
};
const unsigned NOPEN_OPS = sizeof OPEN_OPS / sizeof OPEN_OPS[0];
