/* The write guard's rule for a host tool's state (--protect-nolinks, a profile's
 * state_dirs and state_files): at and below such a path only regular files and
 * directories are made.
 *
 * The tool on the host writes into its state later, outside any sandbox, and
 * opens the names it always opens (Codex's sessions/YYYY/MM/DD/, Claude Code's
 * plans/NAME.md) without O_NOFOLLOW: a symbolic link a sandbox left there would
 * have it write wherever the link points (~/.bashrc, ~/.ssh), a hard link would
 * have it write a file of another name, and a FIFO, socket or device would hang
 * or break it. So none of those is made there, and none is moved in: a rename
 * into such a path from outside it answers EXDEV, as the kernel does between the
 * separate mounts of the namespace view (tools copy instead, and the copy's
 * creations are checked here), and one within it may move only regular files and
 * directories. Links the host made there itself stay, are followed as any other
 * (where they lead is checked as every path is), and are not moved within it. A hard link
 * out of it answers EXDEV too: the host tool's later writes would show through it.
 *
 * The directories on the way to it, where a writable grant holds them (a state
 * directory inside the workspace), are walked by the tool too: none is made a
 * symbolic link or moved, or a directory holding links could be moved away and
 * back, or put in its place.
 *
 * The workspace and --allow-write grants keep links: projects hold them, and the
 * host's tools do not write into a project by names of their own. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "guard.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

/* The deepest --protect-nolinks path at or above path, or NULL. */
const char *nolinks_root(const struct plan *p, const char *path) {
  const char *best = NULL;
  size_t best_len = 0;
  for (int i = 0; i < p->nrules; i++) {
    const struct protect_rule *r = &p->rules[i];
    if (r->kind != PROT_NOLINKS) continue;
    size_t n = strlen(r->pattern);
    int under = !strncmp(path, r->pattern, n) && (path[n] == 0 || path[n] == '/');
    if (under && n >= best_len) best = r->pattern, best_len = n;
  }
  return best;
}

/* A --protect-nolinks path that lies strictly below path, or NULL. */
static const char *nolinks_below(const struct plan *p, const char *path) {
  size_t n = strlen(path);
  if (n == 1) n = 0; /* "/" */
  for (int i = 0; i < p->nrules; i++) {
    const struct protect_rule *r = &p->rules[i];
    if (r->kind == PROT_NOLINKS && !strncmp(r->pattern, path, n) && r->pattern[n] == '/') return r->pattern;
  }
  return NULL;
}

/* The nolinks path a target lies at or below, or NULL (also when it has no path in the view). */
static const char *root_of(const struct call *c, const struct target *t) {
  char path[PATH_MAX];
  if (target_path(t, path, sizeof path) != 0 || path[0] != '/') return NULL;
  return nolinks_root(c->plan, path);
}

/* The nolinks path a target lies on the way to, or NULL. */
static const char *below_of(const struct call *c, const struct target *t) {
  char path[PATH_MAX];
  if (target_path(t, path, sizeof path) != 0 || path[0] != '/') return NULL;
  return nolinks_below(c->plan, path);
}

/* Reports the refusal of what was to be made at t, in root, and returns -EPERM. */
static int refuse(struct call *c, const struct target *t, const char *root, const char *would) {
  char path[PATH_MAX], why[PATH_MAX + 256];
  if (target_path(t, path, sizeof path) != 0 || !path[0]) snprintf(path, sizeof path, "%s", root);
  snprintf(why, sizeof why,
           "%s is a host tool's state: only regular files and directories are made there, since the tool on the host "
           "writes there later and %s",
           root, would);
  log_denial(c, path, why);
  return -EPERM;
}

/* Reports the refusal of a link at, or a move of, a directory on the way to root, and returns -EPERM. */
static int refuse_way(struct call *c, const struct target *t, const char *root) {
  char path[PATH_MAX], why[PATH_MAX + 256];
  if (target_path(t, path, sizeof path) != 0 || !path[0]) snprintf(path, sizeof path, "%s", root);
  snprintf(why, sizeof why,
           "%s is a host tool's state: the tool on the host reaches it through this directory later, so it is neither "
           "moved nor replaced by a link",
           root);
  log_denial(c, path, why);
  return -EPERM;
}

#define WOULD_FOLLOW "would follow a symbolic link out of the sandbox"
#define WOULD_HARDLINK "would write another file through a hard link"
#define WOULD_HANG "would hang or fail on a FIFO, socket or device"

/* Neither a regular file nor a directory: what a tool's state must not hold. */
static const char *odd_kind(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return NULL;
  if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) return NULL;
  return S_ISLNK(st.st_mode) ? WOULD_FOLLOW : WOULD_HANG;
}

int nolinks_symlink(struct call *c, const struct target *t) {
  const char *root = root_of(c, t);
  if (root) return refuse(c, t, root, WOULD_FOLLOW);
  return (root = below_of(c, t)) ? refuse_way(c, t, root) : 0;
}

/* src: the object linked (its fd checked); dst: the new name. (A file made with O_TMPFILE gets no name through
 * the guard anywhere: it is outside the view until it has one.) */
int nolinks_link(struct call *c, const struct target *src, const struct target *dst) {
  const char *root = root_of(c, dst);
  /* Out of it: as between two mounts. */
  if (!root) return root_of(c, src) ? -EXDEV : 0;
  struct stat st = {0};
  int link = fstat(src->obj, &st) == 0 && S_ISLNK(st.st_mode);
  return refuse(c, dst, root, link ? WOULD_FOLLOW : WOULD_HARDLINK);
}

int nolinks_mknod(struct call *c, const struct target *t, mode_t mode) {
  const char *root = root_of(c, t);
  if (!root || (mode & S_IFMT) == 0 || (mode & S_IFMT) == S_IFREG) return 0;
  return refuse(c, t, root, WOULD_HANG);
}

int nolinks_bind(struct call *c, const struct target *t) {
  const char *root = root_of(c, t);
  return root ? refuse(c, t, root, WOULD_HANG) : 0;
}

/* from: the old name (its object checked), to: the new name. */
int nolinks_rename(struct call *c, const struct target *from, const struct target *to, unsigned flags) {
  const char *rf = root_of(c, from), *rt = root_of(c, to), *way;
  /* The way to it stays: moved away, a directory could come back holding links, or another take its place. */
  if ((way = below_of(c, from))) return refuse_way(c, from, way);
  if ((way = below_of(c, to))) return refuse_way(c, to, way);
  if (!rf && !rt) return 0;
  /* A whiteout is a device left at the old name. */
  if (rf && (flags & RENAME_WHITEOUT)) return refuse(c, from, rf, WOULD_HANG);
  /* Into a tool's state from outside it (or out of one into another): as between two mounts. What a move
   * brings from outside (a directory holding links) is not looked at; copied, each entry is checked. */
  int same = rf && rt && !strcmp(rf, rt);
  if ((rt && !same) || ((flags & RENAME_EXCHANGE) && rf && !same)) return -EXDEV;
  /* Within it: only regular files and directories move (a link the host made there stays where it is). */
  const char *why;
  if (rt && (why = odd_kind(from->obj))) return refuse(c, from, rt, why);
  if ((flags & RENAME_EXCHANGE) && rf && (why = odd_kind(to->obj))) return refuse(c, to, rf, why);
  return 0;
}
