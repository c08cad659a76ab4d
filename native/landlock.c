/* Landlock: the second filesystem layer, and TCP and scope restrictions.
 * Debian 12's headers stop at ABI 2, so the later constants are defined here. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher.h"

#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)    /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ULL << 0)   /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

#define FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)
#define READ_RIGHTS (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define WRITE_RIGHTS (LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR | LL_FS_MAKE_REG | \
                      LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_TRUNCATE)

struct ruleset_attr {
  __u64 handled_access_fs;
  __u64 handled_access_net;
  __u64 scoped;
};

int landlock_abi(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : (int)abi;
}

static __u64 fs_rights_for_abi(int abi) {
  __u64 all = (1ULL << 13) - 1;
  if (abi >= 2) all |= LL_FS_REFER;
  if (abi >= 3) all |= LL_FS_TRUNCATE;
  if (abi >= 5) all |= LL_FS_IOCTL_DEV;
  return all;
}

static void add_path_rule(int ruleset, const char *path, __u64 rights, __u64 handled, int no_symlinks) {
  struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
  if (no_symlinks) how.resolve |= RESOLVE_NO_SYMLINKS;
  int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd < 0) die_step("landlock", "open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) die_step("landlock", "stat %s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode)) rights &= FILE_RIGHTS;
  struct landlock_path_beneath_attr attr = {.allowed_access = rights & handled, .parent_fd = fd};
  if (attr.allowed_access &&
      syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0)
    die_step("landlock", "add rule for %s: %s", path, strerror(errno));
  close(fd);
}

static __u64 dev_rights(const char *path) {
  const char *name = path + strlen("/dev/");
  if (!strcmp(name, "random") || !strcmp(name, "urandom")) return LL_FS_READ_FILE;
  if (!strcmp(name, "tty")) return LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV;
  return LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE; /* null, zero, full */
}

#define LANDLOCK_RULE_NET_PORT 2
struct landlock_net_port_attr {
  __u64 allowed_access;
  __u64 port;
};

static void restrict_with(int rs) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die_step("landlock", "no_new_privs: %s", strerror(errno));
  if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) die_step("landlock", "restrict_self: %s", strerror(errno));
  close(rs);
}

/* A ruleset handling every file right in fs, all TCP binds and connects
 * (ABI 4+; no port rule is added unless the caller adds one), and signal and
 * abstract-socket scoping (ABI 6+). */
static int create_ruleset(int abi, __u64 fs) {
  struct ruleset_attr ra = {.handled_access_fs = fs};
  size_t size = sizeof ra.handled_access_fs;
  if (abi >= 4) {
    ra.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
    size = offsetof(struct ruleset_attr, scoped);
  }
  if (abi >= 6) {
    ra.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
    size = sizeof ra;
  }
  int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, size, 0);
  if (rs < 0) die_step("landlock", "create ruleset: %s", strerror(errno));
  return rs;
}

void apply_landlock(const struct plan *p, int with_proc) {
  int abi = landlock_abi();
  if (abi < 1) die_step("landlock", "the kernel does not support Landlock (needs Linux 5.13+ with lsm=landlock)");
  /* Without namespaces, Landlock's signal and abstract-socket scoping (ABI 6)
   * is what keeps the command away from the host's processes. */
  if (!p->use_ns && abi < 6) die_step("landlock", "reduced mode needs Landlock ABI 6 (Linux 6.12+); this kernel has ABI %d", abi);
  __u64 fs = fs_rights_for_abi(abi);
  int rs = create_ruleset(abi, fs);

  int ns = p->use_ns;
  if (ns) add_path_rule(rs, "/", LL_FS_READ_DIR, fs, 1);
  for (int i = 0; i < p->nops; i++) {
    const struct mount_op *o = &p->ops[i];
    switch (o->kind) {
      case OP_RO: case OP_MASK: case OP_DIR: case OP_FILE:
        add_path_rule(rs, o->path, READ_RIGHTS, fs, ns);
        break;
      case OP_RW: case OP_TMPFS:
        add_path_rule(rs, o->path, READ_RIGHTS | WRITE_RIGHTS, fs, ns);
        break;
      case OP_DEV:
        add_path_rule(rs, o->path, dev_rights(o->path), fs, 0);
        break;
      case OP_SYMLINK:
        break;
    }
  }
  if (ns) add_path_rule(rs, "/dev/pts", LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_IOCTL_DEV, fs, 1);
  if (with_proc) add_path_rule(rs, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR, fs, ns);
  /* The one TCP port the command may connect to: the relay to the egress gate. */
  if (p->net_gate && abi >= 4) {
    struct landlock_net_port_attr np = {.allowed_access = LL_NET_CONNECT_TCP, .port = (__u64)p->net_port};
    if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_NET_PORT, &np, 0) != 0)
      die_step("landlock", "allow port %d: %s", p->net_port, strerror(errno));
  }
  restrict_with(rs);
}

/* The relay's domain: no file system at all, no new TCP, scoped signals. */
void restrict_relay_landlock(void) {
  int abi = landlock_abi();
  if (abi < 1) die_step("landlock", "the kernel does not support Landlock");
  restrict_with(create_ruleset(abi, fs_rights_for_abi(abi)));
}
