/* The write guard: performs filesystem writes on behalf of sandboxed processes,
 * after checking the path that will actually be touched.
 *
 * Why: protected paths must stay read-only at any depth inside a writable
 * workspace, including paths that do not exist yet. Which paths, and why each
 * one, is written in one place: src/policy/protected.ts (PROTECTED_PATHS),
 * which decide() passes here as --protect-tree/--protect-file rules; this file
 * holds no list of its own, only the matcher and the git rules no pattern can
 * express (git_rules() below, described in that file's header too).
 * Mounts cannot mask a path that does not exist without leaving a file on the
 * host, and Landlock cannot carve a name out of a writable tree.
 *
 * How: the seccomp filter hands every path-taking write (opens for writing,
 * mkdir, rename, link, unlink, chmod, chown, utimes, xattrs, truncate) to this
 * process. It copies the arguments out of the caller once, resolves the path
 * itself one component at a time (so "/proc/self" means the caller, and no
 * symlink is followed twice), checks the resolved path against the grants and
 * the protection rules, and then performs the operation itself, relative to
 * directory fds it holds, without following links on the last component. The
 * result (or a new fd, installed atomically) goes back to the caller. It never
 * answers CONTINUE, so rewriting the caller's memory after the check changes
 * nothing.
 *
 * The guard runs inside the same Landlock domain and mount view as the sandbox,
 * with the same uid: it cannot do anything the sandbox could not do itself. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include "launcher.h"

#define NR_FCHMODAT2 452
#define MAX_LINKS 40
#define MAX_RETRIES 8
#define MAX_DENIAL_LINES 200
#define XATTR_VALUE_MAX 65536


struct call {
  const struct plan *plan;
  int listener;
  struct seccomp_notif *req;
  pid_t tid;
  pid_t tgid;
};

/* A resolved path: the directory that holds the entry, the entry's name, and
 * an O_PATH fd of the entry when it exists. "magic" means the entry was
 * reached through a procfs magic link and has no parent we can name. */
struct target {
  int parent;
  int obj;
  int magic;
  int trailing_slash;
  char name[NAME_MAX + 2];
};

static const char *op_name;
static unsigned denials;

static void target_init(struct target *t) {
  t->parent = t->obj = -1;
  t->magic = t->trailing_slash = 0;
  t->name[0] = 0;
}

static void target_close(struct target *t) {
  if (t->parent >= 0) close(t->parent);
  if (t->obj >= 0) close(t->obj);
  target_init(t);
}

/* ---- reading the caller ---- */

static int read_mem(pid_t tid, __u64 addr, void *buf, size_t len) {
  struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
  ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
  return n == (ssize_t)len ? 0 : -EFAULT;
}

/* Reads a NUL-terminated string page by page, so that a string ending just
 * before an unmapped page is still read. */
static int read_str(pid_t tid, __u64 addr, char *buf, size_t cap) {
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

static pid_t tgid_of(pid_t tid) {
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

static mode_t umask_of(pid_t tid) {
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
static int caller_fd(struct call *c, int fd) {
  /* The calling thread's own fd table (it may have unshared it). */
  int pidfd = (int)syscall(SYS_pidfd_open, c->tid, O_EXCL /* PIDFD_THREAD, Linux 6.9 */);
  if (pidfd < 0) pidfd = (int)syscall(SYS_pidfd_open, c->tgid, 0);
  if (pidfd < 0) return -errno;
  int dup = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
  int e = errno;
  close(pidfd);
  return dup < 0 ? -e : dup;
}

/* ---- path resolution ---- */

static int fd_path(int fd, char *out, size_t cap) {
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

static int resolve(struct call *c, long dirfd, const char *path, int follow_last, struct target *t) {
  for (int i = 0; i < MAX_RETRIES; i++) {
    int r = resolve_once(c, dirfd, path, follow_last, t);
    if (r != -EAGAIN) return r;
  }
  return -EAGAIN;
}

/* The absolute path of the entry a target names, as this mount view sees it.
 * Empty when the entry is not a file system path (a pipe, a socket). */
static int target_path(const struct target *t, char *out, size_t cap) {
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

static int still_valid(struct call *c) {
  __u64 id = c->req->id;
  return ioctl(c->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* ---- the rules ---- */

enum access {
  ACCESS_CONTENT,  /* open for writing, truncate */
  ACCESS_METADATA, /* chmod, chown, utimes, xattrs */
  ACCESS_ENTRY,    /* create, remove, rename, link, bind */
};

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
static const char *check(const struct plan *p, const char *path, enum access access, char *why, size_t cap) {
  if (!strncmp(path, "/proc/", 6) || !strcmp(path, "/proc")) {
    if (access == ACCESS_CONTENT && p->use_ns) return NULL; /* Landlock decides; resolution kept it to the caller's own pid */
    snprintf(why, cap, "/proc is not writable from the sandbox");
    return why;
  }
  for (int i = 0; i < p->nrules; i++) {
    const struct protect_rule *r = &p->rules[i];
    if (r->kind != PROT_ABS) continue;
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
  int places = !strcmp(op_name, "rename") || !strcmp(op_name, "symlink");
  for (int r = 0; r < p->nrules; r++) {
    const struct protect_rule *pr = &p->rules[r];
    if (pr->kind == PROT_ABS) continue;
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

static void log_denial(struct call *c, const char *path, const char *why) {
  if (++denials > MAX_DENIAL_LINES) return;
  char jp[1200], jw[600], line[2048];
  jstr(jp, sizeof jp, path);
  jstr(jw, sizeof jw, why);
  snprintf(line, sizeof line, "{\"event\":\"denied\",\"op\":\"%s\",\"path\":\"%s\",\"reason\":\"%s\",\"pid\":%d%s}", op_name, jp,
           jw, c->tgid, denials == MAX_DENIAL_LINES ? ",\"more\":true" : "");
  report_line(line);
}

/* Is fd the object that path names in this view? A string from d_path can name
 * a view path for a file that lies outside the view (a host file inherited on
 * fd 0, say), so the string alone is never trusted. */
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
static int allow(struct call *c, const struct target *t, enum access access) {
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
  const char *reason = check(c->plan, path, access, why, sizeof why);
  if (!reason) return 0;
  log_denial(c, path, reason);
  return -EACCES;
}

/* ---- answering ---- */

static void respond(struct call *c, long long val, int err) {
  struct seccomp_notif_resp resp = {.id = c->req->id, .val = err ? 0 : val, .error = err ? err : 0, .flags = 0};
  if (ioctl(c->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT)
    warn_step("guard", "answer: %s", strerror(errno));
}


/* Installs fd in the caller and returns it from the caller's syscall. */
static void respond_fd(struct call *c, int fd, int flags) {
  struct seccomp_notif_addfd add = {
      .id = c->req->id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = (__u32)fd, .newfd = 0,
      .newfd_flags = (flags & O_CLOEXEC) ? O_CLOEXEC : 0};
  if (ioctl(c->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0 && errno != ENOENT) respond(c, 0, -errno);
  close(fd);
}

static const char *self_fd(int fd) {
  static char p[2][64];
  static int which;
  which ^= 1;
  snprintf(p[which], sizeof p[which], "/proc/self/fd/%d", fd);
  return p[which];
}

/* ---- the operations ---- */

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

static void do_open(struct call *c, long dirfd, __u64 path_addr, int flags, mode_t mode) {
  char path[PATH_MAX];
  int r = read_str(c->tid, path_addr, path, sizeof path);
  if (r) return respond(c, 0, r);
  if ((flags & O_PATH) && !(flags & O_CREAT)) flags &= O_PATH | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW;
  int follow = !(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL);
  for (int attempt = 0; attempt < MAX_RETRIES; attempt++) {
    struct target t;
    r = resolve(c, dirfd, path, follow, &t);
    if (r) return respond(c, 0, r);
    if (!still_valid(c)) { target_close(&t); return; }
    int fd = -1;
    if (t.obj >= 0) {
      r = open_existing(c, &t, flags, mode, &fd);
      target_close(&t);
      if (r) return respond(c, 0, r);
      if (fd == -2) return; /* answered by the child */
      return respond_fd(c, fd, flags);
    }
    if (!(flags & O_CREAT)) { target_close(&t); return respond(c, 0, -ENOENT); }
    if (t.trailing_slash) { target_close(&t); return respond(c, 0, -EISDIR); }
    r = allow(c, &t, ACCESS_ENTRY);
    if (r) { target_close(&t); return respond(c, 0, r); }
    umask(umask_of(c->tid));
    /* O_EXCL: if something appeared under this name since we looked, walk again. */
    fd = openat(t.parent, t.name, flags | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    target_close(&t);
    if (fd >= 0) return respond_fd(c, fd, flags);
    if (e == EEXIST && !(flags & O_EXCL)) continue;
    if (e == ELOOP && !(flags & O_EXCL)) continue;
    return respond(c, 0, -e);
  }
  respond(c, 0, -EAGAIN);
}

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

static int obj_is_link(const struct target *t) {
  struct stat st;
  return fstat(t->obj, &st) == 0 && S_ISLNK(st.st_mode);
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

#define RESULT(expr) ((expr) == 0 ? 0 : -errno)

/* Socket files that sandboxed processes bound (through this guard): the only
 * unix socket paths they may connect to. Any other socket file belongs to a
 * host service, wherever it sits. Renames go through this guard too, so a
 * host socket cannot be swapped in between bind() and the record. */
#define MAX_OWN_SOCKETS 4096
struct socket_id {
  __u32 dev_major, dev_minor;
  __u64 ino;
  __s64 ctime_sec; /* with the inode, so that a reused inode number is not mistaken for ours */
  __u32 ctime_nsec;
};
static struct socket_id own_sockets[MAX_OWN_SOCKETS];
static unsigned own_next;

static int socket_id(int dirfd, const char *name, int flags, struct socket_id *id) {
  struct statx sx;
  if (statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_CTIME, &sx) != 0) return -errno;
  *id = (struct socket_id){sx.stx_dev_major, sx.stx_dev_minor, sx.stx_ino, sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec};
  return 0;
}

static void remember_socket(const struct socket_id *id) { own_sockets[own_next++ % MAX_OWN_SOCKETS] = *id; }

static int own_socket(const struct socket_id *id) {
  unsigned n = own_next < MAX_OWN_SOCKETS ? own_next : MAX_OWN_SOCKETS;
  for (unsigned i = 0; i < n; i++)
    if (!memcmp(&own_sockets[i], id, sizeof *id)) return 1;
  return 0;
}

/* Copies a socket address; *path is set when it names a unix socket file. */
static int read_sockaddr(struct call *c, __u64 addr, __u64 len, struct sockaddr_storage *ss, char *path, size_t cap) {
  path[0] = 0;
  if (len > sizeof *ss) return -EINVAL;
  memset(ss, 0, sizeof *ss);
  if (len && read_mem(c->tid, addr, ss, (size_t)len)) return -EFAULT;
  const struct sockaddr_un *un = (const struct sockaddr_un *)ss;
  size_t off = offsetof(struct sockaddr_un, sun_path);
  if (ss->ss_family == AF_UNIX && len > off && un->sun_path[0]) {
    size_t n = strnlen(un->sun_path, (size_t)len - off);
    if (n + 1 > cap) return -ENAMETOOLONG;
    memcpy(path, un->sun_path, n);
    path[n] = 0;
  }
  return 0;
}

/* Inside the sandbox's network namespace only loopback exists, and the relay
 * to the egress gate is the one listener on it: anything else is a client
 * ignoring the proxy settings, which deserves a clear message, not a timeout. */
static int inet_allowed(struct call *c, const struct sockaddr_storage *ss) {
  char where[INET6_ADDRSTRLEN + 16] = "";
  int loopback = 0, port = 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    port = ntohs(a->sin_port);
    inet_ntop(AF_INET, &a->sin_addr, where, sizeof where);
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
               (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127);
    port = ntohs(a->sin6_port);
    inet_ntop(AF_INET6, &a->sin6_addr, where, sizeof where);
  } else {
    return 0;
  }
  if (loopback) return 0;
  char dest[INET6_ADDRSTRLEN + 16], why[256];
  snprintf(dest, sizeof dest, "%s:%d", where, port);
  if (c->plan->net_gate)
    snprintf(why, sizeof why, "direct connection; the network is reached only through the egress proxy at http://127.0.0.1:%d", c->plan->net_port);
  else
    snprintf(why, sizeof why, "no network grant");
  log_denial(c, dest, why);
  return -ENETUNREACH;
}

/* Without a network namespace, abstract unix sockets are the host's. */
static int abstract_allowed(struct call *c, const struct sockaddr_storage *ss, socklen_t len, const char *path) {
  if (c->plan->use_ns || ss->ss_family != AF_UNIX || path[0] || len <= offsetof(struct sockaddr_un, sun_path)) return 0;
  log_denial(c, "(an abstract unix socket)", "reduced mode has no private network namespace");
  return -EACCES;
}

static int do_connect(struct call *c, int sock, const struct sockaddr_storage *ss, socklen_t len, const char *path,
                      struct target *t) {
  int r = inet_allowed(c, ss);
  if (!r) r = abstract_allowed(c, ss, len, path);
  if (r) return r;
  if (!path[0]) return RESULT(connect(sock, (const struct sockaddr *)ss, len));
  r = resolve(c, AT_FDCWD, path, 1, t);
  if (r) return r;
  if (t->obj < 0) return -ENOENT;
  struct stat st;
  struct socket_id id;
  if (fstat(t->obj, &st) != 0) return -errno;
  if (!S_ISSOCK(st.st_mode)) return -ECONNREFUSED;
  if ((r = socket_id(t->obj, "", AT_EMPTY_PATH, &id))) return r;
  if (!own_socket(&id)) {
    char where[PATH_MAX];
    if (target_path(t, where, sizeof where) != 0) snprintf(where, sizeof where, "%s", path);
    log_denial(c, where, "a socket the sandbox did not create (a host service)");
    return -EACCES;
  }
  /* Connect to the inode we checked, not to whatever the name means by now. */
  struct sockaddr_un via = {.sun_family = AF_UNIX};
  snprintf(via.sun_path, sizeof via.sun_path, "/proc/self/fd/%d", t->obj);
  return RESULT(connect(sock, (const struct sockaddr *)&via, sizeof via));
}

static int do_bind(struct call *c, int sock, const struct sockaddr_storage *ss, socklen_t len, const char *path,
                   struct target *t) {
  int r = abstract_allowed(c, ss, len, path);
  if (r) return r;
  if (!path[0]) return RESULT(bind(sock, (const struct sockaddr *)ss, len));
  r = resolve(c, AT_FDCWD, path, 0, t);
  if (r) return r;
  if (t->parent < 0 || t->obj >= 0) return -EADDRINUSE;
  if ((r = allow(c, t, ACCESS_ENTRY))) return r;
  struct sockaddr_un here = {.sun_family = AF_UNIX};
  if (strlen(t->name) >= sizeof here.sun_path) return -ENAMETOOLONG;
  snprintf(here.sun_path, sizeof here.sun_path, "%s", t->name);
  /* Bound relative to the directory we resolved and checked (so the socket's
   * own name is just the last component), and recorded as the sandbox's own. */
  umask(umask_of(c->tid));
  if (fchdir(t->parent) != 0) return -errno;
  r = RESULT(bind(sock, (const struct sockaddr *)&here, sizeof here));
  if (chdir("/") != 0) die_step("guard", "chdir: %s", strerror(errno));
  struct socket_id id;
  if (!r && socket_id(t->parent, t->name, 0, &id) == 0) remember_socket(&id);
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

static void handle(struct call *c) {
  const __u64 *a = c->req->data.args;
  int nr = c->req->data.nr;
  struct target t, u;
  int r = 0;
  char name[XATTR_NAME_MAX + 1];
  static char value[XATTR_VALUE_MAX];
  struct timespec tsbuf[2], *ts;
  target_init(&t);
  target_init(&u);

  switch (nr) {
    case SYS_open: op_name = "open"; do_open(c, AT_FDCWD, a[0], (int)a[1], (mode_t)a[2]); return;
    case SYS_openat: op_name = "openat"; do_open(c, (long)(int)a[0], a[1], (int)a[2], (mode_t)a[3]); return;
    case SYS_creat: op_name = "creat"; do_open(c, AT_FDCWD, a[0], O_CREAT | O_WRONLY | O_TRUNC, (mode_t)a[1]); return;

    case SYS_mkdir: case SYS_mkdirat: {
      op_name = "mkdir";
      int at = nr == SYS_mkdirat;
      r = entry(c, at ? (int)a[0] : AT_FDCWD, a[at], NEW_ENTRY, &t);
      if (r) break;
      umask(umask_of(c->tid));
      r = RESULT(mkdirat(t.parent, t.name, (mode_t)a[at + 1]));
      break;
    }
    case SYS_mknod: case SYS_mknodat: {
      op_name = "mknod";
      int at = nr == SYS_mknodat;
      r = entry(c, at ? (int)a[0] : AT_FDCWD, a[at], NEW_ENTRY, &t);
      if (r) break;
      umask(umask_of(c->tid));
      r = RESULT(mknodat(t.parent, t.name, (mode_t)a[at + 1], (dev_t)a[at + 2]));
      break;
    }
    case SYS_symlink: case SYS_symlinkat: {
      op_name = "symlink";
      char link[PATH_MAX];
      int at = nr == SYS_symlinkat;
      if ((r = read_str(c->tid, a[0], link, sizeof link))) break;
      r = entry(c, at ? (int)a[1] : AT_FDCWD, a[at ? 2 : 1], NEW_ENTRY, &t);
      if (r) break;
      r = RESULT(symlinkat(link, t.parent, t.name));
      break;
    }
    case SYS_link: case SYS_linkat: {
      op_name = "link";
      int at = nr == SYS_linkat;
      int flags = at ? (int)a[4] : 0;
      /* A second name for a protected file would be a way to write it. */
      r = object(c, at ? (int)a[0] : AT_FDCWD, a[at ? 1 : 0], flags & AT_SYMLINK_FOLLOW, flags & AT_EMPTY_PATH, ACCESS_CONTENT, &t);
      if (r) break;
      r = entry(c, at ? (int)a[2] : AT_FDCWD, a[at ? 3 : 1], NEW_ENTRY, &u);
      if (r) break;
      if (obj_is_link(&t) && t.parent >= 0) r = RESULT(linkat(t.parent, t.name, u.parent, u.name, 0));
      else r = RESULT(linkat(AT_FDCWD, self_fd(t.obj), u.parent, u.name, AT_SYMLINK_FOLLOW));
      break;
    }
    case SYS_rename: case SYS_renameat: case SYS_renameat2: {
      op_name = "rename";
      int at = nr != SYS_rename;
      unsigned flags = nr == SYS_renameat2 ? (unsigned)a[4] : 0;
      r = entry(c, at ? (int)a[0] : AT_FDCWD, a[at ? 1 : 0], REMOVE_ENTRY, &t);
      if (r) break;
      r = entry(c, at ? (int)a[2] : AT_FDCWD, a[at ? 3 : 1], REPLACE_ENTRY, &u);
      if (r) break;
      r = RESULT(renameat2(t.parent, t.name, u.parent, u.name, flags));
      break;
    }
    case SYS_unlink: case SYS_rmdir: case SYS_unlinkat: {
      op_name = nr == SYS_rmdir ? "rmdir" : "unlink";
      int at = nr == SYS_unlinkat;
      int flags = at ? (int)a[2] : (nr == SYS_rmdir ? AT_REMOVEDIR : 0);
      r = entry(c, at ? (int)a[0] : AT_FDCWD, a[at], REMOVE_ENTRY, &t);
      if (r) break;
      r = RESULT(unlinkat(t.parent, t.name, flags & AT_REMOVEDIR));
      break;
    }
    case SYS_truncate: {
      op_name = "truncate";
      if ((r = object(c, AT_FDCWD, a[0], 1, 0, ACCESS_CONTENT, &t))) break;
      if (obj_is_link(&t)) { r = -EAGAIN; break; }
      int fd = open(self_fd(t.obj), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) { r = -errno; break; }
      r = RESULT(ftruncate(fd, (off_t)a[1]));
      close(fd);
      break;
    }
    case SYS_chmod: case SYS_fchmodat: case NR_FCHMODAT2: {
      op_name = "chmod";
      int at = nr != SYS_chmod;
      int flags = nr == NR_FCHMODAT2 ? (int)a[3] : 0;
      if ((r = object(c, at ? (int)a[0] : AT_FDCWD, a[at], !(flags & AT_SYMLINK_NOFOLLOW), flags & AT_EMPTY_PATH, ACCESS_METADATA, &t)))
        break;
      if (obj_is_link(&t)) { r = -EOPNOTSUPP; break; }
      r = RESULT(chmod(self_fd(t.obj), (mode_t)a[at + 1]));
      break;
    }
    case SYS_fchmod: {
      op_name = "fchmod";
      if ((r = fd_object(c, (int)a[0], &t))) break;
      r = RESULT(fchmod(t.obj, (mode_t)a[1]));
      break;
    }
    case SYS_chown: case SYS_lchown: case SYS_fchownat: {
      op_name = "chown";
      int at = nr == SYS_fchownat;
      int flags = at ? (int)a[4] : (nr == SYS_lchown ? AT_SYMLINK_NOFOLLOW : 0);
      if ((r = object(c, at ? (int)a[0] : AT_FDCWD, a[at], !(flags & AT_SYMLINK_NOFOLLOW), flags & AT_EMPTY_PATH, ACCESS_METADATA, &t)))
        break;
      r = RESULT(fchownat(t.obj, "", (uid_t)a[at + 1], (gid_t)a[at + 2], AT_EMPTY_PATH));
      break;
    }
    case SYS_fchown: {
      op_name = "fchown";
      if ((r = fd_object(c, (int)a[0], &t))) break;
      r = RESULT(fchown(t.obj, (uid_t)a[1], (gid_t)a[2]));
      break;
    }
    case SYS_utime: case SYS_utimes: case SYS_futimesat: case SYS_utimensat: {
      op_name = "utimes";
      int at = nr == SYS_futimesat || nr == SYS_utimensat;
      int flags = nr == SYS_utimensat ? (int)a[3] : 0;
      int kind = nr == SYS_utime ? 0 : nr == SYS_utimensat ? 2 : 1;
      if ((r = read_times(c, a[at ? 2 : 1], kind, tsbuf, &ts))) break;
      if (nr == SYS_utimensat && a[1] == 0) {
        if ((r = fd_object(c, (int)a[0], &t))) break; /* futimens(fd) */
        r = RESULT(futimens(t.obj, ts));
        break;
      }
      if ((r = object(c, at ? (int)a[0] : AT_FDCWD, a[at], !(flags & AT_SYMLINK_NOFOLLOW), flags & AT_EMPTY_PATH, ACCESS_METADATA, &t)))
        break;
      if (obj_is_link(&t) && t.parent >= 0) r = RESULT(utimensat(t.parent, t.name, ts, AT_SYMLINK_NOFOLLOW));
      else r = RESULT(utimensat(AT_FDCWD, self_fd(t.obj), ts, 0));
      break;
    }
    case SYS_setxattr: case SYS_lsetxattr: case SYS_fsetxattr: {
      op_name = "setxattr";
      size_t size = (size_t)a[3];
      if (size > XATTR_VALUE_MAX) { r = -E2BIG; break; }
      if ((r = read_str(c->tid, a[1], name, sizeof name)) || (size && read_mem(c->tid, a[2], value, size))) {
        if (!r) r = -EFAULT;
        break;
      }
      if (nr == SYS_fsetxattr) {
        if ((r = fd_object(c, (int)a[0], &t))) break;
        r = RESULT(fsetxattr(t.obj, name, value, size, (int)a[4]));
      } else {
        if ((r = object(c, AT_FDCWD, a[0], nr == SYS_setxattr, 0, ACCESS_METADATA, &t))) break;
        r = obj_is_link(&t) ? -EPERM : RESULT(setxattr(self_fd(t.obj), name, value, size, (int)a[4]));
      }
      break;
    }
    case SYS_removexattr: case SYS_lremovexattr: case SYS_fremovexattr: {
      op_name = "removexattr";
      if ((r = read_str(c->tid, a[1], name, sizeof name))) break;
      if (nr == SYS_fremovexattr) {
        if ((r = fd_object(c, (int)a[0], &t))) break;
        r = RESULT(fremovexattr(t.obj, name));
      } else {
        if ((r = object(c, AT_FDCWD, a[0], nr == SYS_removexattr, 0, ACCESS_METADATA, &t))) break;
        r = obj_is_link(&t) ? -EPERM : RESULT(removexattr(self_fd(t.obj), name));
      }
      break;
    }
    case SYS_connect: case SYS_bind: {
      op_name = nr == SYS_connect ? "connect" : "bind";
      struct sockaddr_storage ss;
      char path[sizeof ((struct sockaddr_un *)0)->sun_path + 1];
      if ((r = read_sockaddr(c, a[1], a[2], &ss, path, sizeof path))) break;
      int sock = caller_fd(c, (int)a[0]);
      if (sock < 0) { r = sock; break; }
      int flags = fcntl(sock, F_GETFL);
      if (nr == SYS_connect && flags >= 0 && !(flags & O_NONBLOCK)) {
        /* A blocking connect can wait on a full backlog: do it in a child so
         * that the guard keeps serving everyone else. */
        pid_t pid = fork();
        if (pid == 0) {
          respond(c, 0, do_connect(c, sock, &ss, (socklen_t)a[2], path, &t));
          _exit(0);
        }
        close(sock);
        target_close(&t);
        if (pid > 0) return;
        r = -errno;
        break;
      }
      if (nr == SYS_connect) r = do_connect(c, sock, &ss, (socklen_t)a[2], path, &t);
      else r = do_bind(c, sock, &ss, (socklen_t)a[2], path, &t);
      close(sock);
      break;
    }
    default:
      op_name = "syscall";
      r = -ENOSYS;
  }
  target_close(&t);
  target_close(&u);
  respond(c, 0, r);
}

void guard_run(const struct plan *p, int listener) {
  /* Keep sandboxed processes (same uid) out of our memory and fds. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die_step("guard", "PR_SET_DUMPABLE: %s", strerror(errno));
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
    struct call c = {.plan = p, .listener = listener, .req = req, .tid = (pid_t)req->pid};
    c.tgid = tgid_of(c.tid);
    if (c.tgid <= 0 || !still_valid(&c)) { respond(&c, 0, -ESRCH); continue; }
    handle(&c);
  }
}
