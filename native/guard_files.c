/* The write guard's other file operations: creating (mkdir, mknod, symlink,
 * link), moving and removing entries, truncate, and metadata (chmod, chown,
 * utimes, xattrs). Each resolves its paths (guard_path.c), asks the rules
 * (guard_rules.c), then acts relative to the fds it checked, never following
 * the last component. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include "guard.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#define XATTR_VALUE_MAX 65536
#define XATTR_NAME_CAPS "security.capability"

enum entry_use {
  NEW_ENTRY,     /* mkdir, mknod, symlink, link: fails with EEXIST if present */
  REPLACE_ENTRY, /* the new name of a rename */
  REMOVE_ENTRY,  /* unlink, rmdir, the old name of a rename */
};

/* Resolves a path that names an entry to create or remove (never following the
 * last component) and checks it. */
static int entry(struct call *c, long dirfd, __u64 addr, enum entry_use use, struct target *t) {
  char path[PATH_MAX];
  int r = read_str(c->tid, addr, path, sizeof path);
  if (r) return r;
  r = resolve(c, dirfd, path, 0, t);
  if (r) return r;
  if (t->parent < 0) {
    /* "/" or a magic link: no name to create or remove here. */
    r = use == NEW_ENTRY ? -EEXIST : -EBUSY;
    target_close(t);
    return r;
  }
  /* Creating what exists changes nothing: answer as the kernel would (mkdir -p
   * walks through existing protected directories). */
  if (use == NEW_ENTRY && t->obj >= 0) {
    target_close(t);
    return -EEXIST;
  }
  r = allow(c, t, ACCESS_ENTRY);
  if (r) target_close(t);
  return r;
}

/* Resolves a path whose existing object is modified (chmod, chown, ...). */
static int object(struct call *c, long dirfd, __u64 addr, int follow, int empty_ok, enum access access, struct target *t) {
  char path[PATH_MAX];
  int r = read_str(c->tid, addr, path, sizeof path);
  if (r) return r;
  if (!path[0] && empty_ok) {
    target_init(t);
    int fd = caller_fd(c, (int)dirfd);
    if (fd < 0) return fd;
    t->obj = fd;
    t->magic = 1;
  } else {
    r = resolve(c, dirfd, path, follow, t);
    if (r) return r;
    if (t->obj < 0) { target_close(t); return -ENOENT; }
  }
  r = allow(c, t, access);
  if (r) target_close(t);
  return r;
}

static int fd_object(struct call *c, int fd, struct target *t) {
  target_init(t);
  int dup = caller_fd(c, fd);
  if (dup < 0) return dup;
  t->obj = dup;
  t->magic = 1;
  int r = allow(c, t, ACCESS_METADATA);
  if (r) target_close(t);
  return r;
}

static int read_times(struct call *c, __u64 addr, int kind, struct timespec ts[2], struct timespec **out) {
  *out = NULL;
  if (!addr) return 0;
  if (kind == 0) { /* struct utimbuf */
    struct utimbuf u;
    if (read_mem(c->tid, addr, &u, sizeof u)) return -EFAULT;
    ts[0] = (struct timespec){u.actime, 0};
    ts[1] = (struct timespec){u.modtime, 0};
  } else if (kind == 1) { /* struct timeval[2] */
    struct timeval tv[2];
    if (read_mem(c->tid, addr, tv, sizeof tv)) return -EFAULT;
    for (int i = 0; i < 2; i++) {
      if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000) return -EINVAL;
      ts[i] = (struct timespec){tv[i].tv_sec, tv[i].tv_usec * 1000};
    }
  } else { /* struct timespec[2] */
    if (read_mem(c->tid, addr, ts, 2 * sizeof ts[0])) return -EFAULT;
  }
  *out = ts;
  return 0;
}

/* A non-directory with a set-id bit (a directory's S_ISGID only steers the
 * group of what is created in it). */
static int is_setid_file(const struct target *t) {
  struct stat st;
  return fstat(t->obj, &st) == 0 && !S_ISDIR(st.st_mode) && (st.st_mode & SETID_BITS);
}

static int make_dir(struct call *c, long dirfd, __u64 path, mode_t mode, struct target *t) {
  int r = entry(c, dirfd, path, NEW_ENTRY, t);
  if (r) return r;
  /* A directory made in a setgid directory inherits S_ISGID: the host's own
   * policy for that tree (files never inherit it), so asking for it there adds
   * nothing. */
  struct stat parent;
  if (fstat(t->parent, &parent) != 0) return -errno;
  if (setid_added(mode, parent.st_mode & S_ISGID)) return refuse_setid(c, t, WHY_SETID);
  umask(umask_of(c->tid));
  return RESULT(mkdirat(t->parent, t->name, mode));
}

static int h_mkdir(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_dir(c, AT_FDCWD, a[0], (mode_t)a[1], t);
}

static int h_mkdirat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_dir(c, (int)a[0], a[1], (mode_t)a[2], t);
}

static int make_node(struct call *c, long dirfd, __u64 path, mode_t mode, dev_t dev, struct target *t) {
  int r = entry(c, dirfd, path, NEW_ENTRY, t);
  if (r) return r;
  if (setid_added(mode, 0)) return refuse_setid(c, t, WHY_SETID);
  if ((r = nolinks_mknod(c, t, mode))) return r;
  umask(umask_of(c->tid));
  return RESULT(mknodat(t->parent, t->name, mode, dev));
}

static int h_mknod(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_node(c, AT_FDCWD, a[0], (mode_t)a[1], (dev_t)a[2], t);
}

static int h_mknodat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_node(c, (int)a[0], a[1], (mode_t)a[2], (dev_t)a[3], t);
}

static int make_symlink(struct call *c, __u64 text, long dirfd, __u64 path, struct target *t) {
  char link[PATH_MAX];
  int r = read_str(c->tid, text, link, sizeof link);
  if (r) return r;
  if ((r = entry(c, dirfd, path, NEW_ENTRY, t))) return r;
  if ((r = nolinks_symlink(c, t))) return r;
  return RESULT(symlinkat(link, t->parent, t->name));
}

static int h_symlink(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_symlink(c, a[0], AT_FDCWD, a[1], t);
}

static int h_symlinkat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_symlink(c, a[0], (int)a[1], a[2], t);
}

static int make_link(struct call *c, long olddir, __u64 oldpath, long newdir, __u64 newpath, int flags, struct target *t,
                     struct target *u) {
  /* A second name for a protected file would be a way to write it. */
  int r = object(c, olddir, oldpath, flags & AT_SYMLINK_FOLLOW, flags & AT_EMPTY_PATH, ACCESS_CONTENT, t);
  if (r) return r;
  if (is_setid_file(t)) return refuse_setid(c, t, WHY_SETID_NAME);
  if ((r = entry(c, newdir, newpath, NEW_ENTRY, u))) return r;
  if ((r = nolinks_link(c, t, u))) return r;
  if (obj_is_link(t) && t->parent >= 0) return RESULT(linkat(t->parent, t->name, u->parent, u->name, 0));
  return RESULT(linkat(AT_FDCWD, self_fd(t->obj), u->parent, u->name, AT_SYMLINK_FOLLOW));
}

static int h_link(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_link(c, AT_FDCWD, a[0], AT_FDCWD, a[1], 0, t, u);
}

static int h_linkat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return make_link(c, (int)a[0], a[1], (int)a[2], a[3], (int)a[4], t, u);
}

static int move(struct call *c, long olddir, __u64 oldpath, long newdir, __u64 newpath, unsigned flags, struct target *t,
                struct target *u) {
  int r = entry(c, olddir, oldpath, REMOVE_ENTRY, t);
  if (r) return r;
  if (t->obj >= 0 && is_setid_file(t)) return refuse_setid(c, t, WHY_SETID_NAME);
  if ((r = entry(c, newdir, newpath, REPLACE_ENTRY, u))) return r;
  if ((r = nolinks_rename(c, t, u, flags))) return r;
  return RESULT(renameat2(t->parent, t->name, u->parent, u->name, flags));
}

static int h_rename(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return move(c, AT_FDCWD, a[0], AT_FDCWD, a[1], 0, t, u);
}

static int h_renameat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return move(c, (int)a[0], a[1], (int)a[2], a[3], 0, t, u);
}

static int h_renameat2(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return move(c, (int)a[0], a[1], (int)a[2], a[3], (unsigned)a[4], t, u);
}

static int remove_entry(struct call *c, long dirfd, __u64 path, int flags, struct target *t) {
  int r = entry(c, dirfd, path, REMOVE_ENTRY, t);
  if (r) return r;
  return RESULT(unlinkat(t->parent, t->name, flags & AT_REMOVEDIR));
}

static int h_unlink(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return remove_entry(c, AT_FDCWD, a[0], 0, t);
}

static int h_rmdir(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return remove_entry(c, AT_FDCWD, a[0], AT_REMOVEDIR, t);
}

static int h_unlinkat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return remove_entry(c, (int)a[0], a[1], (int)a[2], t);
}

static int h_truncate(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  int r = object(c, AT_FDCWD, a[0], 1, 0, ACCESS_CONTENT, t);
  if (r) return r;
  if (obj_is_link(t)) return -EAGAIN;
  int fd = open(self_fd(t->obj), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -errno;
  r = RESULT(ftruncate(fd, (off_t)a[1]));
  close(fd);
  return r;
}

/* Keeping a bit the object already has (GNU chmod passes a directory's S_ISGID
 * back in) plants nothing; adding one does. */
static int mode_allowed(struct call *c, const struct target *t, mode_t mode) {
  struct stat st;
  if (fstat(t->obj, &st) != 0) return -errno;
  return setid_added(mode, st.st_mode) ? refuse_setid(c, t, WHY_SETID) : 0;
}

static int change_mode(struct call *c, long dirfd, __u64 path, mode_t mode, int flags, struct target *t) {
  int r = object(c, dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), flags & AT_EMPTY_PATH, ACCESS_METADATA, t);
  if (r) return r;
  if (obj_is_link(t)) return -EOPNOTSUPP;
  if ((r = mode_allowed(c, t, mode))) return r;
  return RESULT(chmod(self_fd(t->obj), mode));
}

static int h_chmod(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_mode(c, AT_FDCWD, a[0], (mode_t)a[1], 0, t);
}

static int h_fchmodat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_mode(c, (int)a[0], a[1], (mode_t)a[2], 0, t);
}

static int h_fchmodat2(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_mode(c, (int)a[0], a[1], (mode_t)a[2], (int)a[3], t);
}

static int h_fchmod(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  int r = fd_object(c, (int)a[0], t);
  if (r) return r;
  if ((r = mode_allowed(c, t, (mode_t)a[1]))) return r;
  return RESULT(fchmod(t->obj, (mode_t)a[1]));
}

static int change_owner(struct call *c, long dirfd, __u64 path, uid_t uid, gid_t gid, int flags, struct target *t) {
  int r = object(c, dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), flags & AT_EMPTY_PATH, ACCESS_METADATA, t);
  if (r) return r;
  return RESULT(fchownat(t->obj, "", uid, gid, AT_EMPTY_PATH));
}

static int h_chown(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_owner(c, AT_FDCWD, a[0], (uid_t)a[1], (gid_t)a[2], 0, t);
}

static int h_lchown(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_owner(c, AT_FDCWD, a[0], (uid_t)a[1], (gid_t)a[2], AT_SYMLINK_NOFOLLOW, t);
}

static int h_fchownat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_owner(c, (int)a[0], a[1], (uid_t)a[2], (gid_t)a[3], (int)a[4], t);
}

static int h_fchown(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  int r = fd_object(c, (int)a[0], t);
  if (r) return r;
  return RESULT(fchown(t->obj, (uid_t)a[1], (gid_t)a[2]));
}

/* kind: 0 struct utimbuf, 1 struct timeval[2], 2 struct timespec[2] */
static int change_times(struct call *c, long dirfd, __u64 path, __u64 times, int kind, int flags, struct target *t) {
  struct timespec buf[2], *ts;
  int r = read_times(c, times, kind, buf, &ts);
  if (r) return r;
  if ((r = object(c, dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), flags & AT_EMPTY_PATH, ACCESS_METADATA, t))) return r;
  if (obj_is_link(t) && t->parent >= 0) return RESULT(utimensat(t->parent, t->name, ts, AT_SYMLINK_NOFOLLOW));
  return RESULT(utimensat(AT_FDCWD, self_fd(t->obj), ts, 0));
}

static int h_utime(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_times(c, AT_FDCWD, a[0], a[1], 0, 0, t);
}

static int h_utimes(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_times(c, AT_FDCWD, a[0], a[1], 1, 0, t);
}

static int h_futimesat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  return change_times(c, (int)a[0], a[1], a[2], 1, 0, t);
}

static int h_utimensat(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  if (a[1] != 0) return change_times(c, (int)a[0], a[1], a[2], 2, (int)a[3], t);
  /* futimens(fd) */
  struct timespec buf[2], *ts;
  int r = read_times(c, a[2], 2, buf, &ts);
  if (r) return r;
  if ((r = fd_object(c, (int)a[0], t))) return r;
  return RESULT(futimens(t->obj, ts));
}

/* setxattr(path, name, value, size, flags), and its l and f variants. */
static int set_xattr(struct call *c, const __u64 *a, int by_fd, int follow, struct target *t) {
  static char value[XATTR_VALUE_MAX];
  char name[XATTR_NAME_MAX + 1];
  size_t size = (size_t)a[3];
  if (size > XATTR_VALUE_MAX) return -E2BIG;
  int r = read_str(c->tid, a[1], name, sizeof name);
  if (r) return r;
  if (size && read_mem(c->tid, a[2], value, size)) return -EFAULT;
  int caps = !strcmp(name, XATTR_NAME_CAPS);
  if (by_fd) {
    if ((r = fd_object(c, (int)a[0], t))) return r;
    if (caps) return refuse_setid(c, t, WHY_FCAPS);
    return RESULT(fsetxattr(t->obj, name, value, size, (int)a[4]));
  }
  if ((r = object(c, AT_FDCWD, a[0], follow, 0, ACCESS_METADATA, t))) return r;
  if (caps) return refuse_setid(c, t, WHY_FCAPS);
  return obj_is_link(t) ? -EPERM : RESULT(setxattr(self_fd(t->obj), name, value, size, (int)a[4]));
}

static int h_setxattr(struct call *c, const __u64 *a, struct target *t, struct target *u) { return set_xattr(c, a, 0, 1, t); }
static int h_lsetxattr(struct call *c, const __u64 *a, struct target *t, struct target *u) { return set_xattr(c, a, 0, 0, t); }
static int h_fsetxattr(struct call *c, const __u64 *a, struct target *t, struct target *u) { return set_xattr(c, a, 1, 0, t); }

static int remove_xattr(struct call *c, const __u64 *a, int by_fd, int follow, struct target *t) {
  char name[XATTR_NAME_MAX + 1];
  int r = read_str(c->tid, a[1], name, sizeof name);
  if (r) return r;
  if (by_fd) {
    if ((r = fd_object(c, (int)a[0], t))) return r;
    return RESULT(fremovexattr(t->obj, name));
  }
  if ((r = object(c, AT_FDCWD, a[0], follow, 0, ACCESS_METADATA, t))) return r;
  return obj_is_link(t) ? -EPERM : RESULT(removexattr(self_fd(t->obj), name));
}

static int h_removexattr(struct call *c, const __u64 *a, struct target *t, struct target *u) { return remove_xattr(c, a, 0, 1, t); }
static int h_lremovexattr(struct call *c, const __u64 *a, struct target *t, struct target *u) { return remove_xattr(c, a, 0, 0, t); }
static int h_fremovexattr(struct call *c, const __u64 *a, struct target *t, struct target *u) { return remove_xattr(c, a, 1, 0, t); }

/* The names are those denials report (several calls share one). */
const struct guard_op FILE_OPS[] = {
    {SYS_mkdir, "mkdir", h_mkdir},           {SYS_mkdirat, "mkdir", h_mkdirat},
    {SYS_mknod, "mknod", h_mknod},           {SYS_mknodat, "mknod", h_mknodat},
    {SYS_symlink, "symlink", h_symlink},     {SYS_symlinkat, "symlink", h_symlinkat},
    {SYS_link, "link", h_link},              {SYS_linkat, "link", h_linkat},
    {SYS_rename, "rename", h_rename},        {SYS_renameat, "rename", h_renameat},
    {SYS_renameat2, "rename", h_renameat2},  {SYS_unlink, "unlink", h_unlink},
    {SYS_unlinkat, "unlink", h_unlinkat},    {SYS_rmdir, "rmdir", h_rmdir},
    {SYS_truncate, "truncate", h_truncate},  {SYS_chmod, "chmod", h_chmod},
    {SYS_fchmodat, "chmod", h_fchmodat},     {SYS_fchmodat2, "chmod", h_fchmodat2},
    {SYS_fchmod, "fchmod", h_fchmod},        {SYS_chown, "chown", h_chown},
    {SYS_lchown, "chown", h_lchown},         {SYS_fchownat, "chown", h_fchownat},
    {SYS_fchown, "fchown", h_fchown},        {SYS_utime, "utimes", h_utime},
    {SYS_utimes, "utimes", h_utimes},        {SYS_futimesat, "utimes", h_futimesat},
    {SYS_utimensat, "utimes", h_utimensat},  {SYS_setxattr, "setxattr", h_setxattr},
    {SYS_lsetxattr, "setxattr", h_lsetxattr}, {SYS_fsetxattr, "setxattr", h_fsetxattr},
    {SYS_removexattr, "removexattr", h_removexattr}, {SYS_lremovexattr, "removexattr", h_lremovexattr},
    {SYS_fremovexattr, "removexattr", h_fremovexattr},
};
const unsigned NFILE_OPS = sizeof FILE_OPS / sizeof FILE_OPS[0];
