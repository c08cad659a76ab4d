/* --deny-read of a path inside the view: refused by name, with a line.
 *
 * The view already hides such a path: a mask (an empty read-only file or
 * directory) is mounted over it, and its other hard links inside the grants
 * are masked too (src/policy/deny-read.ts). A mask alone reads as an empty
 * file with no word from Vak, so when the plan has one (a PROT_NOREAD rule)
 * the filter also hands the command's lookups to the guard (the --explain
 * rules), and the guard refuses an open for reading or an execve of a path
 * at or below such a rule with EACCES and a "denied" line naming the path
 * and the rule. Every other lookup goes on (CONTINUE). Enforcement stays with
 * the mask: if the command swaps a name between this check and the kernel's
 * own walk, the kernel finds the mask, never the file, so nothing here has to
 * win a race. The path is resolved the guard's way (guard_path.c: /proc/self
 * is the caller, magic links such as /proc/self/fd/N through the kernel, no
 * symlink followed twice), so a symlink, `..`, a renamed parent or an fd
 * reopened through /proc all name the rule's path; when a middle component
 * is missing (a name below a masked directory), the path as written, made
 * absolute, is checked instead. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

int refuse_denied_read(struct call *c, int dir_arg, int path_arg) {
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr;
  int flags = nr == SYS_open ? (int)a[1] : nr == SYS_openat ? (int)a[2] : 0;
  if (nr != SYS_open && nr != SYS_openat && nr != SYS_execve) return 0;
  if (flags & O_PATH) return 0; /* a handle, not a read: what it is reopened as comes back here */
  char path[PATH_MAX], full[PATH_MAX], why[PATH_MAX + 64];
  if (read_str(c->tid, a[path_arg], path, sizeof path) != 0 || !path[0]) return 0;
  long dirfd = dir_arg < 0 ? AT_FDCWD : (long)(int)a[dir_arg];
  struct target t;
  target_init(&t);
  int follow = nr == SYS_execve || !(flags & O_NOFOLLOW);
  if (resolve(c, dirfd, path, follow, &t) == 0) {
    if (target_path(&t, full, sizeof full) != 0) full[0] = 0;
    target_close(&t);
  } else {
    as_written(c, dirfd, path, full, sizeof full);
  }
  const char *rule = full[0] ? denied_rule(c->plan, full) : NULL;
  if (!rule || !still_valid(c)) return 0;
  c->op = nr == SYS_execve ? "execve" : "read";
  snprintf(why, sizeof why, "protected path %s", rule);
  log_denial(c, full, why);
  respond(c, 0, -EACCES);
  return 1;
}
