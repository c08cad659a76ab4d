/* The write guard's sockets: connect() and bind() on a path, and the
 * network namespace's one way out.
 *
 * A unix socket path may be connected to only if a sandboxed process bound it
 * through this guard (recorded by device, inode and ctime), so a host
 * service's socket is refused even inside a writable grant; the connection is
 * made to the inode that was checked. Inside the private network namespace
 * only loopback exists, where the relay to the egress gate listens. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "guard.h"

/* Socket files that sandboxed processes bound (through this guard): the only
 * unix socket paths they may connect to. Any other socket file belongs to a
 * host service, wherever it sits. Renames go through this guard too, so a
 * host socket cannot be swapped in between bind() and the record. The guard is
 * single-threaded; this record is its only memory across calls. */
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

static int same_socket(const struct socket_id *a, const struct socket_id *b) {
  /* Field by field: the struct has padding, which memcmp would compare too. */
  return a->dev_major == b->dev_major && a->dev_minor == b->dev_minor && a->ino == b->ino && a->ctime_sec == b->ctime_sec &&
         a->ctime_nsec == b->ctime_nsec;
}

static int own_socket(const struct socket_id *id) {
  unsigned n = own_next < MAX_OWN_SOCKETS ? own_next : MAX_OWN_SOCKETS;
  for (unsigned i = 0; i < n; i++)
    if (same_socket(&own_sockets[i], id)) return 1;
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
  struct socket_id id = {0};
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
  if (!path[0]) {
    r = RESULT(bind(sock, (const struct sockaddr *)ss, len));
    int type = 0;
    socklen_t tl = sizeof type;
    /* Landlock allows no TCP port to be bound: say so, rather than leave a server failing with EACCES. */
    int port = ss->ss_family == AF_INET ? ntohs(((const struct sockaddr_in *)ss)->sin_port)
               : ss->ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)ss)->sin6_port) : 0;
    /* Port 0 is a probe (urllib3 binds [::1]:0 to see whether there is IPv6), not a server: no line for it. */
    if (r == -EACCES && port != 0 && getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM) {
      char where[INET6_ADDRSTRLEN + 16] = "", addr[INET6_ADDRSTRLEN] = "";
      inet_ntop(ss->ss_family, ss->ss_family == AF_INET ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr, addr, sizeof addr);
      snprintf(where, sizeof where, "%s:%d", addr, port);
      log_denial(c, where, "listening for TCP connections: nothing can connect to a sandbox, so no TCP port may be bound inside it");
    }
    return r;
  }
  r = resolve(c, AT_FDCWD, path, 0, t);
  if (r) return r;
  if (t->parent < 0 || t->obj >= 0) return -EADDRINUSE;
  if ((r = allow(c, t, ACCESS_ENTRY))) return r;
  if ((r = nolinks_bind(c, t))) return r;
  struct sockaddr_un here = {.sun_family = AF_UNIX};
  if (strlen(t->name) >= sizeof here.sun_path) return -ENAMETOOLONG;
  snprintf(here.sun_path, sizeof here.sun_path, "%s", t->name);
  /* Bound relative to the directory we resolved and checked (so the socket's
   * own name is just the last component), and recorded as the sandbox's own. */
  umask(umask_of(c->tid));
  if (fchdir(t->parent) != 0) return -errno;
  r = RESULT(bind(sock, (const struct sockaddr *)&here, sizeof here));
  if (chdir("/") != 0) die_step("guard", "chdir: %s", strerror(errno));
  struct socket_id id = {0};
  if (!r && socket_id(t->parent, t->name, 0, &id) == 0) remember_socket(&id);
  return r;
}

static int connect_or_bind(struct call *c, const __u64 *a, struct target *t, int is_connect) {
  struct sockaddr_storage ss;
  char path[sizeof((struct sockaddr_un *)0)->sun_path + 1];
  int r = read_sockaddr(c, a[1], a[2], &ss, path, sizeof path);
  if (r) return r;
  int sock = caller_fd(c, (int)a[0]);
  if (sock < 0) return sock;
  int flags = fcntl(sock, F_GETFL);
  if (is_connect && flags >= 0 && !(flags & O_NONBLOCK)) {
    /* A blocking connect can wait on a full backlog: do it in a child so
     * that the guard keeps serving everyone else. */
    pid_t pid = fork();
    if (pid == 0) {
      respond(c, 0, do_connect(c, sock, &ss, (socklen_t)a[2], path, t));
      _exit(0);
    }
    int e = errno;
    close(sock);
    return pid > 0 ? ANSWERED : -e;
  }
  r = is_connect ? do_connect(c, sock, &ss, (socklen_t)a[2], path, t) : do_bind(c, sock, &ss, (socklen_t)a[2], path, t);
  close(sock);
  return r;
}

static int h_connect(struct call *c, const __u64 *a, struct target *t, struct target *u) { return connect_or_bind(c, a, t, 1); }
static int h_bind(struct call *c, const __u64 *a, struct target *t, struct target *u) { return connect_or_bind(c, a, t, 0); }

const struct guard_op SOCKET_OPS[] = {
    {SYS_connect, "connect", h_connect},
    {SYS_bind, "bind", h_bind},
};
const unsigned NSOCKET_OPS = sizeof SOCKET_OPS / sizeof SOCKET_OPS[0];
