/* The engine attack tests' helper (test/attacks/engine.test.ts compiles it):
 * a hostile relay that sends the gate what Node cannot (odd fds, many fds, NUL
 * bytes, huge messages), a relay that holds connections open, and a client
 * that sends TCP urgent data. Loopback only. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void die(const char *what) { fprintf(stderr, "helper: %s: %s\n", what, strerror(errno)); exit(2); }

static int listener(int *port) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096) || getsockname(l, (struct sockaddr *)&a, &len)) die("listener");
  *port = ntohs(a.sin_port);
  return l;
}

/* A connected loopback TCP pair: *peer is the connecting end, the accepted end is returned. */
static int tcp_pair(int *peer) {
  static int l = -1, port;
  if (l < 0) l = listener(&port);
  int c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a)) die("connect");
  int s = accept(l, NULL, NULL);
  if (s < 0) die("accept");
  *peer = c;
  return s;
}

static int gate(const char *path) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a)) die("connect gate");
  return s;
}

/* One message with data (len bytes) and fds; ncmsg > 1 splits the fds over that many SCM_RIGHTS headers. */
static int send_fds(int g, const void *data, size_t len, const int *fds, int nfds, int ncmsg) {
  char control[CMSG_SPACE(16 * sizeof(int)) * 4];
  memset(control, 0, sizeof control);
  struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds) {
    m.msg_control = control;
    size_t total = 0;
    struct cmsghdr *c = (struct cmsghdr *)control;
    int per = nfds / ncmsg;
    for (int k = 0, off = 0; k < ncmsg; k++) {
      int cnt = k == ncmsg - 1 ? nfds - off : per;
      c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(cnt * sizeof(int));
      memcpy(CMSG_DATA(c), fds + off, cnt * sizeof(int));
      off += cnt;
      total += CMSG_SPACE(cnt * sizeof(int));
      c = (struct cmsghdr *)((char *)c + CMSG_SPACE(cnt * sizeof(int)));
    }
    m.msg_controllen = total;
  }
  return (int)sendmsg(g, &m, MSG_NOSIGNAL);
}

static void wait_stdin_eof(void) {
  char b[64];
  while (read(0, b, sizeof b) > 0) {
  }
}

static void raise_nofile(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) r.rlim_cur = r.rlim_max, setrlimit(RLIMIT_NOFILE, &r);
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  const char *mode = argv[1], *path = argv[2];
  setvbuf(stdout, NULL, _IONBF, 0);
  if (!strcmp(mode, "odd")) {
    const char *tok = argc > 3 ? argv[3] : "x";
    char good[200];
    snprintf(good, sizeof good, "VAK-TOKEN %s", tok);
    int keep[64], nkeep = 0, peer;
    const char *only = argc > 4 ? argv[4] : NULL;
#define CASE(name) if (!only || !strcmp(only, name))
    CASE("many") { /* six connected TCP sockets in one message */
      int f[6];
      for (int i = 0; i < 6; i++) f[i] = tcp_pair(&keep[nkeep++]);
      int g = gate(path);
      printf("many %d\n", send_fds(g, good, strlen(good), f, 6, 1));
      for (int i = 0; i < 6; i++) close(f[i]);
      close(g);
    }
    CASE("two-headers") { /* two SCM_RIGHTS headers of one fd each */
      int f[2] = {tcp_pair(&keep[nkeep++]), tcp_pair(&keep[nkeep++])};
      int g = gate(path);
      printf("two-headers %d\n", send_fds(g, good, strlen(good), f, 2, 2));
      close(f[0]), close(f[1]), close(g);
    }
    struct { const char *name; int fd; } odd[16];
    int n = 0, sp[2], pp[2];
    CASE("eventfd") odd[n].name = "eventfd", odd[n++].fd = eventfd(0, 0);
    CASE("memfd") odd[n].name = "memfd", odd[n++].fd = memfd_create("x", 0);
    CASE("epoll") odd[n].name = "epoll", odd[n++].fd = epoll_create1(0);
    CASE("unix-pair") {
      socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
      keep[nkeep++] = sp[1];
      odd[n].name = "unix-pair", odd[n++].fd = sp[0];
    }
    CASE("pipe") {
      if (pipe(pp)) die("pipe");
      keep[nkeep++] = pp[1];
      odd[n].name = "pipe", odd[n++].fd = pp[0];
    }
    CASE("udp") {
      int u = socket(AF_INET, SOCK_DGRAM, 0);
      struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
      if (connect(u, (struct sockaddr *)&a, sizeof a)) die("udp");
      odd[n].name = "udp", odd[n++].fd = u;
    }
    CASE("listening") {
      int port;
      odd[n].name = "listening", odd[n++].fd = listener(&port);
    }
    CASE("unconnected") odd[n].name = "unconnected", odd[n++].fd = socket(AF_INET, SOCK_STREAM, 0);
    CASE("reset") { /* connected once, then the peer reset it */
      int s = tcp_pair(&peer);
      struct linger lg = {1, 0};
      setsockopt(peer, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      close(peer);
      usleep(20000);
      odd[n].name = "reset", odd[n++].fd = s;
    }
    CASE("path") odd[n].name = "path", odd[n++].fd = open("/", O_PATH);
    CASE("gate-itself") odd[n].name = "gate-itself", odd[n++].fd = gate(path);
    for (int i = 0; i < n; i++) {
      int g = gate(path);
      printf("%s %d\n", odd[i].name, send_fds(g, good, strlen(good), &odd[i].fd, 1, 1));
      close(odd[i].fd), close(g);
    }
    CASE("nul") {
      int s = tcp_pair(&keep[nkeep++]), g = gate(path);
      char m[220];
      int len = snprintf(m, sizeof m, "%s", good);
      m[len] = 0, m[len + 1] = 'z';
      printf("nul %d\n", send_fds(g, m, (size_t)len + 2, &s, 1, 1));
      close(s), close(g);
    }
    CASE("huge") {
      int s = tcp_pair(&keep[nkeep++]), g = gate(path);
      static char m[65000];
      memset(m, 'A', sizeof m);
      memcpy(m, good, strlen(good));
      printf("huge %d\n", send_fds(g, m, sizeof m, &s, 1, 1));
      close(s), close(g);
    }
    CASE("no-fd") {
      int g = gate(path);
      printf("no-fd %d\n", send_fds(g, good, strlen(good), NULL, 0, 1));
      close(g);
    }
    CASE("empty-no-fd") {
      int g = gate(path);
      printf("empty-no-fd %d\n", send_fds(g, "", 0, NULL, 0, 1));
      close(g);
    }
    CASE("empty-with-fd") {
      int s = tcp_pair(&keep[nkeep++]), g = gate(path);
      printf("empty-with-fd %d\n", send_fds(g, "", 0, &s, 1, 1));
      close(s), close(g);
    }
    CASE("half-closed") { /* a connected client that has already sent its FIN */
      int s = tcp_pair(&peer);
      keep[nkeep++] = peer;
      shutdown(peer, SHUT_WR);
      int g = gate(path);
      printf("half-closed %d\n", send_fds(g, good, strlen(good), &s, 1, 1));
      close(s), close(g);
    }
    printf("done\n");
    wait_stdin_eof();
    return 0;
  }
  if (!strcmp(mode, "flood")) {
    raise_nofile();
    int n = atoi(argv[4]);
    char good[200];
    snprintf(good, sizeof good, "VAK-TOKEN %s", argv[3]);
    int *acc = calloc(n, sizeof *acc), *peers = calloc(n, sizeof *peers);
    for (int i = 0; i < n; i++) acc[i] = tcp_pair(&peers[i]);
    int g = gate(path);
    printf("ready\n");
    char b[8];
    if (read(0, b, 1) != 1) return 2;
    int sent = 0;
    for (int i = 0; i < n; i++) {
      if (send_fds(g, good, strlen(good), &acc[i], 1, 1) < 0) break;
      close(acc[i]);
      sent++;
    }
    printf("sent %d\n", sent);
    wait_stdin_eof();
    return 0;
  }
  if (!strcmp(mode, "hold")) {
    int g = gate(path);
    printf("connected %d\n", g);
    wait_stdin_eof();
    return 0;
  }
  if (!strcmp(mode, "holdmany")) { /* holdmany PATH N: N relay connections that never send */
    raise_nofile();
    int n = atoi(argv[3]);
    for (int i = 0; i < n; i++) gate(path);
    printf("connected %d\n", n);
    wait_stdin_eof();
    return 0;
  }
  if (!strcmp(mode, "oob")) { /* oob PORT TARGET: a client of a relay port that CONNECTs, then sends urgent data mid-stream */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c, (struct sockaddr *)&a, sizeof a)) die("oob connect");
    char req[128];
    int len = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%s HTTP/1.1\r\n\r\n", argv[3]);
    if (write(c, req, len) != len) die("write");
    char got[4096];
    size_t have = 0;
    while (!memmem(got, have, "\r\n\r\n", 4)) {
      ssize_t r = read(c, got + have, sizeof got - have);
      if (r <= 0) die("read 200");
      have += r;
    }
    usleep(100000);
    send(c, "abc", 3, 0);
    usleep(50000);
    send(c, "!", 1, MSG_OOB);
    usleep(50000);
    send(c, "def", 3, 0);
    usleep(50000);
    shutdown(c, SHUT_WR);
    for (;;) {
      ssize_t r = read(c, got, sizeof got);
      if (r <= 0) break;
      fwrite(got, 1, r, stdout);
    }
    return 0;
  }
  return 2;
}
