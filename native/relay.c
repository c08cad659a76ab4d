/* The relay: the sandbox's only way to the network.
 *
 * Inside the sandbox's network namespace (which has nothing but loopback), it
 * listens on 127.0.0.1:PORT and [::1]:PORT and joins each client to the host's
 * egress gate, a unix socket that is not in the sandbox's view: the relay holds
 * a directory fd opened before the view was built. Before the client's first
 * byte it sends one line naming this worker (its token), so the gate knows who
 * is calling and the sandboxed code never holds the token. It copies bytes and
 * parses nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher.h"

#define MAX_PAIRS 320
#define BUF_SIZE (64 * 1024)

struct half {
  int from, to;
  char *buf;
  size_t len, off;
  int eof;  /* from has reached EOF: shut down to's write side once drained */
  int shut; /* and that has been done */
};

struct pair {
  struct half up, down; /* up: client -> gate, down: gate -> client */
  int client, gate;
};

static struct pair *pairs[MAX_PAIRS];

static int listen_on(int family, int port) {
  int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int r;
  if (family == AF_INET) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    r = bind(s, (struct sockaddr *)&a, sizeof a);
  } else {
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    r = bind(s, (struct sockaddr *)&a, sizeof a);
  }
  if (r != 0 || listen(s, 128) != 0) {
    close(s);
    return -1;
  }
  return s;
}

static int connect_gate(int dirfd, const char *token) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/gate.sock", dirfd);
  char line[160];
  int n = snprintf(line, sizeof line, "VAK-TOKEN %s\r\n", token);
  /* Blocking connect and preamble: the gate is local and accepts at once. */
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0 || write(s, line, (size_t)n) != n) {
    close(s);
    return -1;
  }
  fcntl(s, F_SETFL, O_NONBLOCK);
  return s;
}

static void drop(int i) {
  struct pair *p = pairs[i];
  close(p->client);
  close(p->gate);
  free(p->up.buf);
  free(p->down.buf);
  free(p);
  pairs[i] = NULL;
}

/* Moves what it can of one direction; returns -1 on an error. Writes are
 * attempted whenever data is buffered: a non-blocking write that cannot go
 * just answers EAGAIN, and poll() then waits for POLLOUT. */
static int pump(struct half *h, short from_events) {
  if (h->len == h->off && !h->eof && (from_events & (POLLIN | POLLHUP | POLLERR))) {
    ssize_t n = read(h->from, h->buf, BUF_SIZE);
    if (n > 0) h->len = (size_t)n, h->off = 0;
    else if (n == 0) h->eof = 1;
    else if (errno != EAGAIN && errno != EINTR) return -1;
  }
  if (h->off < h->len) {
    ssize_t n = write(h->to, h->buf + h->off, h->len - h->off);
    if (n > 0) h->off += (size_t)n;
    else if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
  }
  if (h->eof && h->off == h->len && !h->shut) {
    shutdown(h->to, SHUT_WR);
    h->shut = 1;
  }
  return 0;
}

void relay_run(const struct plan *p, int dirfd, const char *token) {
  signal(SIGPIPE, SIG_IGN);
  int l4 = listen_on(AF_INET, p->net_port);
  int l6 = listen_on(AF_INET6, p->net_port);
  if (l4 < 0) die_step("network", "relay: listen on 127.0.0.1:%d: %s", p->net_port, strerror(errno));
  /* Nothing more to open: no capabilities, no files, no new TCP, our own seccomp. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die_step("network", "relay: PR_SET_DUMPABLE: %s", strerror(errno));
  drop_privileges();
  restrict_relay_landlock();
  install_guard_seccomp(p);

  struct pollfd fds[2 + 2 * MAX_PAIRS];
  for (;;) {
    int n = 0;
    fds[n++] = (struct pollfd){.fd = l4, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = l6, .events = POLLIN};
    int index[MAX_PAIRS];
    for (int i = 0; i < MAX_PAIRS; i++) {
      struct pair *pr = pairs[i];
      index[i] = -1;
      if (!pr) continue;
      index[i] = n;
      short ce = 0, ge = 0;
      if (pr->up.len == pr->up.off && !pr->up.eof) ce |= POLLIN;
      if (pr->down.off < pr->down.len) ce |= POLLOUT;
      if (pr->down.len == pr->down.off && !pr->down.eof) ge |= POLLIN;
      if (pr->up.off < pr->up.len) ge |= POLLOUT;
      fds[n++] = (struct pollfd){.fd = pr->client, .events = ce};
      fds[n++] = (struct pollfd){.fd = pr->gate, .events = ge};
    }
    if (poll(fds, (nfds_t)n, -1) < 0) {
      if (errno == EINTR) continue;
      die_step("network", "relay: poll: %s", strerror(errno));
    }
    for (int l = 0; l < 2; l++) {
      if (!(fds[l].revents & POLLIN)) continue;
      int c = accept4(fds[l].fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (c < 0) continue;
      int slot = -1;
      for (int i = 0; i < MAX_PAIRS && slot < 0; i++)
        if (!pairs[i]) slot = i;
      int g = slot >= 0 ? connect_gate(dirfd, token) : -1;
      struct pair *pr = g >= 0 ? calloc(1, sizeof *pr) : NULL;
      char *b1 = pr ? malloc(BUF_SIZE) : NULL, *b2 = pr ? malloc(BUF_SIZE) : NULL;
      if (!pr || !b1 || !b2) {
        close(c);
        if (g >= 0) close(g);
        free(pr), free(b1), free(b2);
        continue;
      }
      pr->client = c;
      pr->gate = g;
      pr->up = (struct half){.from = c, .to = g, .buf = b1};
      pr->down = (struct half){.from = g, .to = c, .buf = b2};
      pairs[slot] = pr;
    }
    for (int i = 0; i < MAX_PAIRS; i++) {
      struct pair *pr = pairs[i];
      if (!pr || index[i] < 0) continue;
      short cr = fds[index[i]].revents, gr = fds[index[i] + 1].revents;
      if (pump(&pr->up, cr) < 0 || pump(&pr->down, gr) < 0 || (pr->up.shut && pr->down.shut) || ((cr | gr) & POLLNVAL))
        drop(i);
    }
  }
}
