/* The write guard's parts (see guard.c for what it is and why). Only the
 * guard's own files include this. */
#ifndef VAK_GUARD_H
#define VAK_GUARD_H

#include <limits.h>
#include <linux/seccomp.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "launcher.h"

#define MAX_RETRIES 8

/* One notification being answered. */
struct call {
  const struct plan *plan;
  int listener;
  struct seccomp_notif *req;
  pid_t tid;
  pid_t tgid;
  const char *op; /* the name a denial reports (from the dispatch table) */
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

enum access {
  ACCESS_CONTENT,  /* open for writing, truncate */
  ACCESS_METADATA, /* chmod, chown, utimes, xattrs */
  ACCESS_ENTRY,    /* create, remove, rename, link, bind */
};

#define RESULT(expr) ((expr) == 0 ? 0 : -errno)

/* A handler's return when it has answered the caller itself (an fd installed,
 * or the answer left to a child doing blocking work). */
#define ANSWERED 1

/* A handler: 0 or -errno for the caller, or ANSWERED. t and u are closed by
 * the dispatcher afterwards. */
typedef int (*guard_handler)(struct call *c, const __u64 *a, struct target *t, struct target *u);

/* guard.c: answering and reporting */
void respond(struct call *c, long long val, int err);
void respond_fd(struct call *c, int fd, int flags);
void log_denial(struct call *c, const char *path, const char *why);

/* guard_explain.c: --explain's lookups, answered CONTINUE; 1 when this call was one */
int explain_lookup(struct call *c);
/* guard_noread.c: an open for reading or an execve of a --deny-read path in the view, refused with a line; 1 when it was */
int refuse_denied_read(struct call *c, int dir_arg, int path_arg);

/* guard_caller.c: reading the caller */
int read_mem(pid_t tid, __u64 addr, void *buf, size_t len);
int read_str(pid_t tid, __u64 addr, char *buf, size_t cap);
pid_t tgid_of(pid_t tid);
mode_t umask_of(pid_t tid);
int caller_fd(struct call *c, int fd);
int still_valid(struct call *c);

/* guard_path.c: resolving a path the way the kernel would */
void target_init(struct target *t);
void target_close(struct target *t);
int fd_path(int fd, char *out, size_t cap);
int resolve(struct call *c, long dirfd, const char *path, int follow_last, struct target *t);
int target_path(const struct target *t, char *out, size_t cap);
const char *self_fd(int fd);
int obj_is_link(const struct target *t);

/* guard_rules.c: what may be changed */
/* op: the name the call reports (renames and symlinks may not place a tree under a protected name). */
const char *check(const struct plan *p, const char *op, const char *path, enum access access, char *why, size_t cap);
int allow(struct call *c, const struct target *t, enum access access);

/* guard_links.c: a host tool's state (--protect-nolinks) takes only regular files and directories.
 * Each returns 0, -EXDEV (a rename into it from outside), or -EPERM with a line. */
const char *nolinks_root(const struct plan *p, const char *path);
int nolinks_symlink(struct call *c, const struct target *t);
int nolinks_link(struct call *c, const struct target *src, const struct target *dst);
int nolinks_mknod(struct call *c, const struct target *t, mode_t mode);
int nolinks_bind(struct call *c, const struct target *t);
int nolinks_rename(struct call *c, const struct target *from, const struct target *to, unsigned flags);

/* Set-id bits and file capabilities are never planted: a set-id or
 * capability-carrying file in the workspace would run with its owner's, its
 * group's or its capabilities' rights when the host executes it later (root's
 * when vak runs as root: the uid map is 0 to 0). Inside the sandbox they do
 * nothing (nosuid mounts, no_new_privs). The bits a call would add, given the
 * mode the object has now (0 for a new one). */
#define SETID_BITS (S_ISUID | S_ISGID)
mode_t setid_added(mode_t requested, mode_t current);
/* Reports the refusal of t (why: one of the reasons below) and returns -EPERM. */
int refuse_setid(struct call *c, const struct target *t, const char *why);
#define WHY_SETID "set-id bits are refused: a setuid or setgid file runs with its owner's or group's rights when the host executes it"
#define WHY_FCAPS "file capabilities (security.capability) are refused: the host would grant them to whoever runs the file"
#define WHY_SETID_NAME "a new name for a set-id file is refused: the host would run it with its owner's or group's rights"

/* guard_open.c, guard_files.c and guard_sockets.c: which system call each handler answers,
 * and the name its denials report. */
struct guard_op {
  int nr;
  const char *op;
  guard_handler fn;
};
extern const struct guard_op OPEN_OPS[];
extern const unsigned NOPEN_OPS;
extern const struct guard_op FILE_OPS[];
extern const unsigned NFILE_OPS;
extern const struct guard_op SOCKET_OPS[];
extern const unsigned NSOCKET_OPS;
/* guard_refusals.c: calls it only refuses, to say why (a nested namespace). */
extern const struct guard_op REFUSAL_OPS[];
extern const unsigned NREFUSAL_OPS;

#endif
