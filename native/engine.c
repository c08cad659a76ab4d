/* The egress gate's engine: a Node addon with one native thread.
 *
 * It does the two things the gate cannot do well in JavaScript:
 *  - It takes client connections from sandbox relays. A relay does not copy a
 *    client's bytes; it sends the accepted socket itself (SCM_RIGHTS) over a
 *    SOCK_SEQPACKET unix socket, one message per client: "VAK-TOKEN <token>"
 *    and exactly one fd, which must be a connected TCP socket. The gate then
 *    reads the client directly. No host socket ever goes the other way.
 *  - It splices granted CONNECT tunnels. Once the gate has decided and
 *    connected, it hands both sockets here and the bytes move socket -> pipe ->
 *    socket in the kernel, without passing through JavaScript. It counts
 *    bytes against the connection's budget (one counter per connection,
 *    shared with the gate's own reads), ends idle tunnels, and ends any
 *    tunnel the gate cancels (a revoked worker). It parses nothing, except
 *    the framing of a chunked body it carries for plain HTTP (chunked.c),
 *    which it must own to stop exactly at the body's end.
 *
 * JavaScript hears of new clients and ended tunnels through one callback,
 * called on the main thread. */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <node_api.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tunnel.h"

#define MAX_MESSAGE 160
#define MAX_FDS 4 /* room to see (and close) what a hostile sender attaches beyond its one */
/* Clients (and refusals) reported to JavaScript and not yet taken: past this,
 * relays are not read, so a relay's blocking send holds it back instead of vak
 * holding fds or queueing events without end. */
#define MAX_PENDING_CLIENTS 64
#define ACCEPT_PAUSE_MS 100 /* after running out of fds: accept again later, not in a loop */
enum { EV_CLIENT = 1, EV_REFUSED = 2, EV_END = 3 };

struct event {
  int kind;
  int fd; /* EV_CLIENT */
  int id; /* EV_END */
  double up, down, data;
  char text[MAX_MESSAGE + 1]; /* the token, the refusal or the outcome */
};

struct list {
  void **items;
  size_t n, cap;
};

struct engine {
  int listen_fd, wake_fd;
  pthread_t thread;
  int running;
  pthread_mutex_t mu;
  struct list incoming; /* tunnels handed over, not yet picked up by the thread (under mu) */
  int *cancels;         /* ids to cancel (under mu) */
  size_t ncancels, capcancels;
  int cancel_all;       /* (under mu) */
  int stopping, next_id; /* under mu */
  int pending;           /* clients and refusals reported, not yet taken by JavaScript (atomic) */
  napi_threadsafe_function tsfn;
  /* The thread's own. */
  struct list tunnels;
  int *relays;
  size_t nrelays, caprelays;
};

static int push(struct list *l, void *item) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    void **items = realloc(l->items, cap * sizeof *items);
    if (!items) return -1;
    l->items = items, l->cap = cap;
  }
  l->items[l->n++] = item;
  return 0;
}

static void emit(struct engine *e, struct event *ev) {
  if (napi_call_threadsafe_function(e->tsfn, ev, napi_tsfn_nonblocking) != napi_ok) {
    if (ev->kind == EV_CLIENT) close(ev->fd);
    if (ev->kind != EV_END) __atomic_sub_fetch(&e->pending, 1, __ATOMIC_RELAXED);
    free(ev);
  }
}

static void emit_text(struct engine *e, int kind, int fd, const char *text) {
  struct event *ev = calloc(1, sizeof *ev);
  if (!ev) {
    if (kind == EV_CLIENT) close(fd);
    __atomic_sub_fetch(&e->pending, 1, __ATOMIC_RELAXED);
    return;
  }
  ev->kind = kind;
  ev->fd = fd;
  snprintf(ev->text, sizeof ev->text, "%s", text);
  emit(e, ev);
}

/* --- clients from relays --- */

/* Reads one relay message; returns -1 when the relay connection is done. */
static int take_message(struct engine *e, int relay) {
  char buf[MAX_MESSAGE + 1];
  union {
    char space[CMSG_SPACE(MAX_FDS * sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec iov = {.iov_base = buf, .iov_len = MAX_MESSAGE};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space};
  ssize_t n = recvmsg(relay, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? 1 : -1;
  if (n == 0 && m.msg_controllen == 0) return -1;
  int fds[MAX_FDS * 2], nfds = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k && nfds < (int)(sizeof fds / sizeof fds[0]); i++) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  buf[n] = 0;
  const char *why = NULL;
  if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) why = "a relay message that was too long, or carried too many fds";
  else if (nfds != 1) why = "a relay message without exactly one fd";
  else if (strlen(buf) != (size_t)n) why = "a relay message with a NUL byte";
  else why = not_a_tcp_connection(fds[0]);
  __atomic_add_fetch(&e->pending, 1, __ATOMIC_RELAXED);
  if (why) {
    for (int i = 0; i < nfds; i++) close(fds[i]);
    emit_text(e, EV_REFUSED, -1, why);
    return 0;
  }
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  emit_text(e, EV_CLIENT, fds[0], buf);
  return 0;
}

/* --- tunnels --- */

static void end_tunnel(struct engine *e, struct tunnel *t, const char *outcome) {
  /* Only a tunnel whose two sides both ended is closed cleanly. Any other end
   * (an error, a limit, idle, revoked, the gate closing) resets both, so that
   * neither peer takes a cut stream for a complete one. */
  if (strcmp(outcome, "completed") != 0 && !t->transfer) reset_on_close(t);
  struct event *ev = calloc(1, sizeof *ev);
  if (ev) {
    ev->kind = EV_END;
    ev->id = t->id;
    /* A chunked transfer reads framing as well as data: up is every byte read (the budget's), data the data alone. */
    ev->up = t->up.chunk ? t->received : t->up.moved;
    ev->down = t->down.moved;
    ev->data = t->up.moved;
    snprintf(ev->text, sizeof ev->text, "%s", outcome);
    emit(e, ev);
  }
  free_tunnel(t);
}

/* --- the thread --- */

static void *run(void *arg) {
  struct engine *e = arg;
  struct pollfd *fds = NULL;
  size_t capfds = 0;
  int64_t accept_paused_until = 0;
  for (;;) {
    pthread_mutex_lock(&e->mu);
    int stopping = e->stopping;
    for (size_t i = 0; i < e->incoming.n; i++) {
      struct tunnel *t = e->incoming.items[i];
      int big = e->tunnels.n < BIG_PIPE_TUNNELS;
      if (open_pipes(t, big) != 0) {
        char why[MAX_MESSAGE];
        snprintf(why, sizeof why, "error: no pipe for the tunnel: %s", strerror(errno));
        end_tunnel(e, t, why);
      } else if (push(&e->tunnels, t) != 0) {
        end_tunnel(e, t, "error: out of memory");
      }
    }
    e->incoming.n = 0;
    for (size_t i = 0; i < e->tunnels.n; i++) {
      struct tunnel *t = e->tunnels.items[i];
      for (size_t c = 0; c < e->ncancels && !t->cancelled; c++) t->cancelled = t->id == e->cancels[c];
      if (e->cancel_all) t->cancelled = 1;
    }
    e->ncancels = 0, e->cancel_all = 0;
    pthread_mutex_unlock(&e->mu);
    if (stopping) break;

    size_t need = 2 + e->nrelays + 2 * e->tunnels.n;
    if (need > capfds) {
      struct pollfd *grown = realloc(fds, need * sizeof *fds);
      if (!grown) break;
      fds = grown, capfds = need;
    }
    size_t n = 0;
    int64_t now = now_ms(), timeout = -1;
    int taking = __atomic_load_n(&e->pending, __ATOMIC_RELAXED) < MAX_PENDING_CLIENTS;
    if (now < accept_paused_until) timeout = accept_paused_until - now;
    fds[n++] = (struct pollfd){.fd = e->wake_fd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = now < accept_paused_until ? -1 : e->listen_fd, .events = POLLIN};
    for (size_t i = 0; i < e->nrelays; i++) fds[n++] = (struct pollfd){.fd = taking ? e->relays[i] : -1, .events = POLLIN};
    for (size_t i = 0; i < e->tunnels.n; i++) {
      struct tunnel *t = e->tunnels.items[i];
      /* Poll reports a hang-up at once, every time: a hung-up side that this
       * tunnel cannot read from or write to just now (its pipe is full, or it is
       * done) is left out until the other side moves (poll ignores a negative fd). */
      short ce = wanted(&t->up, &t->down), ue = wanted(&t->down, &t->up);
      fds[n++] = (struct pollfd){.fd = !ce && t->hup[0] ? -1 : t->fd[0], .events = ce};
      fds[n++] = (struct pollfd){.fd = !ue && t->hup[1] ? -1 : t->fd[1], .events = ue};
      int64_t left = t->cancelled ? 0 : t->last + t->idle_ms - now;
      if (left < 0) left = 0;
      if (timeout < 0 || left < timeout) timeout = left;
    }
    if (poll(fds, n, timeout > INT32_MAX ? INT32_MAX : (int)timeout) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      if (read(e->wake_fd, &v, sizeof v) < 0) { /* nothing to do: the counter was read */
      }
    }
    if (fds[1].revents & POLLIN) {
      int r = accept4(e->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (r < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM))
        accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
      if (r >= 0) {
        if (e->nrelays == e->caprelays) {
          size_t cap = e->caprelays ? e->caprelays * 2 : 8;
          int *grown = realloc(e->relays, cap * sizeof *grown);
          if (grown) e->relays = grown, e->caprelays = cap;
        }
        if (e->nrelays < e->caprelays) e->relays[e->nrelays++] = r;
        else close(r);
      }
    }
    size_t relays_polled = n - 2 - 2 * e->tunnels.n;
    for (size_t i = relays_polled; i-- > 0;) {
      if (!fds[2 + i].revents) continue;
      int r = 0;
      /* A few at a time, so that tunnels keep moving, and none past what JavaScript has not taken. */
      for (int k = 0; k < 64 && r == 0 && __atomic_load_n(&e->pending, __ATOMIC_RELAXED) < MAX_PENDING_CLIENTS; k++)
        r = take_message(e, e->relays[i]);
      if (r < 0) {
        close(e->relays[i]);
        e->relays[i] = e->relays[--e->nrelays];
      }
    }
    now = now_ms();
    size_t base = 2 + relays_polled, kept = 0;
    for (size_t i = 0; i < e->tunnels.n; i++) {
      struct tunnel *t = e->tunnels.items[i];
      char why[MAX_MESSAGE];
      short cr = fds[base + 2 * i].revents, ur = fds[base + 2 * i + 1].revents;
      const char *outcome = (cr | ur || t->cancelled) ? service(t, cr, ur, why, sizeof why) : NULL;
      if (!outcome && now - t->last >= t->idle_ms) outcome = "idle";
      if (outcome) end_tunnel(e, t, outcome);
      else e->tunnels.items[kept++] = t;
    }
    e->tunnels.n = kept;
  }
  for (size_t i = 0; i < e->tunnels.n; i++) end_tunnel(e, e->tunnels.items[i], "closed");
  e->tunnels.n = 0;
  pthread_mutex_lock(&e->mu);
  for (size_t i = 0; i < e->incoming.n; i++) end_tunnel(e, e->incoming.items[i], "closed");
  e->incoming.n = 0;
  e->stopping = 1;
  pthread_mutex_unlock(&e->mu);
  for (size_t i = 0; i < e->nrelays; i++) close(e->relays[i]);
  e->nrelays = 0;
  free(fds);
  return NULL;
}

/* --- JavaScript --- */

#define CHECK(call)                                                                  \
  do {                                                                               \
    if ((call) != napi_ok) {                                                         \
      napi_throw_error(env, NULL, "vak engine: " #call " failed");                   \
      return NULL;                                                                   \
    }                                                                                \
  } while (0)

static napi_value throw_errno(napi_env env, const char *what) {
  char msg[256];
  snprintf(msg, sizeof msg, "vak engine: %s: %s", what, strerror(errno));
  napi_throw_error(env, NULL, msg);
  return NULL;
}

static void wake(struct engine *e);

static void call_js(napi_env env, napi_value cb, void *context, void *data) {
  struct engine *e = context;
  struct event *ev = data;
  /* A client or refusal taken: below the bound again, relays are read again. (After close, the wake fd is gone.) */
  if (ev->kind != EV_END && __atomic_sub_fetch(&e->pending, 1, __ATOMIC_RELAXED) == MAX_PENDING_CLIENTS - 1 && e->running) wake(e);
  if (!env) { /* the function is being torn down: release what the event holds */
    if (ev->kind == EV_CLIENT) close(ev->fd);
    free(ev);
    return;
  }
  napi_value obj, v, undefined;
  napi_create_object(env, &obj);
  const char *kind = ev->kind == EV_CLIENT ? "client" : ev->kind == EV_REFUSED ? "refused" : "end";
  napi_create_string_utf8(env, kind, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, "kind", v);
  napi_create_string_latin1(env, ev->text, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, obj, ev->kind == EV_CLIENT ? "message" : ev->kind == EV_REFUSED ? "reason" : "outcome", v);
  if (ev->kind == EV_CLIENT) {
    napi_create_int32(env, ev->fd, &v);
    napi_set_named_property(env, obj, "fd", v);
  }
  if (ev->kind == EV_END) {
    napi_create_int32(env, ev->id, &v);
    napi_set_named_property(env, obj, "id", v);
    napi_create_double(env, ev->up, &v);
    napi_set_named_property(env, obj, "up", v);
    napi_create_double(env, ev->down, &v);
    napi_set_named_property(env, obj, "down", v);
    napi_create_double(env, ev->data, &v);
    napi_set_named_property(env, obj, "data", v);
  }
  free(ev);
  napi_get_undefined(env, &undefined);
  napi_value ignored;
  /* The callback must not throw (GateEngine's handlers catch); if it does, Node reports it and goes on. */
  napi_call_function(env, undefined, cb, 1, &obj, &ignored);
}

static void finalize_engine(napi_env env, void *data, void *hint) {
  struct engine *e = data;
  pthread_mutex_destroy(&e->mu);
  free(e->incoming.items);
  free(e->tunnels.items);
  free(e->relays);
  free(e->cancels);
  free(e);
}

static struct engine *engine_arg(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "vak engine: not an engine");
    return NULL;
  }
  return p;
}

/* A unix socket address from a JavaScript string; 0 if it is not one that fits. */
static int socket_address(napi_env env, napi_value v, struct sockaddr_un *a) {
  size_t len = 0;
  *a = (struct sockaddr_un){.sun_family = AF_UNIX};
  return napi_get_value_string_utf8(env, v, a->sun_path, sizeof a->sun_path, &len) == napi_ok && len > 0 && len < sizeof a->sun_path - 1;
}

/* createEngine(socketPath, onEvent): listens and starts the thread. */
static napi_value create_engine(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  struct sockaddr_un a;
  if (argc < 2 || !socket_address(env, argv[0], &a)) {
    napi_throw_type_error(env, NULL, "vak engine: createEngine(socketPath, onEvent): bad socket path");
    return NULL;
  }
  struct engine *e = calloc(1, sizeof *e);
  if (!e) return throw_errno(env, "calloc");
  e->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (e->listen_fd < 0 || e->wake_fd < 0 || bind(e->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(e->listen_fd, 64) != 0) {
    int err = errno;
    if (e->listen_fd >= 0) close(e->listen_fd);
    if (e->wake_fd >= 0) close(e->wake_fd);
    free(e);
    errno = err;
    return throw_errno(env, a.sun_path);
  }
  pthread_mutex_init(&e->mu, NULL);
  napi_value name, ext;
  CHECK(napi_create_string_utf8(env, "vak-gate-engine", NAPI_AUTO_LENGTH, &name));
  CHECK(napi_create_threadsafe_function(env, argv[1], NULL, name, 0, 1, NULL, NULL, e, call_js, &e->tsfn));
  if (pthread_create(&e->thread, NULL, run, e) != 0) {
    napi_release_threadsafe_function(e->tsfn, napi_tsfn_abort);
    close(e->listen_fd), close(e->wake_fd);
    free(e);
    return throw_errno(env, "pthread_create");
  }
  e->running = 1;
  CHECK(napi_create_external(env, e, finalize_engine, NULL, &ext));
  return ext;
}

static void wake(struct engine *e) {
  uint64_t one = 1;
  if (write(e->wake_fd, &one, sizeof one) < 0) { /* the counter is already non-zero */
  }
}

static char *copy_buffer(napi_env env, napi_value v, size_t *len) {
  void *data = NULL;
  *len = 0;
  bool is;
  if (napi_is_buffer(env, v, &is) != napi_ok || !is || napi_get_buffer_info(env, v, &data, len) != napi_ok) return NULL;
  char *copy = malloc(*len ? *len : 1);
  if (copy && *len) memcpy(copy, data, *len);
  return copy;
}


/* Marks the externals createBudget makes, so that no other external is ever taken for a budget. */
static const napi_type_tag BUDGET_TAG = {0x76616b2d62756467ULL, 0x65742d7461673031ULL};

/* The budget an external createBudget made, or NULL (with an exception pending) for any other value. */
static struct budget *budget_of(napi_env env, napi_value v) {
  bool tagged = false;
  void *p = NULL;
  if (napi_check_object_type_tag(env, v, &BUDGET_TAG, &tagged) != napi_ok || !tagged || napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "vak engine: not a budget (createBudget)");
    return NULL;
  }
  return p;
}

/* A budget argument: a connection's budget (createBudget), shared, or a number, a budget of the tunnel's own. NULL with an exception pending. */
static struct budget *budget_arg(napi_env env, napi_value v) {
  napi_valuetype type;
  if (napi_typeof(env, v, &type) != napi_ok) return NULL;
  if (type == napi_external) {
    struct budget *b = budget_of(env, v);
    if (b) budget_hold(b);
    return b;
  }
  double limit;
  if (type != napi_number || napi_get_value_double(env, v, &limit) != napi_ok || isnan(limit)) {
    napi_throw_type_error(env, NULL, "vak engine: a budget is a number or createBudget()'s");
    return NULL;
  }
  struct budget *b = budget_new(limit >= 9007199254740991.0 ? INT64_MAX : limit < 0 ? 0 : (int64_t)limit);
  if (!b) throw_errno(env, "calloc");
  return b;
}

/* tunnel(engine, clientFd, upstreamFd, upPrefix, downPrefix, budget, idleMs[, length[, chunked]]): id.
 * budget: the connection's (createBudget), which every byte the tunnel reads is counted against.
 * Works on duplicates: the caller closes its own fds afterwards. With a
 * length, a transfer: upPrefix, then exactly length bytes clientFd ->
 * upstreamFd (downPrefix must be empty), and the caller keeps its sockets.
 * With chunked (1: framed again, 2: the data alone), a chunked transfer:
 * length is what is left of the current chunk's data, and the rest of the
 * chunked body follows it, its framing parsed here (chunked.c). */
static napi_value tunnel(napi_env env, napi_callback_info info) {
  size_t argc = 9;
  napi_value argv[9];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 7) {
    napi_throw_type_error(env, NULL, "vak engine: tunnel() takes 7 to 9 arguments");
    return NULL;
  }
  int32_t chunked = 0;
  napi_valuetype ct = napi_undefined;
  if (argc == 9) CHECK(napi_typeof(env, argv[8], &ct));
  if (ct != napi_undefined) CHECK(napi_get_value_int32(env, argv[8], &chunked));
  if (chunked < 0 || chunked > 2) {
    napi_throw_range_error(env, NULL, "vak engine: tunnel(): chunked is 0, 1 (framed) or 2 (the data alone)");
    return NULL;
  }
  double length = -1;
  napi_valuetype lt = napi_undefined;
  if (argc >= 8) CHECK(napi_typeof(env, argv[7], &lt));
  if (lt != napi_undefined) {
    CHECK(napi_get_value_double(env, argv[7], &length));
    if (!(length >= 0 && length <= 9007199254740991.0)) {
      napi_throw_range_error(env, NULL, "vak engine: tunnel(): a transfer's length must be 0 to 2^53-1");
      return NULL;
    }
  }
  if (chunked && length < 0) {
    napi_throw_range_error(env, NULL, "vak engine: tunnel(): a chunked transfer needs the length left of its chunk");
    return NULL;
  }
  struct engine *e = engine_arg(env, argv[0]);
  if (!e) return NULL;
  int32_t cfd, ufd;
  double idle;
  CHECK(napi_get_value_int32(env, argv[1], &cfd));
  CHECK(napi_get_value_int32(env, argv[2], &ufd));
  CHECK(napi_get_value_double(env, argv[6], &idle));
  if (!(idle >= 0 && idle <= 1e12)) {
    napi_throw_range_error(env, NULL, "vak engine: tunnel(): the idle time must be 0 to 1e12 ms");
    return NULL;
  }
  struct budget *budget = budget_arg(env, argv[5]);
  if (!budget) return NULL;
  struct tunnel *t = calloc(1, sizeof *t);
  if (!t) {
    budget_release(budget);
    return throw_errno(env, "calloc");
  }
  t->fd[0] = t->fd[1] = t->up.pipe[0] = t->up.pipe[1] = t->down.pipe[0] = t->down.pipe[1] = -1;
  t->up.left = t->down.left = -1;
  t->up.prefix = copy_buffer(env, argv[3], &t->up.plen);
  t->down.prefix = copy_buffer(env, argv[4], &t->down.plen);
  t->budget = budget;
  t->idle_ms = (int64_t)idle;
  t->last = now_ms();
  t->fd[0] = fcntl(cfd, F_DUPFD_CLOEXEC, 3);
  t->fd[1] = fcntl(ufd, F_DUPFD_CLOEXEC, 3);
  if (length >= 0 && chunked) make_chunked(t, length, chunked == 2);
  else if (length >= 0) make_transfer(t, length);
  if (!t->up.prefix || !t->down.prefix || (length >= 0 && t->down.plen) || t->fd[0] < 0 || t->fd[1] < 0 || not_a_tcp_connection(t->fd[0]) || not_a_tcp_connection(t->fd[1])) {
    int err = errno;
    free_tunnel(t);
    errno = err ? err : EINVAL;
    return throw_errno(env, "tunnel: the sockets or pipes could not be taken");
  }
  pthread_mutex_lock(&e->mu);
  int ok = !e->stopping && push(&e->incoming, t) == 0;
  /* The id is read here, under the lock: once the thread has it, the tunnel may end and be freed. */
  int32_t tid = ok ? (t->id = ++e->next_id) : 0;
  pthread_mutex_unlock(&e->mu);
  if (!ok) {
    free_tunnel(t);
    napi_throw_error(env, NULL, "vak engine: the engine is closed");
    return NULL;
  }
  wake(e);
  napi_value id;
  CHECK(napi_create_int32(env, tid, &id));
  return id;
}

/* cancel(engine, id): the tunnel ends ("cancelled") soon after; unknown ids are ignored. */
static napi_value cancel(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  struct engine *e = argc == 2 ? engine_arg(env, argv[0]) : NULL;
  int32_t id;
  if (!e || napi_get_value_int32(env, argv[1], &id) != napi_ok) return NULL;
  pthread_mutex_lock(&e->mu);
  if (e->ncancels == e->capcancels) {
    size_t cap = e->capcancels ? e->capcancels * 2 : 16;
    int *grown = realloc(e->cancels, cap * sizeof *grown);
    if (grown) e->cancels = grown, e->capcancels = cap;
  }
  if (e->ncancels < e->capcancels) e->cancels[e->ncancels++] = id;
  else e->cancel_all = 1; /* no memory to name it: revoking too much beats revoking too little */
  pthread_mutex_unlock(&e->mu);
  wake(e);
  return NULL;
}

/* close(engine): ends every tunnel ("closed"), stops listening, joins the thread. */
static napi_value close_engine(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  struct engine *e = argc == 1 ? engine_arg(env, argv[0]) : NULL;
  if (!e || !e->running) return NULL;
  pthread_mutex_lock(&e->mu);
  e->stopping = 1;
  pthread_mutex_unlock(&e->mu);
  wake(e);
  pthread_join(e->thread, NULL);
  e->running = 0;
  close(e->listen_fd);
  close(e->wake_fd);
  napi_release_threadsafe_function(e->tsfn, napi_tsfn_release);
  return NULL;
}

/* resetOnClose(fd): the socket is reset, not closed cleanly, when its last fd is closed
 * (Node's own resetAndDestroy sends a FIN when writes are pending). */
static napi_value reset_on_close_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || not_a_tcp_connection(fd)) {
    napi_throw_type_error(env, NULL, "vak engine: resetOnClose(fd) takes a connected TCP socket");
    return NULL;
  }
  struct linger abort_close = {.l_onoff = 1, .l_linger = 0};
  if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close) != 0) return throw_errno(env, "resetOnClose");
  return NULL;
}

/* pending(fd): the bytes waiting in a TCP socket's receive queue, unread; -1 once the peer has ended
 * or reset it. For a kept upstream connection: anything there, or its end, is a framing doubt. It is asked
 * before every reuse, so it checks with one system call that the fd is a TCP socket (a socket that is not
 * connected fails the peek: ENOTCONN), not with not_a_tcp_connection's six. */
static napi_value pending_js(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  int32_t fd, proto = 0;
  socklen_t plen = sizeof proto;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &plen) != 0 || proto != IPPROTO_TCP) {
    napi_throw_type_error(env, NULL, "vak engine: pending(fd) takes a connected TCP socket");
    return NULL;
  }
  int n = 0;
  char c;
  ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) n = -1;
  else if (r > 0 && ioctl(fd, FIONREAD, &n) != 0) n = -1;
  CHECK(napi_create_int32(env, n, &out));
  return out;
}

static void finalize_budget(napi_env env, void *data, void *hint) {
  budget_release(data);
}

/* createBudget(limit): one client connection's byte budget, shared by budgetTake and every tunnel given it. */
static napi_value create_budget(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], ext;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  double limit;
  if (argc < 1 || napi_get_value_double(env, argv[0], &limit) != napi_ok || !(limit >= 0 && limit <= 9007199254740991.0)) {
    napi_throw_range_error(env, NULL, "vak engine: createBudget(limit): limit must be 0 to 2^53-1");
    return NULL;
  }
  struct budget *b = budget_new((int64_t)limit);
  if (!b) return throw_errno(env, "calloc");
  if (napi_create_external(env, b, finalize_budget, NULL, &ext) != napi_ok) {
    budget_release(b);
    napi_throw_error(env, NULL, "vak engine: createBudget: napi_create_external failed");
    return NULL;
  }
  CHECK(napi_type_tag_object(env, ext, &BUDGET_TAG));
  return ext;
}

/* budgetTake(budget, n): counts n bytes the gate itself received; true while the count is within the limit. */
static napi_value budget_take(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], out;
  double n;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 2 || napi_get_value_double(env, argv[1], &n) != napi_ok || !(n >= 0 && n <= 9007199254740991.0)) {
    napi_throw_type_error(env, NULL, "vak engine: budgetTake(budget, n)");
    return NULL;
  }
  struct budget *b = budget_of(env, argv[0]);
  if (!b) return NULL;
  CHECK(napi_get_boolean(env, !budget_spend(b, (size_t)n), &out));
  return out;
}

/* sendClient(socketPath, message, fd): what a relay does, for tests. */
static napi_value send_client(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  struct sockaddr_un a;
  char msg[512];
  size_t mlen = 0;
  int32_t fd;
  if (argc < 3 || !socket_address(env, argv[0], &a) || napi_get_value_string_latin1(env, argv[1], msg, sizeof msg, &mlen) != napi_ok || napi_get_value_int32(env, argv[2], &fd) != napi_ok) {
    napi_throw_type_error(env, NULL, "vak engine: sendClient(socketPath, message, fd)");
    return NULL;
  }
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
    int err = errno;
    if (s >= 0) close(s);
    errno = err;
    return throw_errno(env, "sendClient: connect");
  }
  union {
    char space[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec iov = {.iov_base = msg, .iov_len = mlen};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    m.msg_control = control.space, m.msg_controllen = sizeof control.space;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  ssize_t n = sendmsg(s, &m, MSG_NOSIGNAL);
  int err = errno;
  close(s);
  if (n < 0) {
    errno = err;
    return throw_errno(env, "sendClient: sendmsg");
  }
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"createEngine", create_engine}, {"tunnel", tunnel}, {"cancel", cancel}, {"close", close_engine}, {"sendClient", send_client}, {"resetOnClose", reset_on_close_js}, {"pending", pending_js},
                    {"createBudget", create_budget}, {"budgetTake", budget_take}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) != napi_ok) return NULL;
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
