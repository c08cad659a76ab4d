/* The write guard's rules: what a resolved path may have done to it.
 *
 * check() decides on the path string (absolute, in the sandbox's view): /proc,
 * absolute rules (Vak's state, --deny-*), the deepest grant that contains it,
 * the protected patterns (matched anywhere below the grant's root; the list
 * and each entry's reason are in src/policy/protected.ts, which passes them as
 * --protect-* rules) and the git rules no pattern can express. allow() binds a
 * target to that decision: the path must lead back to the same inode, and a
 * refusal is reported. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"

/* Does path lie at or below root (component-wise)? Returns the remainder. */
static const char *below(const char *path, const char *root) {
  size_t n = strlen(root);
  if (n == 1 && root[0] == '/') return path + 1;
  if (strncmp(path, root, n) != 0) return NULL;
  if (path[n] == 0) return path + n;
  if (path[n] == '/') return path + n + 1;
  return NULL;
}

/* Does pattern[j..] match comps[i..] (to the end of comps when whole_rest)?
 * "**" matches any number of components. The TypeScript twin is
 * protectedMatch() in src/policy/protected.ts. */
static int matches_at(char **comps, int n, int i, char **pat, int k, int j, int whole_rest) {
  if (j == k) return !whole_rest || i == n;
  if (!strcmp(pat[j], "**")) {
    for (int m = i; m <= n; m++)
      if (matches_at(comps, n, m, pat, k, j + 1, whole_rest)) return 1;
    return 0;
  }
  return i < n && !strcasecmp(comps[i], pat[j]) && matches_at(comps, n, i + 1, pat, k, j + 1, whole_rest);
}

/* Do comps[i..n) match a proper, non-empty beginning of pattern[j..]? Then the
 * entry comps[n-1] could become an ancestor of a protected path, by a rename
 * or a symlink, and creating, renaming or removing it is refused. */
static int prefix_at(char **comps, int n, int i, char **pat, int k, int j, int consumed) {
  if (i == n) return consumed && j < k;
  if (j == k) return 0;
  if (!strcmp(pat[j], "**")) return prefix_at(comps, n, i, pat, k, j + 1, consumed) || prefix_at(comps, n, i + 1, pat, k, j, 1);
  return !strcasecmp(comps[i], pat[j]) && prefix_at(comps, n, i + 1, pat, k, j + 1, 1);
}

static int split(char *s, char **out, int cap) {
  int n = 0;
  char *save = NULL;
  for (char *t = strtok_r(s, "/", &save); t && n < cap; t = strtok_r(NULL, "/", &save))
    if (strcmp(t, ".")) out[n++] = t;
  return n;
}

static int path_depth(const char *p) {
  char buf[PATH_MAX], *comps[PATH_MAX / 2];
  snprintf(buf, sizeof buf, "%s", p);
  return split(buf, comps, (int)(sizeof comps / sizeof comps[0]));
}

/* Is dir (an absolute path in the view) a git directory: HEAD, and objects and
 * refs or a commondir? Git trusts such a directory's config and hooks, bare or
 * not, wherever it is. */
static int is_gitdir(const char *dir) {
  struct stat st;
  int fd = open(dir[0] ? dir : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  int head = fstatat(fd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) == 0;
  int objects = fstatat(fd, "objects", &st, 0) == 0 && S_ISDIR(st.st_mode);
  int refs = fstatat(fd, "refs", &st, 0) == 0 && S_ISDIR(st.st_mode);
  int common = fstatat(fd, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0;
  close(fd);
  return head && ((objects && refs) || common);
}

/* Names git trusts inside any git directory (see is_gitdir). */
static const char *const GITDIR_TRUSTED[] = {"config", "config.worktree", "commondir", "gitdir", "hooks"};

/* The git rules no fixed pattern can express: a HEAD or commondir outside
 * .git would make its directory a repository that git on the host trusts; and
 * the trusted files of any directory that already is a git directory. */
static const char *git_rules(char **comps, int n, int root_depth, char *why, size_t cap) {
  int in_dot_git = 0;
  for (int i = 0; i < n; i++)
    if (!strcasecmp(comps[i], ".git")) in_dot_git = 1;
  if (n > root_depth && !in_dot_git && (!strcmp(comps[n - 1], "HEAD") || !strcmp(comps[n - 1], "commondir"))) {
    snprintf(why, cap, "protected path: a %s outside .git would make this directory a git repository", comps[n - 1]);
    return why;
  }
  for (int i = root_depth > 0 ? root_depth : 1; i < n; i++) {
    for (size_t t = 0; t < sizeof GITDIR_TRUSTED / sizeof GITDIR_TRUSTED[0]; t++) {
      if (strcmp(comps[i], GITDIR_TRUSTED[t])) continue;
      if (strcmp(comps[i], "hooks") && i != n - 1) continue; /* files: the entry itself; hooks: the tree */
      char dir[PATH_MAX] = "";
      size_t o = 0;
      for (int c = 0; c < i && o + 2 < sizeof dir; c++) o += (size_t)snprintf(dir + o, sizeof dir - o, "/%s", comps[c]);
      if (is_gitdir(dir)) {
        snprintf(why, cap, "protected path: %s of the git directory %s", comps[i], dir[0] ? dir : "/");
        return why;
      }
    }
  }
  return NULL;
}

/* The rules for one resolved path. path is absolute and in the view. */
const char *check(const struct plan *p, const char *op, const char *path, enum access access, char *why, size_t cap) {
  if (!strncmp(path, "/proc/", 6) || !strcmp(path, "/proc")) {
    if (access == ACCESS_CONTENT && p->use_ns) return NULL; /* Landlock decides; resolution kept it to the caller's own pid */
    snprintf(why, cap, "/proc is not writable from the sandbox");
    return why;
  }
  for (int i = 0; i < p->nrules; i++) {
    const struct protect_rule *r = &p->rules[i];
    if (r->kind != PROT_ABS && r->kind != PROT_NOREAD) continue;
    if (below(path, r->pattern) || (access == ACCESS_ENTRY && below(r->pattern, path))) {
      snprintf(why, cap, "protected path %s", r->pattern);
      return why;
    }
  }
  const struct mount_op *root = NULL;
  size_t best = 0;
  for (int i = 0; i < p->nops; i++) {
    const struct mount_op *o = &p->ops[i];
    if (o->kind != OP_RO && o->kind != OP_RW && o->kind != OP_TMPFS && o->kind != OP_MASK && o->kind != OP_DEV) continue;
    size_t n = strlen(o->path);
    if (n >= best && below(path, o->path)) root = o, best = n;
  }
  if (!root) {
    /* Only devices outside the grants: the sandbox's own terminal. */
    if (access == ACCESS_CONTENT && (below(path, "/dev/pts") || !strcmp(path, "/dev/tty"))) return NULL;
    snprintf(why, cap, "%s is outside every grant", path);
    return why;
  }
  if (root->kind == OP_DEV) {
    if (access == ACCESS_CONTENT) return NULL;
    snprintf(why, cap, "device %s cannot be changed", root->path);
    return why;
  }
  if (root->kind == OP_TMPFS) return NULL;
  if (root->kind != OP_RW) {
    snprintf(why, cap, "%s is granted read-only", root->path);
    return why;
  }
  /* Protected patterns match anywhere in the path, as long as the match reaches
   * below the grant's root: granting /repo/.git still keeps /repo/.git/hooks,
   * while a workspace that itself lies inside, say, ~/.vscode stays writable. */
  char all[PATH_MAX];
  snprintf(all, sizeof all, "%s", path);
  char *comps[PATH_MAX / 2];
  int n = split(all, comps, (int)(sizeof comps / sizeof comps[0]));
  int root_depth = path_depth(root->path);
  /* Only a rename or a symlink can put a prepared tree under a protected
   * name; creating or removing an empty directory or a file at a name that
   * could become an ancestor cannot (what is later created below it is
   * checked in turn), so `mkdir node_modules` or `.config` stays ordinary. */
  int places = !strcmp(op, "rename") || !strcmp(op, "symlink");
  for (int r = 0; r < p->nrules; r++) {
    const struct protect_rule *pr = &p->rules[r];
    if (pr->kind == PROT_ABS || pr->kind == PROT_NOREAD || pr->kind == PROT_NOLINKS) continue;
    char pat[PATH_MAX], *pc[64];
    snprintf(pat, sizeof pat, "%s", pr->pattern);
    int k = split(pat, pc, 64);
    for (int start = 0; start < n; start++) {
      int full = pr->kind == PROT_FILE ? matches_at(comps, n, start, pc, k, 0, 1) && n > root_depth : 0;
      if (pr->kind == PROT_TREE)
        for (int end = start + 1; end <= n && !full; end++)
          full = end > root_depth && matches_at(comps, end, start, pc, k, 0, 1);
      if (full || (access == ACCESS_ENTRY && places && n > root_depth && prefix_at(comps, n, start, pc, k, 0, 0))) {
        snprintf(why, cap, "protected path %s%s", pr->pattern, full ? "" : " (an ancestor of it)");
        return why;
      }
    }
  }
  return git_rules(comps, n, root_depth, why, cap);
}

static int reachable(int fd, const char *path) {
  struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
  int other = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (other < 0) return 0;
  struct stat a, b;
  int same = fstat(fd, &a) == 0 && fstat(other, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
  close(other);
  return same;
}

/* 0 when the access is allowed, -EACCES (logged) when it is not. */
int allow(struct call *c, const struct target *t, enum access access) {
  if (!still_valid(c)) return -ESRCH;
  char path[PATH_MAX], why[PATH_MAX + 128];
  int r = target_path(t, path, sizeof path);
  if (r) return r;
  int named = t->parent >= 0 && !t->magic && strcmp(t->name, ".") && strcmp(t->name, "..");
  int anchor = named ? t->parent : t->obj;
  char anchor_path[PATH_MAX];
  snprintf(anchor_path, sizeof anchor_path, "%s", path);
  if (named) {
    char *slash = strrchr(anchor_path, '/');
    if (slash == anchor_path) slash[1] = 0;
    else if (slash) *slash = 0;
  }
  if (!path[0] || !reachable(anchor, anchor_path)) {
    /* Not in the view: a pipe, a socket, a terminal, or a host file the
     * command inherited. Writing through what is already open is its own
     * business; changing anything about a file outside the view is not. */
    struct stat st;
    if (access == ACCESS_CONTENT && t->obj >= 0 && fstat(t->obj, &st) == 0 &&
        (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)))
      return 0;
    log_denial(c, path[0] ? path : "(an object outside the sandbox's view)", "outside the sandbox's view");
    return -EACCES;
  }
  const char *reason = check(c->plan, c->op, path, access, why, sizeof why);
  if (!reason) return 0;
  log_denial(c, path, reason);
  return -EACCES;
}

/* ---- answering ---- */

mode_t setid_added(mode_t requested, mode_t current) { return requested & SETID_BITS & ~current; }

int refuse_setid(struct call *c, const struct target *t, const char *why) {
  char path[PATH_MAX];
  if (target_path(t, path, sizeof path) != 0 || !path[0]) snprintf(path, sizeof path, "(an object outside the sandbox's view)");
  log_denial(c, path, why);
  return -EPERM;
}
