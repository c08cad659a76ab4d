/* The write guard, resolving a path the way the kernel would, one component
 * at a time from a directory fd it holds: symlinks followed by hand (so that
 * "self" in procfs means the caller, and no link is followed twice), magic
 * links (fd/N, cwd, exe, root) through the kernel, and in procfs only the
 * caller's own /proc/<pid>. The result is a target: the parent directory, the
 * entry's name and, when it exists, an O_PATH fd of the entry. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "guard.h"

#define MAX_LINKS 40

void target_init(struct target *t) {
  t->parent = t->obj = -1;
  t->magic = t->trailing_slash = 0;
  t->name[0] = 0;
}

void target_close(struct target *t) {
  if (t->parent >= 0) close(t->parent);
  if (t->obj >= 0) close(t->obj);
  target_init(t);
}



int fd_path(int fd, char *out, size_t cap) {
  char p[64];
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(p, out, cap - 1);
  if (n < 0) return -errno;
  out[n] = 0;
  return 0;
}

static int is_proc(int fd, int *is_root) {
  struct statfs sf;
  struct stat st;
  if (fstatfs(fd, &sf) != 0 || sf.f_type != PROC_SUPER_MAGIC) return 0;
  *is_root = fstat(fd, &st) == 0 && st.st_ino == 1;
  return 1;
}

static int start_dir(struct call *c, long dirfd, int absolute) {
  char p[64];
  if (absolute) return open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if ((int)dirfd == AT_FDCWD) snprintf(p, sizeof p, "/proc/%d/cwd", c->tid);
  else if ((int)dirfd < 0) return -EBADF;
  else snprintf(p, sizeof p, "/proc/%d/fd/%d", c->tid, (int)dirfd);
  int fd = open(p, O_PATH | O_CLOEXEC);
  return fd < 0 ? (errno == ENOENT ? -EBADF : -errno) : fd;
}

/* Walks path from dirfd the way the kernel would, following symlinks by hand
 * (so "self" in procfs means the caller) and magic links through the kernel. */
static int resolve_once(struct call *c, long dirfd, const char *path, int follow_last, struct target *t) {
  target_init(t);
  if (!*path) return -ENOENT;
  char buf[2 * PATH_MAX + 2];
  snprintf(buf, sizeof buf, "%s", path);
  char *rest = buf;
  int cur = start_dir(c, dirfd, rest[0] == '/');
  if (cur < 0) return cur;
  int links = 0;
  for (;;) {
    while (*rest == '/') rest++;
    if (!*rest) {
      /* The path ends at a directory ("/", "dir/", "a/.."): the entry is cur itself. */
      t->obj = cur;
      t->magic = 1;
      t->trailing_slash = 1;
      return 0;
    }
    char *end = strchr(rest, '/');
    size_t len = end ? (size_t)(end - rest) : strlen(rest);
    if (len > NAME_MAX) { close(cur); return -ENAMETOOLONG; }
    char comp[NAME_MAX + 1];
    memcpy(comp, rest, len);
    comp[len] = 0;
    char *after = rest + len;
    while (*after == '/') after++;
    int last = *after == 0;
    int trailing = last && end != NULL;

    if (!strcmp(comp, ".") || !strcmp(comp, "..")) {
      if (last) {
        t->parent = cur;
        snprintf(t->name, sizeof t->name, "%s", comp);
        t->obj = openat(cur, comp, O_PATH | O_CLOEXEC);
        t->trailing_slash = trailing;
        if (t->obj >= 0) return 0;
        int e = errno;
        target_close(t);
        return -e;
      }
      if (comp[1]) {
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        close(cur);
        if (up < 0) return -errno;
        cur = up;
      }
      rest = after;
      continue;
    }

    /* In procfs, only the caller's own /proc/<pid>: never the guard's (its
     * fds and memory), nor another process's. */
    int proc_root = 0;
    if (comp[strspn(comp, "0123456789")] == 0 && is_proc(cur, &proc_root) && proc_root) {
      pid_t pid = (pid_t)atoi(comp);
      if (pid != c->tgid && pid != c->tid) {
        close(cur);
        return -EACCES;
      }
    }

    struct stat st;
    if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      int e = errno;
      if (e == ENOENT && last) {
        t->parent = cur;
        snprintf(t->name, sizeof t->name, "%s", comp);
        t->trailing_slash = trailing;
        return 0;
      }
      close(cur);
      return -e;
    }

    if (S_ISLNK(st.st_mode) && last && trailing && !follow_last) {
      close(cur); /* rmdir("link/") and the like: the kernel says ENOTDIR */
      return -ENOTDIR;
    }
    if (S_ISLNK(st.st_mode) && (!last || follow_last || trailing)) {
      if (is_proc(cur, &proc_root)) {
        if (proc_root && (!strcmp(comp, "self") || !strcmp(comp, "thread-self"))) {
          char sub[2 * PATH_MAX + 2];
          if (comp[0] == 's') snprintf(sub, sizeof sub, "%d/%s", c->tgid, after);
          else snprintf(sub, sizeof sub, "%d/task/%d/%s", c->tgid, c->tid, after);
          snprintf(buf, sizeof buf, "%s", sub);
          rest = buf;
          continue;
        }
        if (!proc_root) {
          /* A magic link (fd/N, cwd, exe, root): only the kernel can follow it. */
          int fd = openat(cur, comp, O_PATH | O_CLOEXEC);
          int e = errno;
          close(cur);
          if (fd < 0) return -e;
          if (last) {
            t->obj = fd;
            t->magic = 1;
            t->trailing_slash = trailing;
            return 0;
          }
          cur = fd;
          rest = after;
          continue;
        }
      }
      if (++links > MAX_LINKS) { close(cur); return -ELOOP; }
      char link[PATH_MAX];
      ssize_t n = readlinkat(cur, comp, link, sizeof link - 1);
      if (n < 0) { int e = errno; close(cur); return -e; }
      link[n] = 0;
      char joined[2 * PATH_MAX + 2];
      int w = snprintf(joined, sizeof joined, "%s%s%s", link, *after ? "/" : (trailing ? "/" : ""), after);
      if (w < 0 || (size_t)w >= sizeof joined) { close(cur); return -ENAMETOOLONG; }
      snprintf(buf, sizeof buf, "%s", joined);
      rest = buf;
      if (link[0] == '/') {
        close(cur);
        cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0) return -errno;
      }
      continue;
    }

    if (last && trailing && !S_ISDIR(st.st_mode)) {
      close(cur);
      return -ENOTDIR;
    }
    if (last) {
      t->parent = cur;
      snprintf(t->name, sizeof t->name, "%s", comp);
      t->trailing_slash = trailing;
      t->obj = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (t->obj < 0 && errno != ENOENT) { int e = errno; target_close(t); return -e; }
      return 0;
    }
    int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(cur);
    if (next < 0) return e == ELOOP ? -EAGAIN : -e; /* swapped for a link since fstatat: walk again */
    cur = next;
    rest = after;
  }
}

int resolve(struct call *c, long dirfd, const char *path, int follow_last, struct target *t) {
  for (int i = 0; i < MAX_RETRIES; i++) {
    int r = resolve_once(c, dirfd, path, follow_last, t);
    if (r != -EAGAIN) return r;
  }
  return -EAGAIN;
}

/* The absolute path of the entry a target names, as this mount view sees it.
 * Empty when the entry is not a file system path (a pipe, a socket). */
int target_path(const struct target *t, char *out, size_t cap) {
  int dots = !strcmp(t->name, ".") || !strcmp(t->name, "..");
  if (t->magic || t->parent < 0 || (dots && t->obj >= 0)) {
    int r = fd_path(t->obj, out, cap);
    if (r) return r;
    if (out[0] != '/') out[0] = 0;
    return 0;
  }
  char dir[PATH_MAX];
  int r = fd_path(t->parent, dir, sizeof dir);
  if (r) return r;
  if (dir[0] != '/') return -ENOENT;
  size_t dl = strlen(dir);
  if (dl > 10 && !strcmp(dir + dl - 10, " (deleted)")) return -ENOENT;
  size_t nl = strlen(t->name);
  if (!strcmp(dir, "/")) dl = 0;
  if (dl + 1 + nl + 1 > cap) return -ENAMETOOLONG;
  memmove(out, dir, dl);
  out[dl] = '/';
  memcpy(out + dl + 1, t->name, nl + 1);
  return 0;
}

const char *self_fd(int fd) {
  static char p[2][64];
  static int which;
  which ^= 1;
  snprintf(p[which], sizeof p[which], "/proc/self/fd/%d", fd);
  return p[which];
}


int obj_is_link(const struct target *t) {
  struct stat st;
  return fstat(t->obj, &st) == 0 && S_ISLNK(st.st_mode);
}
