/* The relay: the sandbox's only way to the network.
 *
 * Inside the sandbox's network namespace (which has nothing but loopback), it
 * listens on 127.0.0.1:PORT and [::1]:PORT and hands each client connection to
 * the host's egress gate: the accepted socket itself goes over a SOCK_SEQPACKET
 * unix socket (SCM_RIGHTS) that is not in the sandbox's view (the relay holds a
 * directory fd opened before the view was built), with one line naming this
 * worker (its token), so the gate knows who is calling and the sandboxed code
 * never holds the token. The gate then reads the client directly; the relay
 * copies no bytes and parses nothing, and nothing comes back to it. */
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

static int connect_gate(int dirfd) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/gate.sock", dirfd);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
    close(s);
    return -1;
  }
  return s;
}

/* One message: the token line, and the client's socket. Blocking: if the gate
 * is slow to take clients, the relay stops accepting them. */
static int hand_over(int gate, const char *line, size_t len, int client) {
  union {
    char space[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec iov = {.iov_base = (void *)line, .iov_len = len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &client, sizeof client);
  ssize_t n;
  do n = sendmsg(gate, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)len ? 0 : -1;
}

/* In init, before the relay and the command are forked: had the relay listened itself, a command that
 * connected at once (curl, as it starts) could find nothing there yet and fail (connection refused). */
void relay_sockets(const struct plan *p, int fds[2]) {
  fds[0] = listen_on(AF_INET, p->net_port);
  if (fds[0] < 0) die_step("network", "relay: listen on 127.0.0.1:%d: %s", p->net_port, strerror(errno));
  fds[1] = listen_on(AF_INET6, p->net_port);
}

void relay_run(const struct plan *p, int dirfd, const char *token, int fds[2]) {
  signal(SIGPIPE, SIG_IGN);
  int l4 = fds[0], l6 = fds[1];
  /* Nothing more to open: no capabilities, no files, no new TCP, our own seccomp. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die_step("network", "relay: PR_SET_DUMPABLE: %s", strerror(errno));
  drop_privileges();
  restrict_relay_landlock();
  install_guard_seccomp(p);

  char line[160];
  int len = snprintf(line, sizeof line, "VAK-TOKEN %s", token);
  if (len < 0 || len >= (int)sizeof line) die_step("network", "relay: the token is too long");
  int gate = -1;
  for (;;) {
    struct pollfd fds[2] = {{.fd = l4, .events = POLLIN}, {.fd = l6, .events = POLLIN}};
    if (poll(fds, l6 >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      die_step("network", "relay: poll: %s", strerror(errno));
    }
    for (int l = 0; l < 2; l++) {
      if (!(fds[l].revents & POLLIN)) continue;
      int c = accept4(fds[l].fd, NULL, NULL, SOCK_CLOEXEC);
      if (c < 0) continue;
      /* A gate that went away (or never answered) is tried once more, fresh. */
      for (int attempt = 0; attempt < 2; attempt++) {
        if (gate < 0) gate = connect_gate(dirfd);
        if (gate >= 0 && hand_over(gate, line, (size_t)len, c) == 0) break;
        if (gate >= 0) close(gate);
        gate = -1;
      }
      /* Handed over or not, the relay keeps no client: the gate has its own copy, or the client sees its connection close. */
      close(c);
    }
  }
}
