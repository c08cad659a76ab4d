/* A minimal TCP forwarder for the egress benchmark: one hop, splice in both
 * directions, a thread per direction, no checks and no record. It is the
 * floor for any proxy on this machine: what one process between client and
 * server costs, before a gate decides anything.
 * Usage: forwarder LISTEN_PORT TARGET_PORT (both on 127.0.0.1); prints "ready". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct way {
  int from, to;
};

static void *copy(void *arg) {
  struct way *w = arg;
  int p[2];
  if (pipe(p) == 0) {
    for (;;) {
      ssize_t n = splice(w->from, NULL, p[1], NULL, 1 << 20, SPLICE_F_MOVE);
      if (n <= 0) break;
      while (n > 0) {
        ssize_t m = splice(p[0], NULL, w->to, NULL, (size_t)n, SPLICE_F_MOVE);
        if (m <= 0) goto out;
        n -= m;
      }
    }
  out:
    close(p[0]), close(p[1]);
  }
  shutdown(w->to, SHUT_WR);
  free(w);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct sockaddr_in t = a;
  t.sin_port = htons((uint16_t)atoi(argv[2]));
  int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 16) != 0) return 1;
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    int c = accept(l, NULL, NULL), u = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || u < 0 || connect(u, (struct sockaddr *)&t, sizeof t) != 0) return 1;
    struct way *w1 = malloc(sizeof *w1), *w2 = malloc(sizeof *w2);
    *w1 = (struct way){c, u}, *w2 = (struct way){u, c};
    pthread_t x, y;
    pthread_create(&x, NULL, copy, w1);
    pthread_create(&y, NULL, copy, w2);
    pthread_detach(x), pthread_detach(y);
  }
}
