// The resident host's native half (an addon loaded by src/resident/): what
// Node cannot do on a unix socket. It reads a connection's peer credentials
// (SO_PEERCRED) and receives one request with its file descriptors
// (SCM_RIGHTS), bounded in bytes, descriptors and time, off the event loop.
// It also starts the sandbox launcher for the host with posix_spawn (a vfork:
// fork(2) of the host copies its page tables, 2-8 ms of a warm run on a busy
// machine, with the event loop stopped) and tells when it exits (a pidfd,
// polled on the loop). It decides nothing: the host's TypeScript checks who the peer is and what
// the request says, and refuses what does not add up.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

extern char **environ;

#define HEADER_BYTES 24
/** More descriptors than any request carries: extras are received, so that they can be closed and refused. */
#define MAX_FDS 16

static napi_value throw_errno(napi_env env, const char *what) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(errno));
  napi_throw_error(env, "ERESIDENT", msg);
  return NULL;
}

static int arg_int(napi_env env, napi_value v, int64_t *out) { return napi_get_value_int64(env, v, out) == napi_ok ? 0 : -1; }

/** peer(fd) -> {pid, uid, gid}: who is at the other end of a connected unix socket, as the kernel saw it connect. */
static napi_value peer(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out, v;
  int64_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || arg_int(env, argv[0], &fd)) {
    napi_throw_type_error(env, NULL, "peer(fd)");
    return NULL;
  }
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt((int)fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return throw_errno(env, "getsockopt SO_PEERCRED");
  napi_create_object(env, &out);
  napi_create_int64(env, cr.pid, &v), napi_set_named_property(env, out, "pid", v);
  napi_create_int64(env, cr.uid, &v), napi_set_named_property(env, out, "uid", v);
  napi_create_int64(env, cr.gid, &v), napi_set_named_property(env, out, "gid", v);
  return out;
}

struct recv_job {
  int fd;
  uint32_t max_body;
  int timeout_ms;
  napi_async_work work;
  napi_ref callback;
  /* results */
  const char *error; /* a stable code, or NULL */
  int err_no;
  unsigned char header[HEADER_BYTES];
  size_t header_got;
  unsigned char *body;
  size_t body_len, body_got;
  int fds[MAX_FDS];
  int nfds;
  int ctrunc;
};

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/** Waits for data until the deadline: 1 readable, 0 timed out, -1 error. */
static int wait_readable(int fd, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, (int)left);
    if (r < 0 && errno == EINTR) continue;
    return r < 0 ? -1 : r > 0;
  }
}

static void collect_fds(struct recv_job *j, struct msghdr *m) {
  if (m->msg_flags & MSG_CTRUNC) j->ctrunc = 1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int *fds = (int *)CMSG_DATA(c);
    for (size_t i = 0; i < n; i++) {
      if (j->nfds < MAX_FDS) j->fds[j->nfds++] = fds[i];
      else close(fds[i]), j->ctrunc = 1;
    }
  }
}

/** Reads into buf until len bytes, collecting descriptors sent with any of them. */
static int read_full(struct recv_job *j, unsigned char *buf, size_t len, size_t *got, int64_t deadline) {
  union {
    char space[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    struct cmsghdr align;
  } control;
  while (*got < len) {
    int w = wait_readable(j->fd, deadline);
    if (w == 0) return j->error = "timeout", -1;
    if (w < 0) return j->error = "io", j->err_no = errno, -1;
    struct iovec iov = {.iov_base = buf + *got, .iov_len = len - *got};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space};
    ssize_t n = recvmsg(j->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return j->error = "io", j->err_no = errno, -1;
    collect_fds(j, &m);
    if (n == 0) return j->error = "short", -1;
    *got += (size_t)n;
  }
  return 0;
}

static void recv_execute(napi_env env, void *data) {
  struct recv_job *j = data;
  int64_t deadline = now_ms() + j->timeout_ms;
  if (read_full(j, j->header, HEADER_BYTES, &j->header_got, deadline)) return;
  uint32_t body;
  memcpy(&body, j->header + 16, 4);
  j->body_len = body;
  if (body > j->max_body) {
    j->error = "too-large";
    return;
  }
  j->body = malloc(body ? body : 1);
  if (!j->body) {
    j->error = "io", j->err_no = ENOMEM;
    return;
  }
  read_full(j, j->body, body, &j->body_got, deadline);
}

static void recv_complete(napi_env env, napi_status status, void *data) {
  struct recv_job *j = data;
  napi_value cb, global, out, v, arr;
  napi_get_reference_value(env, j->callback, &cb);
  napi_get_global(env, &global);
  napi_create_object(env, &out);
  if (j->error) napi_create_string_utf8(env, j->error, NAPI_AUTO_LENGTH, &v);
  else napi_get_null(env, &v);
  napi_set_named_property(env, out, "error", v);
  napi_create_int32(env, j->err_no, &v), napi_set_named_property(env, out, "errno", v);
  void *copy;
  napi_create_buffer_copy(env, j->header_got, j->header, &copy, &v), napi_set_named_property(env, out, "header", v);
  napi_create_buffer_copy(env, j->body ? j->body_got : 0, j->body ? (void *)j->body : (void *)j->header, &copy, &v);
  napi_set_named_property(env, out, "body", v);
  napi_create_array_with_length(env, (size_t)j->nfds, &arr);
  for (int i = 0; i < j->nfds; i++) napi_create_int32(env, j->fds[i], &v), napi_set_element(env, arr, (uint32_t)i, v);
  napi_set_named_property(env, out, "fds", arr);
  napi_get_boolean(env, j->ctrunc, &v), napi_set_named_property(env, out, "truncated", v);
  napi_call_function(env, global, cb, 1, &out, NULL);
  napi_delete_reference(env, j->callback);
  napi_delete_async_work(env, j->work);
  free(j->body);
  free(j);
}

/**
 * receive(fd, maxBody, timeoutMs, callback): reads a 24-byte header (its bytes
 * 16..19 are the body's length, little-endian) and then the body, with every
 * descriptor that came along; callback({error, errno, header, body, fds, truncated}).
 * The caller owns (and must close) every descriptor in fds, whatever the error.
 */
static napi_value receive(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4], name;
  int64_t fd, max, timeout;
  napi_valuetype t;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 || arg_int(env, argv[0], &fd) ||
      arg_int(env, argv[1], &max) || arg_int(env, argv[2], &timeout) || napi_typeof(env, argv[3], &t) != napi_ok || t != napi_function ||
      max < 0 || max > (1 << 30) || timeout <= 0 || timeout > 600000) {
    napi_throw_type_error(env, NULL, "receive(fd, maxBody, timeoutMs, callback)");
    return NULL;
  }
  struct recv_job *j = calloc(1, sizeof *j);
  if (!j) return throw_errno(env, "receive");
  j->fd = (int)fd, j->max_body = (uint32_t)max, j->timeout_ms = (int)timeout;
  napi_create_reference(env, argv[3], 1, &j->callback);
  napi_create_string_utf8(env, "vak-resident-receive", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, recv_execute, recv_complete, j, &j->work);
  napi_queue_async_work(env, j->work);
  return NULL;
}

/** A string array argument as a NULL-ended vector of copies (free_strings frees it). */
static char **strings(napi_env env, napi_value arr) {
  uint32_t n;
  if (napi_get_array_length(env, arr, &n) != napi_ok || n > 65536) return NULL;
  char **v = calloc((size_t)n + 1, sizeof *v);
  if (!v) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value e;
    size_t len;
    if (napi_get_element(env, arr, i, &e) != napi_ok || napi_get_value_string_utf8(env, e, NULL, 0, &len) != napi_ok) goto bad;
    v[i] = malloc(len + 1);
    if (!v[i] || napi_get_value_string_utf8(env, e, v[i], len + 1, &len) != napi_ok || strlen(v[i]) != len) goto bad; /* no NUL inside */
  }
  return v;
bad:
  for (uint32_t i = 0; i < n; i++) free(v[i]);
  free(v);
  return NULL;
}

static void free_strings(char **v) {
  for (char **p = v; p && *p; p++) free(*p);
  free(v);
}

/**
 * spawn(path, argv, env, fds) -> {pid, pidfd}: path run with argv and env (arrays of strings), cwd /, the
 * child's descriptor i being fds[i] and every other one closed (not only those marked close-on-exec),
 * signals at their defaults and none blocked, as Node's spawn leaves them. The caller watches pidfd (exited).
 */
static napi_value spawn_child(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4], out, v;
  size_t plen;
  char path[4096];
  uint32_t nfds;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 ||
      napi_get_value_string_utf8(env, argv[0], path, sizeof path, &plen) != napi_ok || plen >= sizeof path - 1 ||
      napi_get_array_length(env, argv[3], &nfds) != napi_ok || nfds > 64) {
    napi_throw_type_error(env, NULL, "spawn(path, argv, env, fds)");
    return NULL;
  }
  int fds[64], top = 0;
  for (uint32_t i = 0; i < nfds; i++) {
    napi_value e;
    int64_t fd;
    if (napi_get_element(env, argv[3], i, &e) != napi_ok || arg_int(env, e, &fd) || fd < 0 || fd > 1 << 20) {
      napi_throw_type_error(env, NULL, "spawn: fds must be open descriptors");
      return NULL;
    }
    fds[i] = (int)fd;
    if (fds[i] > top) top = fds[i];
  }
  char **args = strings(env, argv[1]), **envp = strings(env, argv[2]);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t none, all;
  int e = args && envp && args[0] ? 0 : EINVAL;
  if (!e) e = posix_spawn_file_actions_init(&fa);
  if (!e) {
    /* Each one above every source first, then into place: a dup2 onto itself would keep its close-on-exec. */
    for (uint32_t i = 0; i < nfds && !e; i++) e = posix_spawn_file_actions_adddup2(&fa, fds[i], top + 1 + (int)i);
    for (uint32_t i = 0; i < nfds && !e; i++) e = posix_spawn_file_actions_adddup2(&fa, top + 1 + (int)i, (int)i);
    /* And nothing else: a descriptor this process inherited without close-on-exec (its caller's file, socket
     * or pipe) would stay open in the launcher's monitor, init, resolver and relay. */
    if (!e) e = posix_spawn_file_actions_addclosefrom_np(&fa, (int)nfds);
    if (!e) e = posix_spawn_file_actions_addchdir_np(&fa, "/");
    if (!e) e = posix_spawnattr_init(&at);
    if (!e) {
      sigemptyset(&none);
      sigfillset(&all);
      posix_spawnattr_setsigmask(&at, &none);
      posix_spawnattr_setsigdefault(&at, &all);
      e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
      pid_t pid = -1;
      if (!e) e = posix_spawn(&pid, path, &fa, &at, args, envp);
      posix_spawnattr_destroy(&at);
      posix_spawn_file_actions_destroy(&fa);
      if (!e) {
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
          /* Unwatchable: it must not run unwatched. */
          e = errno;
          kill(pid, SIGKILL);
          waitpid(pid, NULL, 0);
        } else {
          fcntl(pidfd, F_SETFD, FD_CLOEXEC);
          free_strings(args);
          free_strings(envp);
          napi_create_object(env, &out);
          napi_create_int64(env, pid, &v), napi_set_named_property(env, out, "pid", v);
          napi_create_int64(env, pidfd, &v), napi_set_named_property(env, out, "pidfd", v);
          return out;
        }
      }
    } else posix_spawn_file_actions_destroy(&fa);
  }
  free_strings(args);
  free_strings(envp);
  errno = e;
  return throw_errno(env, "spawn");
}

struct watch_job {
  uv_poll_t poll;
  int pidfd;
  napi_env env;
  napi_ref callback;
};

static void watch_closed(uv_handle_t *h) { free(h->data); }

static void watch_ready(uv_poll_t *p, int status, int events) {
  struct watch_job *w = p->data;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid((idtype_t)3 /* P_PIDFD */, (id_t)w->pidfd, &si, WEXITED | WNOHANG) != 0 && errno == EINTR) return;
  if (si.si_pid == 0 && status == 0) return; /* not yet */
  uv_poll_stop(p);
  close(w->pidfd);
  napi_handle_scope scope;
  napi_open_handle_scope(w->env, &scope);
  napi_value cb, global, args[2];
  napi_get_reference_value(w->env, w->callback, &cb);
  napi_get_global(w->env, &global);
  int exited = si.si_code == CLD_EXITED;
  napi_create_int32(w->env, exited ? si.si_status : -1, &args[0]);
  napi_create_int32(w->env, exited ? -1 : si.si_status, &args[1]);
  napi_delete_reference(w->env, w->callback);
  napi_env env = w->env;
  uv_close((uv_handle_t *)p, watch_closed);
  napi_value r;
  if (napi_make_callback(env, NULL, global, cb, 2, args, &r) != napi_ok) {
    /* An exception in the callback: Node reports it as uncaught. */
  }
  napi_close_handle_scope(env, scope);
}

/** exited(pidfd, callback(code, signal)): once the child exits, reaps it, closes pidfd and calls back (code -1 when signalled). */
static napi_value exited(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int64_t fd;
  napi_valuetype t;
  uv_loop_t *loop;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || arg_int(env, argv[0], &fd) ||
      napi_typeof(env, argv[1], &t) != napi_ok || t != napi_function || napi_get_uv_event_loop(env, &loop) != napi_ok) {
    napi_throw_type_error(env, NULL, "exited(pidfd, callback)");
    return NULL;
  }
  struct watch_job *w = calloc(1, sizeof *w);
  if (!w) return throw_errno(env, "exited");
  w->pidfd = (int)fd, w->env = env, w->poll.data = w;
  napi_create_reference(env, argv[1], 1, &w->callback);
  if (uv_poll_init(loop, &w->poll, w->pidfd) != 0 || uv_poll_start(&w->poll, UV_READABLE, watch_ready) != 0) {
    napi_delete_reference(env, w->callback);
    free(w);
    errno = EINVAL;
    return throw_errno(env, "exited: poll the pidfd");
  }
  return NULL;
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/**
 * cloexecFrom(n): every descriptor from n up is marked close-on-exec, so that what this process inherited (a
 * caller's file, socket or pipe left open across its exec) reaches no program it starts: Node's spawn passes on
 * every descriptor not so marked (the container engine, a broker's launcher, an MCP server). Node's own are marked
 * already. One close_range(2) where the kernel has CLOSE_RANGE_CLOEXEC (5.11), else each of /proc/self/fd.
 */
static napi_value cloexec_from(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t from = 3;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_int32(env, argv[0], &from) != napi_ok || from < 0) {
    errno = EINVAL;
    return throw_errno(env, "cloexecFrom");
  }
  if (syscall(SYS_close_range, (unsigned)from, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return NULL;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return throw_errno(env, "cloexecFrom: /proc/self/fd");
  int self = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    if (*end || end == e->d_name || fd < from || fd == self) continue;
    int flags = fcntl((int)fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC) && fcntl((int)fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
      int err = errno;
      closedir(d);
      errno = err;
      return throw_errno(env, "cloexecFrom: fcntl");
    }
  }
  closedir(d);
  return NULL;
}

/**
 * nonDumpable(): this process's memory is written to no core file, and no other process of the user may ptrace it
 * or read its /proc/PID/mem: a vak process holds a run CA's private key, gate-held secrets and provider keys. What
 * it starts is dumpable again from its exec (a new image), as the kernel resets it.
 */
static napi_value non_dumpable(napi_env env, napi_callback_info info) {
  (void)info;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return throw_errno(env, "nonDumpable: PR_SET_DUMPABLE");
  return NULL;
}

/** pipe() -> [read, write]: a pipe, both ends close-on-exec (spawn hands one on by its fds). */
static napi_value make_pipe(napi_env env, napi_callback_info info) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return throw_errno(env, "pipe");
  napi_value arr, v;
  napi_create_array_with_length(env, 2, &arr);
  napi_create_int32(env, p[0], &v), napi_set_element(env, arr, 0, v);
  napi_create_int32(env, p[1], &v), napi_set_element(env, arr, 1, v);
  return arr;
}

static napi_value init(napi_env env, napi_value exports) {
  const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"peer", peer}, {"receive", receive}, {"spawn", spawn_child}, {"exited", exited}, {"pipe", make_pipe}, {"cloexecFrom", cloexec_from}, {"nonDumpable", non_dumpable}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) != napi_ok) return NULL;
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
