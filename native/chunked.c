/* A chunked body moved by the gate's engine, its framing parsed here.
 *
 * The framing is where request and response smuggling happen: a reader that
 * takes a size, a line end or the body's end otherwise than the peer meant is
 * how a second message rides the first. So the engine never splices a chunked
 * body blind. It reads every size line, the CRLF after each chunk's data and
 * the trailers itself, by the gate's own strict rules (src/net/http1.ts:
 * chunkSize, readLine), and splices only data, exactly each chunk's size. It
 * takes no byte past the line it is reading (it peeks for the LF, then reads up
 * to it), so it stops at the body's last CRLF: whatever follows (a pipelined
 * request, a smuggled answer) stays in the socket, for the gate to read and
 * decide. Malformed framing ends the transfer, and nothing after the fault is
 * written. Each chunk is framed again the gate's way (its size in hex, no
 * extensions, no trailers), written into the pipe in order with the data. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tunnel.h"

static int refuse(struct dir *d, const char *why) {
  d->bad = why;
  return -5;
}

static int hex_digit(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The size a chunk size line gives: 1 to 12 hex digits, then optionally [ \t]* ';' and an extension of tabs and
 * printable ASCII (dropped); -1 for any other line. */
static double chunk_size(const unsigned char *s, size_t n) {
  size_t i = 0;
  double v = 0;
  for (; i < n && i <= 12 && hex_digit(s[i]) >= 0; i++) v = v * 16 + hex_digit(s[i]);
  if (i == 0 || i > 12) return -1;
  if (i == n) return v;
  while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
  if (i == n || s[i] != ';') return -1;
  for (i++; i < n; i++)
    if (s[i] != '\t' && (s[i] < 0x20 || s[i] > 0x7e)) return -1;
  return v;
}

/* Reads framing into d->line, never a byte past the LF that ends the line. 1: a whole line, its CRLF checked and
 * cut (*len its length); 0: not yet; else step()'s errors, or -5 (d->bad). */
static int read_line(struct tunnel *t, struct dir *d, size_t max, size_t *len) {
  char peek[CHUNK_LINE_MAX + 2];
  ssize_t n = recv(d->from, peek, max + 2 - d->llen, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) {
    char *lf = memchr(peek, '\n', (size_t)n);
    n = recv(d->from, d->line + d->llen, budget_room(t->budget, lf ? (size_t)(lf - peek) + 1 : (size_t)n), MSG_DONTWAIT);
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (n < 0) return t->failed = 1, -1;
  if (n == 0) {
    /* The stream's end: the body is cut. Unlike splice, recv does not stop at TCP urgent data with a 0: with
     * SO_OOBINLINE off, a read stops just before the urgent byte, and the next one (a peek too) skips it. So
     * an urgent byte inside a framing line is dropped from the line, which is read, checked and framed again
     * without it, as the gate's own reads drop it everywhere; the sender's framing is never forwarded, so no
     * reader downstream sees that line otherwise (test/attacks/chunked-smuggling.test.ts). A 0 at the mark
     * is a stream that ended right after an urgent byte: a cut like another, said as urgent data. */
    int mark = 0;
    return ioctl(d->from, SIOCATMARK, &mark) == 0 && mark ? -3 : -4;
  }
  if (budget_spend(t->budget, (size_t)n)) return -2;
  d->llen += (size_t)n;
  t->received += (double)n;
  if (d->line[d->llen - 1] != '\n') return d->llen >= max + 2 ? refuse(d, "a line longer than allowed") : 0;
  size_t got = d->llen;
  d->llen = 0;
  if (got < 2 || d->line[got - 2] != '\r' || memchr(d->line, '\r', got - 2)) return refuse(d, "a line that does not end in CRLF");
  *len = got - 2;
  return 1;
}

static void frame(struct dir *d, const char *text) {
  if (!d->unframed) d->olen = (size_t)snprintf(d->out, sizeof d->out, "%s", text);
}

int chunk_step(struct tunnel *t, struct dir *d) {
  int moved = 0;
  for (int k = 0; k < 64; k++) { /* bounded, so that other tunnels get their turn */
    if (d->olen) {
      ssize_t n = write(d->pipe[1], d->out, d->olen);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return t->failed = 2, -1;
      if (n > 0) memmove(d->out, d->out + n, d->olen - (size_t)n), d->olen -= (size_t)n, d->in_pipe += (size_t)n, moved = 1;
      if (d->olen) return d->full = 1, moved; /* until some of the pipe has gone out */
    }
    if (d->chunk == CH_DONE) return d->eof = 1, 1;
    if (d->chunk == CH_DATA) {
      if (d->full || d->in_pipe >= d->cap) return moved;
      size_t room = budget_room(t->budget, d->cap - d->in_pipe);
      if ((double)room > d->chunk_left) room = (size_t)d->chunk_left;
      ssize_t n = splice(d->from, NULL, d->pipe[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        if (budget_spend(t->budget, (size_t)n)) return -2; /* past the budget: dropped with the transfer (tunnel.c's step) */
        d->in_pipe += (size_t)n, d->moved += (double)n, t->received += (double)n, moved = 1;
        if ((d->chunk_left -= (double)n) <= 0) d->chunk = CH_CRLF;
        continue;
      }
      int mark = 0;
      if (n == 0) return ioctl(d->from, SIOCATMARK, &mark) == 0 && mark ? -3 : -4;
      if (errno == EAGAIN && d->in_pipe > 0) d->full = 1; /* no room, or nothing to read: wait for the pipe to drain */
      if (errno == EAGAIN || errno == EINTR) return moved;
      return t->failed = 1, -1;
    }
    size_t len = 0;
    int r = read_line(t, d, d->chunk == CH_CRLF ? 0 : CHUNK_LINE_MAX, &len);
    if (r == -5 && d->chunk == CH_CRLF) d->bad = "chunk data longer than its size, or not ended by CRLF";
    if (r <= 0) return r < 0 ? r : moved;
    moved = 1;
    if (d->chunk == CH_CRLF) {
      frame(d, "\r\n");
      d->chunk = CH_SIZE;
    } else if (d->chunk == CH_SIZE) {
      double size = chunk_size((const unsigned char *)d->line, len);
      if (size < 0) return refuse(d, "a malformed chunk size line");
      if (size == 0) {
        d->chunk = CH_TRAILER, d->trailers = 0;
      } else {
        if (!d->unframed) d->olen = (size_t)snprintf(d->out, sizeof d->out, "%llx\r\n", (unsigned long long)size);
        d->chunk_left = size, d->chunk = CH_DATA;
      }
    } else if (len == 0) { /* the blank line after the trailers: the body's end */
      frame(d, "0\r\n\r\n");
      d->chunk = CH_DONE;
    } else if (++d->trailers > CHUNK_TRAILERS_MAX) {
      return refuse(d, "too many trailer fields");
    }
  }
  return moved;
}

void make_chunked(struct tunnel *t, double left, int unframed) {
  t->transfer = 1;
  t->up.left = -1;
  t->up.chunk = left > 0 ? CH_DATA : CH_CRLF;
  t->up.chunk_left = left;
  t->up.unframed = unframed;
  t->down.eof = t->down.shut = 1;
  t->down.left = -1;
}
