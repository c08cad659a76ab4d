/* The sandbox's resolver: name lookups fail at once, and say which name.
 *
 * Inside the sandbox's network namespace (nothing but loopback), init binds
 * UDP 127.0.0.1:53 and [::1]:53 and the synthesized /etc/resolv.conf points
 * there. Every query is answered at once, with "no such name" (NXDOMAIN) for a
 * well-formed query and FORMERR or NOTIMP otherwise, and never with an address:
 * names resolve only at the egress gate (a client given a real address could
 * try to connect around it, and there is nothing to connect to here anyway).
 * Without this a lookup found no server and a client retried for a minute
 * with no word from Vak. Each distinct name (the first MAX_NAMES) goes on the
 * report fd, so that vak prints which name was looked up and the grant that
 * would reach it.
 *
 * It parses hostile input: every length is checked against the datagram, a
 * name is at most 255 bytes in labels of at most 63, compression pointers are
 * refused. Like the relay it runs with no capabilities, not dumpable, in an
 * empty Landlock domain of its own (so the command cannot signal it) and the
 * guard's seccomp filter; it opens nothing after it starts. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher.h"

#define DNS_PORT 53
#define MAX_NAMES 64
#define RCODE_FORMERR 1
#define RCODE_NXDOMAIN 3
#define RCODE_NOTIMP 4

static int udp_on(int family) {
  int s = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  int one = 1, r;
  if (family == AF_INET) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(DNS_PORT), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    r = bind(s, (struct sockaddr *)&a, sizeof a);
  } else {
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(DNS_PORT), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    r = bind(s, (struct sockaddr *)&a, sizeof a);
  }
  if (r != 0) {
    close(s);
    return -1;
  }
  return s;
}

/* Bound by init (which holds the capability a port below 1024 needs) before
 * the command starts, so nothing else can take the port first. */
void resolver_sockets(int fds[2]) {
  fds[0] = udp_on(AF_INET);
  if (fds[0] < 0) die_step("network", "resolver: bind 127.0.0.1:53: %s", strerror(errno));
  fds[1] = udp_on(AF_INET6); /* a kernel without IPv6 has no ::1: the IPv4 one is enough */
}

static const char *type_name(unsigned t, char *buf, size_t cap) {
  switch (t) {
    case 1: return "A";
    case 28: return "AAAA";
    case 5: return "CNAME";
    case 15: return "MX";
    case 16: return "TXT";
    case 33: return "SRV";
    case 12: return "PTR";
    case 65: return "HTTPS";
    case 255: return "ANY";
    default: snprintf(buf, cap, "TYPE%u", t); return buf;
  }
}

static char seen[MAX_NAMES][256];
static int nseen;
static int more_said;

/* Reports a name once; reverse lookups and the sandbox's own names are not news. */
static void report_name(const char *name, unsigned qtype) {
  size_t n = strlen(name);
  if (!n || !strcmp(name, "localhost") || !strcmp(name, "vak") || (n >= 5 && !strcmp(name + n - 5, ".arpa"))) return;
  for (int i = 0; i < nseen; i++)
    if (!strcmp(seen[i], name)) return;
  char jn[600], tb[16], line[800];
  if (nseen == MAX_NAMES) {
    if (more_said) return;
    more_said = 1;
    jstr(jn, sizeof jn, name);
    snprintf(line, sizeof line, "{\"event\":\"dns\",\"name\":\"%s\",\"type\":\"%s\",\"more\":true}", jn, type_name(qtype, tb, sizeof tb));
    report_line(line);
    return;
  }
  snprintf(seen[nseen++], sizeof seen[0], "%s", name);
  jstr(jn, sizeof jn, name);
  snprintf(line, sizeof line, "{\"event\":\"dns\",\"name\":\"%s\",\"type\":\"%s\"}", jn, type_name(qtype, tb, sizeof tb));
  report_line(line);
}

/* Parses the question at q[12..n) into name (lower-case, dotted). Returns the
 * offset just past QTYPE and QCLASS, or 0 if the question is malformed. */
static size_t question(const unsigned char *q, size_t n, char *name, size_t cap, unsigned *qtype) {
  size_t o = 12, w = 0, wire = 0;
  for (;;) {
    if (o >= n) return 0;
    unsigned len = q[o++];
    if (len == 0) break;
    if (len > 63 || o + len > n) return 0; /* 0xC0: a compression pointer, never in a question we accept */
    wire += len + 1;
    if (wire > 255 || w + len + 2 > cap) return 0;
    if (w) name[w++] = '.';
    for (unsigned i = 0; i < len; i++) name[w++] = (char)tolower(q[o + i]);
    o += len;
  }
  name[w] = 0;
  if (o + 4 > n) return 0;
  *qtype = (unsigned)(q[o] << 8 | q[o + 1]);
  return o + 4;
}

/* The answer to one datagram in buf (n bytes), written over it; its length, or 0 to stay silent. */
static size_t answer(unsigned char *buf, size_t n) {
  if (n < 12 || (buf[2] & 0x80)) return 0; /* too short for a header, or a response: not ours to answer */
  unsigned opcode = (buf[2] >> 3) & 0xf;
  unsigned qdcount = (unsigned)(buf[4] << 8 | buf[5]);
  char name[256] = "";
  unsigned qtype = 0;
  size_t end = opcode == 0 && qdcount == 1 ? question(buf, n, name, sizeof name, &qtype) : 0;
  unsigned rcode = opcode != 0 ? RCODE_NOTIMP : end ? RCODE_NXDOMAIN : RCODE_FORMERR;
  buf[2] = (unsigned char)(0x80 | (opcode << 3) | (buf[2] & 0x01)); /* QR, the opcode, RD as asked; not authoritative */
  buf[3] = (unsigned char)rcode;                                   /* no recursion available */
  buf[4] = 0, buf[5] = end ? 1 : 0;                                /* the question, when it was one */
  memset(buf + 6, 0, 6);                                           /* no answer, authority or additional records */
  if (end) report_name(name, qtype);
  return end ? end : 12;
}

void resolver_run(const struct plan *p, int fds[2]) {
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) die_step("network", "resolver: PR_SET_DUMPABLE: %s", strerror(errno));
  drop_privileges();
  restrict_relay_landlock();
  install_guard_seccomp(p);
  for (;;) {
    struct pollfd pf[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
    if (poll(pf, fds[1] >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      die_step("network", "resolver: poll: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
      if (!(pf[i].revents & POLLIN)) continue;
      /* Drain what is there: a flood of queries costs the sender as much as us. */
      for (int k = 0; k < 64; k++) {
        unsigned char buf[1500];
        struct sockaddr_storage from;
        socklen_t flen = sizeof from;
        ssize_t got = recvfrom(pf[i].fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        if (got < 0) break;
        size_t len = answer(buf, (size_t)got);
        if (len) sendto(pf[i].fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&from, flen);
      }
    }
  }
}
