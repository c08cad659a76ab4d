/* How a tunnel of the egress gate's engine moves bytes and ends: see tunnel.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tunnel.h"

int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

struct budget *budget_new(int64_t limit) {
  struct budget *b = calloc(1, sizeof *b);
  if (b) b->limit = limit, b->refs = 1;
  return b;
}

void budget_hold(struct budget *b) {
  __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void budget_release(struct budget *b) {
  if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) free(b);
}

int budget_spend(struct budget *b, size_t n) {
  return __atomic_add_fetch(&b->used, (int64_t)n, __ATOMIC_RELAXED) > b->limit;
}

size_t budget_room(struct budget *b, size_t want) {
  int64_t left = b->limit - __atomic_load_n(&b->used, __ATOMIC_RELAXED);
  if (left <= 0) return 1;
  return (uint64_t)left < want ? (size_t)left : want;
}

const char *not_a_tcp_connection(int fd) {
  struct stat st;
  int v;
  socklen_t len = sizeof v;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return "the fd is not a socket";
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 || (v != AF_INET && v != AF_INET6)) return "the socket is not an inet socket";
  len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0 || v != SOCK_STREAM) return "the socket is not a stream socket";
  len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) != 0 || v != IPPROTO_TCP) return "the socket is not a TCP socket";
  len = sizeof v;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v != 0) return "the socket is a listening socket";
  struct sockaddr_storage peer;
  len = sizeof peer;
  if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0) return "the socket is not connected";
  return NULL;
}

void free_tunnel(struct tunnel *t) {
  for (int i = 0; i < 2; i++) {
    if (t->fd[i] >= 0) close(t->fd[i]);
    struct dir *d = i ? &t->down : &t->up;
    if (d->pipe[0] >= 0) close(d->pipe[0]);
    if (d->pipe[1] >= 0) close(d->pipe[1]);
    free(d->prefix);
  }
  budget_release(t->budget);
  free(t);
}

void reset_on_close(struct tunnel *t) {
  struct linger abort_close = {.l_onoff = 1, .l_linger = 0};
  for (int i = 0; i < 2; i++)
    if (t->fd[i] >= 0) setsockopt(t->fd[i], SOL_SOCKET, SO_LINGER, &abort_close, sizeof abort_close);
}

void make_transfer(struct tunnel *t, double length) {
  t->transfer = 1;
  t->up.left = length;
  if (length <= 0) t->up.eof = 1;
  t->down.eof = t->down.shut = 1;
  t->down.left = -1;
}

/* Moves what one direction can without waiting. Returns 1 if anything moved,
 * 0 if not, -1 on an error (errno set), -2 past the byte budget, -3 at urgent
 * data, -4 at the end of a transfer's source before its length, -5 at
 * malformed chunk framing (chunked.c). */
static int step(struct tunnel *t, struct dir *d) {
  int moved = 0;
  if (t->transfer && d == &t->down) return 0;
  if (d->poff < d->plen) {
    ssize_t n = write(d->to, d->prefix + d->poff, d->plen - d->poff);
    if (n > 0) d->poff += (size_t)n, moved = 1;
    else if (n < 0 && errno != EAGAIN && errno != EINTR) { t->failed = 2; return -1; }
  }
  if (d->chunk != CH_NONE) {
    if (!d->eof) {
      int r = chunk_step(t, d);
      if (r < 0) return r;
      moved |= r;
    }
  } else if (!d->eof && !d->full && d->in_pipe < d->cap) {
    /* A counted transfer asks the kernel for no more than its length: what the
     * peer sent after it (a pipelined request, more than a Content-Length)
     * stays in the socket, for the gate to read and decide. */
    size_t room = budget_room(t->budget, d->cap - d->in_pipe);
    if (d->left >= 0 && (double)room > d->left) room = (size_t)d->left;
    ssize_t n = splice(d->from, NULL, d->pipe[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    int mark = 0;
    if (n > 0) {
      /* Past the connection's budget: these bytes end the tunnel with them; never written on, nor counted as moved. */
      if (budget_spend(t->budget, (size_t)n)) return -2;
      d->in_pipe += (size_t)n, d->moved += (double)n, t->received += (double)n, moved = 1;
      if (d->left >= 0 && (d->left -= (double)n) <= 0) d->eof = 1;
    } else if (n == 0 && ioctl(d->from, SIOCATMARK, &mark) == 0 && mark) {
      /* Splicing stops short of TCP urgent data and says 0, as at the end of
       * the stream. It is not the end: refuse it rather than fake a clean one. */
      return -3;
    } else if (n == 0 && d->left > 0) {
      return -4;
    } else if (n == 0) {
      d->eof = 1, moved = 1;
    } else if (errno == EAGAIN && d->in_pipe > 0) {
      /* No room (a pipe fills by slots, not bytes), or nothing to read: either
       * way, wait until some of the pipe has gone out. */
      d->full = 1;
    } else if (errno != EAGAIN && errno != EINTR) {
      { t->failed = 1; return -1; }
    }
  }
  if (d->poff == d->plen && d->in_pipe > 0) {
    ssize_t n = splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) d->in_pipe -= (size_t)n, d->full = 0, moved = 1;
    else if (n < 0 && errno != EAGAIN && errno != EINTR) { t->failed = 2; return -1; }
  }
  if (d->eof && d->in_pipe == 0 && d->poff == d->plen && !d->shut) {
    if (!t->transfer) shutdown(d->to, SHUT_WR);
    d->shut = 1, moved = 1;
  }
  return moved;
}

short wanted(const struct dir *in, const struct dir *out) {
  short ev = 0;
  if (!in->eof && !in->full && in->in_pipe < in->cap) ev |= POLLIN;
  if (out->poff < out->plen || out->in_pipe > 0) ev |= POLLOUT;
  return ev;
}

const char *service(struct tunnel *t, short client_rev, short upstream_rev, char *why, size_t cap) {
  /* A hang-up is not an end: a socket whose peer has sent FIN, and been sent
   * ours, hangs up with data still to read. Reads and writes find the end or
   * the error; a hang-up only decides what run() polls. */
  if (client_rev & (POLLHUP | POLLERR)) t->hup[0] = 1;
  if (upstream_rev & (POLLHUP | POLLERR)) t->hup[1] = 1;
  if (t->cancelled) return "cancelled";
  /* An error is: a reset side is not read or written again if it is done with, so ask it now. */
  for (int i = 0; i < 2; i++) {
    int err = 0;
    socklen_t len = sizeof err;
    if (((i ? upstream_rev : client_rev) & POLLERR) && getsockopt(t->fd[i], SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
      if (t->transfer) snprintf(why, cap, "error: %s: %s", i ? "destination" : "source", strerror(err));
      else snprintf(why, cap, "error: %s", strerror(err));
      return why;
    }
  }
  /* Moves until nothing moves (a few rounds at most, so that other tunnels get their turn): fewer polls per byte. */
  int a = 0, b = 0, failed = 0;
  for (int round = 0; round < 4 && !failed; round++) {
    int ra = step(t, &t->up), rb = ra < 0 ? 0 : step(t, &t->down);
    failed = ra < 0 ? ra : rb < 0 ? rb : 0;
    a |= ra > 0, b |= rb > 0;
    if (ra <= 0 && rb <= 0) break;
  }
  if (failed == -2) return "limit";
  if (failed == -4) return "short";
  if (failed == -5) {
    snprintf(why, cap, "malformed: %s", t->up.bad);
    return why;
  }
  if (failed == -3) return "error: TCP urgent (out-of-band) data, which a tunnel does not carry";
  if (failed == -1 && t->transfer) {
    snprintf(why, cap, "error: %s: %s", t->failed == 1 ? "source" : "destination", strerror(errno));
    return why;
  }
  if (failed == -1) {
    snprintf(why, cap, "error: %s", strerror(errno));
    return why;
  }
  if (t->up.shut && t->down.shut) return "completed";
  if (a || b) t->last = now_ms();
  return NULL;
}

/* Pipes are made here, on the engine thread, not on the event loop that hands the tunnel over. */
static int open_dir(struct dir *d, int from, int to, int big) {
  d->from = from, d->to = to;
  if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) != 0) return -1;
  if (big) fcntl(d->pipe[1], F_SETPIPE_SZ, PIPE_BIG); /* if the quota allows; the default otherwise */
  int cap = fcntl(d->pipe[1], F_GETPIPE_SZ);
  d->cap = cap > 0 ? (size_t)cap : 65536;
  return 0;
}

int open_pipes(struct tunnel *t, int big) {
  if (open_dir(&t->up, t->fd[0], t->fd[1], big) != 0) return -1;
  /* A transfer moves one way only: no pipe for the other (two pipes, one of up to PIPE_BIG, made and freed for
   * nothing on every chunk of a chunked body). */
  if (t->transfer) return t->down.from = t->fd[1], t->down.to = t->fd[0], 0;
  return open_dir(&t->down, t->fd[1], t->fd[0], big);
}
