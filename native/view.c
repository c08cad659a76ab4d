/* The private mount view: a tmpfs root that holds exactly the planned paths.
 *
 * Runs in the sandbox's init (pid 1 of the new pid namespace), which holds every
 * capability of the new user namespace and nothing outside it. Host paths are
 * opened beneath the old root with RESOLVE_NO_SYMLINKS: the planner gave
 * canonical paths, so a symlink here means something changed since planning,
 * and that fails closed. Nothing is ever created inside a host bind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher.h"

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

#define STAGE "/tmp"  /* host dir we mount the staging tmpfs on (in our namespace only) */

static int old_root = -1;  /* the host's root, under the staging root */
static int new_root = -1;  /* the view being built */

/* mount(2) takes a path; this names an fd we already resolved safely. The
 * host's procfs still sits under the staging root while the view is built. */
static const char *fd_path(int fd) {
  static char buf[64];
  snprintf(buf, sizeof buf, "/old/proc/self/fd/%d", fd);
  return buf;
}

static int open_beneath(int dirfd, const char *path, int flags) {
  struct open_how how = {
      .flags = (unsigned long long)(flags | O_CLOEXEC),
      .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_BENEATH,
  };
  while (*path == '/') path++;
  if (!*path) path = ".";
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

/* True when path lies strictly inside an earlier bind of a host path. */
static int inside_host_bind(const struct plan *p, int upto, const char *path) {
  for (int i = 0; i < upto; i++) {
    const struct mount_op *o = &p->ops[i];
    if (o->kind != OP_RO && o->kind != OP_RW && o->kind != OP_MASK) continue;
    size_t n = strlen(o->path);
    if (!strncmp(path, o->path, n) && (path[n] == '/' || (n == 1 && path[0] == '/'))) return 1;
  }
  return 0;
}

/* Creates the missing parents of path in the view and returns an O_PATH fd of
 * its parent directory; *leaf points at the last component. */
static int parent_of(const struct plan *p, int opi, const char *path, const char **leaf) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  char *slash = strrchr(buf, '/');
  if (!slash || !slash[1]) die_step("view", "bad path %s", path);
  *leaf = path + (slash - buf) + 1;
  *slash = 0;
  int fd = open_beneath(new_root, "/", O_PATH | O_DIRECTORY);
  char *save = NULL;
  for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
    int next = open_beneath(fd, c, O_PATH | O_DIRECTORY);
    if (next < 0 && errno == ENOENT) {
      char sofar[4096];
      snprintf(sofar, sizeof sofar, "%.*s", (int)(c - buf + strlen(c)), path);
      if (inside_host_bind(p, opi, sofar))
        die_step("view", "%s does not exist inside a granted host path; refusing to create it on the host", sofar);
      if (mkdirat(fd, c, 0755) != 0 && errno != EEXIST) die_step("view", "mkdir %s: %s", sofar, strerror(errno));
      next = open_beneath(fd, c, O_PATH | O_DIRECTORY);
    }
    if (next < 0) die_step("view", "open %s in the view: %s", path, strerror(errno));
    close(fd);
    fd = next;
  }
  return fd;
}

/* Returns an O_PATH fd for the mount point at path, creating it (a directory
 * or an empty file) in the view when it is missing. */
static int mountpoint(const struct plan *p, int opi, const char *path, int dir) {
  const char *leaf;
  int parent = parent_of(p, opi, path, &leaf);
  int fd = open_beneath(parent, leaf, O_PATH);
  if (fd < 0 && errno == ENOENT) {
    if (inside_host_bind(p, opi, path))
      die_step("view", "%s does not exist inside a granted host path; refusing to create it on the host", path);
    int r = dir ? mkdirat(parent, leaf, 0755) : mknodat(parent, leaf, S_IFREG | 0444, 0);
    if (r != 0) die_step("view", "create mount point %s: %s", path, strerror(errno));
    fd = open_beneath(parent, leaf, O_PATH);
  }
  if (fd < 0) die_step("view", "open mount point %s: %s", path, strerror(errno));
  close(parent);
  return fd;
}

static void attach(int tree, int target, const char *path) {
  if (syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    die_step("view", "move_mount %s: %s", path, strerror(errno));
}

static void bind_host(const struct plan *p, int opi, const char *host, const char *path, int readonly) {
  int src = open_beneath(old_root, host, O_PATH);
  if (src < 0)
    die_step("view", "%s: %s%s", host, strerror(errno),
             errno == ELOOP ? " (a path component is now a symbolic link; it changed since planning)" : "");
  struct stat st;
  if (fstat(src, &st) != 0) die_step("view", "stat %s: %s", host, strerror(errno));
  int tree = (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  if (tree < 0) die_step("view", "open_tree %s: %s", host, strerror(errno));
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0)};
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    die_step("view", "mount_setattr %s: %s", host, strerror(errno));
  int target = mountpoint(p, opi, path, S_ISDIR(st.st_mode));
  attach(tree, target, path);
  close(target);
  close(tree);
  close(src);
}

static void bind_dev(const struct plan *p, int opi, const char *path) {
  int src = open_beneath(old_root, path, O_PATH);
  if (src < 0) die_step("view", "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(src, &st) != 0 || !S_ISCHR(st.st_mode)) die_step("view", "%s is not a character device", path);
  int tree = (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (tree < 0) die_step("view", "open_tree %s: %s", path, strerror(errno));
  /* Read-only: the device can still be opened for writing, but its inode
   * (mode, owner, times) cannot be changed. */
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC};
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    die_step("view", "mount_setattr %s: %s", path, strerror(errno));
  int target = mountpoint(p, opi, path, 0);
  attach(tree, target, path);
  close(target);
  close(tree);
  close(src);
}

static void mount_at(const struct plan *p, int opi, const char *path, const char *type, unsigned long flags,
                     const char *data, int dir) {
  int target = mountpoint(p, opi, path, dir);
  if (mount(type, fd_path(target), type, flags, data) != 0) die_step("view", "mount %s on %s: %s", type, path, strerror(errno));
  close(target);
}

static void tmpfs(const struct plan *p, int opi, const char *path, const char *size) {
  int shared = !strcmp(path, "/tmp") || !strcmp(path, "/dev/shm") || !strcmp(path, "/var/tmp");
  char data[128];
  if (shared) snprintf(data, sizeof data, "mode=1777,size=%s", size);
  else snprintf(data, sizeof data, "mode=0700,size=%s,uid=%u,gid=%u", size, (unsigned)p->uid, (unsigned)p->gid);
  mount_at(p, opi, path, "tmpfs", MS_NOSUID | MS_NODEV, data, 1);
}

static void mask(const struct plan *p, int opi, const char *path) {
  int fd = open_beneath(new_root, path, O_PATH);
  if (fd < 0) die_step("view", "mask %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) die_step("view", "mask %s: %s", path, strerror(errno));
  close(fd);
  if (S_ISDIR(st.st_mode)) {
    mount_at(p, opi, path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555", 1);
  } else {
    int empty = openat(new_root, "..", O_PATH | O_DIRECTORY | O_CLOEXEC); /* the staging root */
    int e = openat(empty, "empty", O_CREAT | O_RDONLY | O_CLOEXEC, 0444);
    if (e < 0) die_step("view", "mask %s: %s", path, strerror(errno));
    int tree = (int)syscall(SYS_open_tree, e, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
    if (tree < 0 || syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
      die_step("view", "mask %s: %s", path, strerror(errno));
    int target = mountpoint(p, opi, path, 0);
    attach(tree, target, path);
    close(target);
    close(tree);
    close(e);
    close(empty);
  }
}

static void make_file(const struct plan *p, int opi, const char *path, const char *content) {
  const char *leaf;
  int parent = parent_of(p, opi, path, &leaf);
  if (inside_host_bind(p, opi, path)) die_step("view", "refusing to write %s inside a granted host path", path);
  int fd = openat(parent, leaf, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
  if (fd < 0) die_step("view", "create %s: %s", path, strerror(errno));
  size_t n = strlen(content);
  if (write(fd, content, n) != (ssize_t)n) die_step("view", "write %s: %s", path, strerror(errno));
  close(fd);
  close(parent);
}

static void make_symlink(const struct plan *p, int opi, const char *path, const char *target) {
  const char *leaf;
  int parent = parent_of(p, opi, path, &leaf);
  if (inside_host_bind(p, opi, path)) die_step("view", "refusing to create %s inside a granted host path", path);
  if (symlinkat(target, parent, leaf) != 0) die_step("view", "symlink %s: %s", path, strerror(errno));
  close(parent);
}

static void make_dir(const struct plan *p, int opi, const char *path) {
  int fd = mountpoint(p, opi, path, 1);
  close(fd);
}

static void dev_extras(void) {
  static const char *links[][2] = {
      {"dev/fd", "/proc/self/fd"},       {"dev/stdin", "/proc/self/fd/0"}, {"dev/stdout", "/proc/self/fd/1"},
      {"dev/stderr", "/proc/self/fd/2"}, {"dev/ptmx", "pts/ptmx"},         {"dev/core", "/proc/kcore"},
  };
  for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
    if (symlinkat(links[i][1], new_root, links[i][0]) != 0 && errno != EEXIST)
      die_step("view", "symlink /%s: %s", links[i][0], strerror(errno));
  if (mkdirat(new_root, "dev/pts", 0755) != 0 && errno != EEXIST) die_step("view", "mkdir /dev/pts: %s", strerror(errno));
  int pts = open_beneath(new_root, "dev/pts", O_PATH | O_DIRECTORY);
  if (mount("devpts", fd_path(pts), "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0)
    die_step("view", "mount devpts: %s", strerror(errno));
  close(pts);
}

/* Over-mounts parts of /proc that a sandbox has no business writing. */
static void proc_readonly(const char *rel) {
  int fd = open_beneath(new_root, rel, O_PATH);
  if (fd < 0) return; /* absent on this kernel */
  int tree = (int)syscall(SYS_open_tree, fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
  if (tree < 0 || syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0)
    die_step("view", "read-only /%s: %s", rel, strerror(errno));
  attach(tree, fd, rel);
  close(tree);
  close(fd);
}

int build_view(const struct plan *p) {
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die_step("view", "make mounts private: %s", strerror(errno));
  if (mount("vak-stage", STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64k") != 0)
    die_step("view", "mount staging tmpfs: %s", strerror(errno));
  if (chdir(STAGE) != 0 || mkdir("old", 0700) != 0 || mkdir("new", 0755) != 0)
    die_step("view", "prepare staging: %s", strerror(errno));
  if (syscall(SYS_pivot_root, ".", "old") != 0) die_step("view", "pivot_root to staging: %s", strerror(errno));
  if (chdir("/") != 0) die_step("view", "chdir: %s", strerror(errno));
  if (mount("vak-root", "/new", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0)
    die_step("view", "mount root tmpfs: %s", strerror(errno));
  old_root = open("/old", O_PATH | O_DIRECTORY | O_CLOEXEC);
  new_root = open("/new", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (old_root < 0 || new_root < 0) die_step("view", "open roots: %s", strerror(errno));
  if (mkdirat(new_root, "dev", 0755) != 0) die_step("view", "mkdir /dev: %s", strerror(errno));
  int gate_dir = -1;
  if (p->net_gate) {
    gate_dir = open_beneath(old_root, p->net_gate, O_PATH | O_DIRECTORY);
    if (gate_dir < 0) die_step("network", "egress gate directory %s: %s", p->net_gate, strerror(errno));
  }

  for (int i = 0; i < p->nops; i++) {
    const struct mount_op *o = &p->ops[i];
    switch (o->kind) {
      case OP_RO: bind_host(p, i, o->path, o->path, 1); break;
      case OP_RW: bind_host(p, i, o->path, o->path, 0); break;
      case OP_TMPFS: tmpfs(p, i, o->path, o->arg); break;
      case OP_MASK: mask(p, i, o->path); break;
      case OP_DIR: make_dir(p, i, o->path); break;
      case OP_SYMLINK: make_symlink(p, i, o->path, o->arg); break;
      case OP_FILE: make_file(p, i, o->path, o->arg); break;
      case OP_DEV: bind_dev(p, i, o->path); break;
    }
  }

  /* procfs can only be mounted while a fully visible one (the host's) is in this namespace. */
  if (mkdirat(new_root, "proc", 0555) != 0 && errno != EEXIST) die_step("view", "mkdir /proc: %s", strerror(errno));
  if (mount("proc", "/new/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
    die_step("view", "mount /proc: %s", strerror(errno));
  limits_apply_pidns(p, "/new/proc"); /* before /proc/sys turns read-only */
  static const char *proc_ro[] = {"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus", "proc/fs"};
  for (size_t i = 0; i < sizeof proc_ro / sizeof proc_ro[0]; i++) proc_readonly(proc_ro[i]);
  dev_extras();

  if (chdir("/new") != 0) die_step("view", "chdir /new: %s", strerror(errno));
  if (syscall(SYS_pivot_root, ".", ".") != 0) die_step("view", "pivot_root: %s", strerror(errno));
  if (umount2(".", MNT_DETACH) != 0) die_step("view", "detach the host root: %s", strerror(errno));
  if (chdir("/") != 0) die_step("view", "chdir /: %s", strerror(errno));
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
    die_step("view", "make the root read-only: %s", strerror(errno));
  close(old_root);
  close(new_root);
  return gate_dir;
}

void bring_loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die_step("network", "socket: %s", strerror(errno));
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) die_step("network", "get lo flags: %s", strerror(errno));
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) die_step("network", "bring lo up: %s", strerror(errno));
  close(s);
}
