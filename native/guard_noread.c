/* --deny-read of a path inside the view: refused by name, with a line.
 *
 * The view already hides such a path: a mask (an empty read-only file or
 * directory) is mounted over it, and its other hard links inside the grants
 * are masked too (src/policy/deny-read.ts). A mask alone reads as an empty
 * file with no word from Vak, so when the plan has one (a PROT_NOREAD rule)
 * the filter also hands the command's opens without a write flag and its
 * execve calls to the guard (W_NOREAD; no stat), and the guard refuses an open for reading or an execve of a path
 * at or below such a rule with EACCES and a "denied" line naming the path
 * and the rule. Every other lookup goes on (CONTINUE). Enforcement stays with
 * the mask: if the command swaps a name between this check and the kernel's
 * own walk, the kernel finds the mask, never the file, so nothing here has to
 * win a race. So the check may ask the kernel: it opens the path (O_PATH,
 * from the caller's cwd or dirfd, no magic links) and looks at what it got;
 * only a mask (the one empty file every file mask binds, or a masked
 * directory's own tmpfs) is looked at further, by the path it is mounted at.
 * One openat2 and one fstat per lookup that finds something. A path through a
 * magic link (/proc/self/fd/N: in the guard, /proc/self is the guard), or one
 * the kernel does not find (it may lie below a masked directory, through a
 * link), is resolved the guard's way instead (guard_path.c); when even that
 * misses a middle component, the path as written, made absolute, is checked. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

/* Does path lie at or below root (component-wise)? */
static int at_or_below(const char *path, const char *root) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return 1;
  return !strncmp(path, root, n) && (path[n] == 0 || path[n] == '/');
}

static const char *denied_rule(const struct plan *p, const char *path) {
  for (int i = 0; i < p->nrules; i++)
    if (p->rules[i].kind == PROT_NOREAD && at_or_below(path, p->rules[i].pattern)) return p->rules[i].pattern;
  return NULL;
}

/* The path as written, made absolute against the caller's cwd or dirfd; "" when it cannot be, or has a "..". */
static void as_written(struct call *c, long dirfd, const char *path, char *out, size_t cap) {
  out[0] = 0;
  if (strstr(path, "/../") || !strncmp(path, "../", 3) || !strcmp(path, "..")) return;
  size_t l = strlen(path);
  if (l >= 3 && !strcmp(path + l - 3, "/..")) return;
  if (path[0] == '/') {
    snprintf(out, cap, "%s", path);
    return;
  }
  char base[64], dir[PATH_MAX];
  if ((int)dirfd == AT_FDCWD) snprintf(base, sizeof base, "/proc/%d/cwd", c->tid);
  else if ((int)dirfd >= 0) snprintf(base, sizeof base, "/proc/%d/fd/%d", c->tid, (int)dirfd);
  else return;
  ssize_t n = readlink(base, dir, sizeof dir - 1);
  if (n <= 0 || dir[0] != '/') return;
  dir[n] = 0;
  if (snprintf(out, cap, "%s/%s", dir, path) >= (int)cap) out[0] = 0;
}

/* What each PROT_NOREAD rule's path is in the view (a mask), found on first use: the view is complete by then. */
#define MAX_MASKS 256
static struct { dev_t dev; ino_t ino; int dir; } masks[MAX_MASKS];
static int nmasks = -1;

static void find_masks(const struct plan *p) {
  nmasks = 0;
  for (int i = 0; i < p->nrules && nmasks < MAX_MASKS; i++) {
    struct stat st;
    if (p->rules[i].kind != PROT_NOREAD || lstat(p->rules[i].pattern, &st) != 0) continue;
    masks[nmasks].dev = st.st_dev;
    masks[nmasks].ino = st.st_ino;
    masks[nmasks++].dir = S_ISDIR(st.st_mode);
  }
}

static int is_mask(const struct stat *st) {
  for (int i = 0; i < nmasks; i++)
    if (st->st_dev == masks[i].dev && (masks[i].dir || st->st_ino == masks[i].ino)) return 1;
  return 0;
}

/* The kernel's answer: 1 and the path in *out when it opened a mask, 0 when it opened something else,
 * -ELOOP for a magic link on the way, or the error it gave. */
static int kernel_open(struct call *c, long dirfd, const char *path, int follow, char *out, size_t cap) {
  char base[64];
  int start;
  if (path[0] == '/') start = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  else {
    if ((int)dirfd == AT_FDCWD) snprintf(base, sizeof base, "/proc/%d/cwd", c->tid);
    else if ((int)dirfd >= 0) snprintf(base, sizeof base, "/proc/%d/fd/%d", c->tid, (int)dirfd);
    else return -EBADF;
    start = open(base, O_PATH | O_CLOEXEC);
  }
  if (start < 0) return -errno;
  struct open_how how = {.flags = O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW), .resolve = RESOLVE_NO_MAGICLINKS};
  int fd = (int)syscall(SYS_openat2, start, path, &how, sizeof how);
  int e = errno;
  close(start);
  if (fd < 0) return -e;
  struct stat st;
  int r = fstat(fd, &st) == 0 && is_mask(&st) && fd_path(fd, out, cap) == 0 ? 1 : 0;
  close(fd);
  return r;
}

int refuse_denied_read(struct call *c, int dir_arg, int path_arg) {
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr;
  int flags = nr == SYS_open ? (int)a[1] : nr == SYS_openat ? (int)a[2] : 0;
  if (nr != SYS_open && nr != SYS_openat && nr != SYS_execve) return 0;
  if (flags & O_PATH) return 0; /* a handle, not a read: what it is reopened as comes back here */
  char path[PATH_MAX], full[PATH_MAX], why[PATH_MAX + 64];
  if (read_str(c->tid, a[path_arg], path, sizeof path) != 0 || !path[0]) return 0;
  long dirfd = dir_arg < 0 ? AT_FDCWD : (long)(int)a[dir_arg];
  int follow = nr == SYS_execve || !(flags & O_NOFOLLOW);
  if (nmasks < 0) find_masks(c->plan);
  int k = kernel_open(c, dirfd, path, follow, full, sizeof full);
  if (k == 0) return 0; /* not a mask: nothing denied there */
  if (k < 0 && k != -ELOOP && k != -ENOENT && k != -ENOTDIR) return 0; /* the kernel will refuse it itself */
  if (k < 0) {
    /* A magic link, or a name that is not there (it may be below a masked directory, through a link): the guard's walk. */
    struct target t;
    target_init(&t);
    if (resolve(c, dirfd, path, follow, &t) == 0) {
      if (target_path(&t, full, sizeof full) != 0) full[0] = 0;
      target_close(&t);
    } else {
      as_written(c, dirfd, path, full, sizeof full);
    }
  }
  const char *rule = full[0] ? denied_rule(c->plan, full) : NULL;
  if (!rule || !still_valid(c)) return 0;
  c->op = nr == SYS_execve ? "execve" : "read";
  snprintf(why, sizeof why, "protected path %s", rule);
  log_denial(c, full, why);
  respond(c, 0, -EACCES);
  return 1;
}
