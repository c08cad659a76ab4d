/* A tunnel of the egress gate's engine: two connected TCP sockets joined by
 * two pipes, moved by splice(2). engine.c owns the thread that polls tunnels
 * and what it tells JavaScript; this file owns how a tunnel moves and ends. */
#ifndef VAK_TUNNEL_H
#define VAK_TUNNEL_H
#include <stddef.h>
#include <stdint.h>

/* Larger pipes mean fewer wake-ups per byte (about a quarter more throughput
 * here), but they count against the user's pipe quota: only the first few
 * tunnels get them. */
#define PIPE_BIG (1024 * 1024)
#define BIG_PIPE_TUNNELS 8

/* A chunked body's bounds, the same as the gate's own parser's (src/net/http1.ts). */
#define CHUNK_LINE_MAX 1024
#define CHUNK_TRAILERS_MAX 32
enum { CH_NONE, CH_DATA, CH_CRLF, CH_SIZE, CH_TRAILER, CH_DONE };

/* One direction of a tunnel: from -> pipe -> to, after a prefix (bytes the gate had already read). */
struct dir {
  int from, to;
  int pipe[2];
  size_t in_pipe, cap;
  char *prefix;
  size_t plen, poff;
  double moved;
  int eof, shut;
  int full; /* a splice into the pipe found no room: its slots are used up by small pieces */
  /* A transfer (one way, a counted length): bytes still to read from `from`;
   * negative when the direction is not counted (a tunnel: until the end). */
  double left;
  /* A chunked transfer (chunked.c): where in the framing `from` is, CH_NONE if it is not one. */
  int chunk;
  int unframed;           /* the data alone, no framing written (an HTTP/1.0 client) */
  double chunk_left;      /* data bytes of the current chunk still to move */
  char line[CHUNK_LINE_MAX + 3];
  size_t llen;            /* framing bytes of the line being read, taken from `from` */
  int trailers;
  char out[24];           /* framing to write into the pipe, after the data before it */
  size_t olen;
  const char *bad;        /* why the framing was refused */
};

/* One client connection's byte budget: every byte received for the connection, by the gate's JavaScript
 * (budgetTake) and by each of the engine's tunnels and transfers, is counted in this one place as it is read,
 * so that two directions moving at once (an upload still going while the answer comes) cannot each spend
 * what is left. JavaScript and the engine's thread share it: used and refs change only atomically. */
struct budget {
  int64_t limit;
  int64_t used;
  int refs;
};

struct tunnel {
  int id;
  int fd[2]; /* client, upstream */
  struct dir up, down;
  struct budget *budget; /* shared with the connection's other transfers; one reference held */
  double received;       /* this tunnel's own share, for its end record */
  int64_t idle_ms, last;
  int cancelled;
  int hup[2]; /* poll has reported a hang-up or error on client, upstream */
  /* A transfer, not a tunnel: exactly up.left bytes go fd[0] -> fd[1], then it
   * ends without touching either socket (no shutdown, no reset), which stay
   * the gate's; the down direction is unused. */
  int transfer;
  int failed; /* which socket an error came from: 1 the one read, 2 the one written */
};

int64_t now_ms(void);
/* A budget of limit bytes, with one reference (NULL without memory). */
struct budget *budget_new(int64_t limit);
void budget_hold(struct budget *b);
void budget_release(struct budget *b);
/* Counts n bytes received; 1 once the connection's count has passed its limit (those bytes must not be passed on). */
int budget_spend(struct budget *b, size_t n);
/* The most a read should ask the kernel for (of want): what is left of the budget, or, once it is spent, one
 * byte, to find that the source has more; so that a reader takes at most a byte past it. */
size_t budget_room(struct budget *b, size_t want);
/* Why fd is not a connected TCP socket (a client, or an upstream), or NULL if it is one. */
const char *not_a_tcp_connection(int fd);
/* Makes the pipes; -1 (errno set) if it cannot. big: ask for large pipes. */
int open_pipes(struct tunnel *t, int big);
/* The poll events one side of a tunnel waits for: in is the direction read from it, out the one written to it. */
short wanted(const struct dir *in, const struct dir *out);
/* Runs one tunnel after poll; returns the outcome that ends it, or NULL. */
const char *service(struct tunnel *t, short client_rev, short upstream_rev, char *why, size_t cap);
/* Makes t a transfer of length bytes (after its prefix), from fd[0] to fd[1]. */
void make_transfer(struct tunnel *t, double length);
/* Makes t a chunked transfer fd[0] -> fd[1]: left data bytes of a chunk, then the rest of a chunked body,
 * its framing read and checked here and written again the gate's way (or not at all: unframed). */
void make_chunked(struct tunnel *t, double left, int unframed);
/* Moves what a chunked direction can: 1 if anything moved, 0 if not, or step()'s errors and -5 for malformed
 * framing (d->bad says why). */
int chunk_step(struct tunnel *t, struct dir *d);
/* Sets both sockets to reset, not close cleanly, when they are closed. */
void reset_on_close(struct tunnel *t);
void free_tunnel(struct tunnel *t);

#endif
