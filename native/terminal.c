/* The command's standard streams: it never holds the user's terminal.
 *
 * The payload never keeps vak's controlling terminal: /dev/tty does not open
 * (it lets go of it with TIOCNOTTY, or, at an interactive terminal, starts a
 * session of its own whose controlling terminal is the monitor's pty). Where vak's stdin, stdout or stderr is a
 * terminal, the monitor puts a pseudo-terminal of its own in between:
 *   - interactive (stdin and stdout are the terminal, vak in the foreground):
 *     the pty's slave is the command's controlling terminal and replaces
 *     every terminal among its fds 0-2; the real terminal goes raw and the
 *     monitor relays keystrokes in and output out, and forwards window size
 *     changes, so that job control, Ctrl-C, colours and full-screen programs
 *     work as they would directly;
 *   - otherwise every terminal among fds 1-2 is replaced by the slave (output
 *     only, nothing typed reaches it), and a terminal stdin in a pipeline
 *     (`vak exec -- cmd | less`) becomes a read-only descriptor of it: the
 *     command reads what it is given but cannot write to the terminal.
 * Everything that reaches the terminal goes through the monitor, and with
 * --max-output every byte of output (through the pty, and through pipes the
 * monitor puts in place of the other fds 1-2) counts against the limit; past
 * it the sandbox is stopped. The real terminal's modes are restored on every
 * way out of the monitor (and vak, a Node program, restores them again when
 * it exits, should the monitor be killed outright). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "launcher.h"

/* The monitor's terminal state, for term_restore() from any exit path. */
static struct {
  pid_t owner;
  int fd;
  int raw;
  int saved_ok;
  struct termios saved;
} term = {.owner = -1, .fd = -1};

void term_restore(void) {
  if (term.owner != getpid() || !term.saved_ok) return;
  struct termios now;
  if (term.raw) tcflush(term.fd, TCIFLUSH); /* answers to the command's terminal queries are not the shell's input */
  if (tcgetattr(term.fd, &now) != 0 || memcmp(&now, &term.saved, sizeof now)) tcsetattr(term.fd, TCSANOW, &term.saved);
  term.saved_ok = 0;
}

/* A descriptor of our own for a sink we must never block on: a tty or FIFO is
 * reopened non-blocking (the inherited one is shared with vak's caller, whose
 * flags we must not change); a socket is written with MSG_DONTWAIT. */
static void open_sink(struct sink *s, int fd) {
  struct stat st;
  s->fd = fd;
  s->sock = 0;
  s->broken = 0;
  if (fstat(fd, &st) != 0) return;
  if (S_ISSOCK(st.st_mode)) {
    s->sock = 1;
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    int own = open(p, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (own >= 0) s->fd = own;
  }
}

static ssize_t sink_write(struct sink *s, const char *buf, size_t n) {
  return s->sock ? send(s->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) : write(s->fd, buf, n);
}

static void channel(struct channel *c, int from, struct sink to, int counted) {
  memset(&c->filter, 0, sizeof c->filter);
  c->from = from;
  c->to = to;
  c->counted = counted;
  c->len = c->off = 0;
  c->open = 1;
}

/* Do two of our fds name one file (the same pipe, terminal or file: `2>&1`)? */
static int same_file(int a, int b) {
  struct stat x, y;
  return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Keeps, for vak, whether the output its own lines go to ends a line: one 8-byte word at offset 0 of line_fd, the
 * number of writes made there times two, plus one when the last of them ended with a newline. vak compares the count
 * with the one it saw when it last wrote a line of its own, which ends with a newline. */
static void publish_line(struct streams *s) {
  if (s->line_fd < 0) return;
  unsigned long long word = s->err_writes * 2 + (unsigned long long)(s->err_at_start ? 1 : 0);
  if (pwrite(s->line_fd, &word, sizeof word, 0) != (ssize_t)sizeof word) s->line_fd = -1; /* vak then guesses, as without */
}

void streams_setup(struct streams *s, const struct plan *p) {
  memset(s, 0, sizeof *s);
  s->master = s->slave = s->ro_stdin = -1;
  for (int k = 0; k < 3; k++) s->pipe_w[k] = -1;
  s->err_ch = -1;
  s->in_ch = -1;
  s->in_paused = 0;
  s->foreground_of = p->foreground_of;
  s->line_fd = p->line_fd;
  s->err_at_start = 1;
  s->budget = p->max_output;
  report_on_die(term_restore);
  int tty[3], any = 0, first = -1;
  for (int k = 0; k < 3; k++) {
    tty[k] = isatty(k);
    any |= tty[k];
  }
  for (int k = 1; k <= 3 && first < 0; k++)
    if (tty[k % 3]) first = k % 3; /* fd 1, then 2, then 0 */
  if (any) {
    s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s->master < 0 || grantpt(s->master) != 0 || unlockpt(s->master) != 0)
      die_step("terminal", "allocate a pseudo-terminal: %s", strerror(errno));
    char name[64];
    if (ptsname_r(s->master, name, sizeof name) != 0) die_step("terminal", "ptsname: %s", strerror(errno));
    s->slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s->slave < 0) die_step("terminal", "open %s: %s", name, strerror(errno));
    struct termios t;
    struct winsize ws;
    /* In the foreground: vak's process group is the terminal's, or (--foreground) the resident host's
     * client's is: the host is in no session of the terminal's, so it cannot ask the terminal itself. */
    int foreground = tty[0] && (p->foreground || tcgetpgrp(0) == getpgrp());
    int interactive = tty[0] && tty[1] && foreground;
    if (tcgetattr(first, &t) == 0) {
      struct termios slave_modes = t;
      /* Output only: the real terminal keeps its own newline translation. */
      if (!interactive) slave_modes.c_oflag &= ~(tcflag_t)ONLCR;
      tcsetattr(s->slave, TCSANOW, &slave_modes);
    }
    /* The terminal whose modes are ours to restore: stdin's, which the monitor
     * makes raw or the command may read (and set modes on) in a pipeline. */
    struct termios in_modes;
    if (tty[0] && tcgetattr(0, &in_modes) == 0) term.owner = getpid(), term.fd = 0, term.saved = in_modes, term.saved_ok = 1;
    if (ioctl(first, TIOCGWINSZ, &ws) == 0) ioctl(s->master, TIOCSWINSZ, &ws);
    s->winch_from = first;
    for (int k = interactive ? 0 : 1; k < 3; k++) s->use_slave[k] = tty[k];
    s->ctty = interactive;
    if (tty[0] && !interactive && !tty[1] && foreground) {
      /* A pipeline: the command reads the terminal as its input, read-only. */
      char path[64];
      snprintf(path, sizeof path, "/proc/self/fd/0");
      s->ro_stdin = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC);
    }
    if (tty[0] && !interactive && s->ro_stdin < 0) s->use_slave[0] = 1; /* in the background: nothing typed reaches it */
    struct sink out;
    open_sink(&out, first);
    s->ch[s->nch].filtered = 1;
    if (tty[2] && (first == 2 || same_file(first, 2))) s->err_ch = s->nch;
    channel(&s->ch[s->nch++], s->master, out, 1);
    if (interactive && term.saved_ok) {
      struct termios raw = term.saved;
      cfmakeraw(&raw);
      if (tcsetattr(0, TCSANOW, &raw) == 0) term.raw = 1;
      struct sink m = {.fd = s->master};
      s->in_ch = s->nch;
      channel(&s->ch[s->nch++], 0, m, 0);
      fcntl(s->master, F_SETFL, fcntl(s->master, F_GETFL) | O_NONBLOCK);
    }
  }
  /* Where vak cannot see whether its fd 2 ends a line (a pipe, a FIFO, a socket; a file it reads itself, a terminal
   * is relayed above), and vak asks (--line-fd), the command's output there goes through the monitor, which knows.
   * So does all of it with --max-output, to count it. */
  struct stat e;
  int err_blind = s->line_fd >= 0 && !tty[2] && fstat(2, &e) == 0 && (S_ISFIFO(e.st_mode) || S_ISSOCK(e.st_mode));
  int one = !tty[1] && !tty[2] && same_file(1, 2);
  for (int k = 1; k < 3; k++) {
    if (tty[k] || !(s->budget || (err_blind && (k == 2 || one)))) continue;
    /* fds 1 and 2 one file (2>&1): one pipe for both, so that what the command writes keeps its order. */
    if (k == 2 && one && s->pipe_w[1] >= 0) {
      s->pipe_w[2] = s->pipe_w[1];
      continue;
    }
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) != 0) die_step("output", "pipe: %s", strerror(errno));
    s->pipe_w[k] = pp[1];
    struct sink to;
    open_sink(&to, k);
    if (k == 2 || one) s->err_ch = s->nch;
    channel(&s->ch[s->nch++], pp[0], to, 1);
  }
  if (s->err_ch >= 0) publish_line(s);
}

void streams_child(const struct streams *s) {
  if (s->ctty) {
    /* A session of its own, with the pty as its controlling terminal. */
    if (setsid() < 0) die_step("terminal", "setsid: %s", strerror(errno));
    if (ioctl(s->slave, TIOCSCTTY, 0) != 0) die_step("terminal", "TIOCSCTTY: %s", strerror(errno));
  } else {
    /* No controlling terminal at all: let go of vak's, if it has one. Not by
     * setsid(), which costs a scheduler autogroup (milliseconds, waiting on
     * RCU) on every start; TIOCNOTTY drops it for this process and all it
     * starts. If even we cannot open /dev/tty, nothing started later can. */
    int t = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (t >= 0) {
      if (ioctl(t, TIOCNOTTY) != 0) die_step("terminal", "TIOCNOTTY: %s", strerror(errno));
      close(t);
    }
  }
  for (int k = 0; k < 3; k++) {
    int from = s->use_slave[k] ? s->slave : s->pipe_w[k] >= 0 ? s->pipe_w[k] : (k == 0 ? s->ro_stdin : -1);
    if (from >= 0 && dup2(from, k) != k) die_step("terminal", "dup2: %s", strerror(errno));
  }
}

void streams_inside(const struct streams *s) {
  /* The read ends of the monitor's pipes are the monitor's alone: held open in here (init, its resolver and relay),
   * they would keep a command writing into a pipe whose reader went away from ever getting EPIPE. */
  for (int i = 0; i < s->nch; i++)
    if (s->ch[i].counted && !s->ch[i].filtered) close(s->ch[i].from);
  if (s->foreground_of >= 0) close(s->foreground_of);
}

void streams_parent(struct streams *s) {
  if (s->slave >= 0) close(s->slave);
  if (s->ro_stdin >= 0) close(s->ro_stdin);
  for (int k = 0; k < 3; k++)
    if (s->pipe_w[k] >= 0 && (k != 2 || s->pipe_w[2] != s->pipe_w[1])) close(s->pipe_w[k]);
  s->slave = s->ro_stdin = -1;
  /* A sink that went away must not kill the monitor. */
  signal(SIGPIPE, SIG_IGN);
  /* Never stopped for touching the terminal from the background: the timer must keep running. */
  signal(SIGTTIN, SIG_IGN);
  signal(SIGTTOU, SIG_IGN);
}

void streams_winch(struct streams *s) {
  struct winsize ws;
  if (s->master >= 0 && ioctl(s->winch_from, TIOCGWINSZ, &ws) == 0) ioctl(s->master, TIOCSWINSZ, &ws);
}

/* Whether the resident host's client's process group is still its terminal's foreground (/proc/PID/stat: pgrp
 * and tpgid, after the command's name, which may hold anything); no, once it cannot be read (the client is gone). */
static int client_in_foreground(int stat_fd) {
  char buf[1024];
  ssize_t n = pread(stat_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  long pgrp = 0, tpgid = -1;
  if (!p || sscanf(p + 1, " %*c %*d %ld %*d %*d %ld", &pgrp, &tpgid) != 2) return 0;
  return pgrp > 0 && pgrp == tpgid;
}

/* Writes what channel i holds, as much as its sink takes now. */
static void put_out(struct streams *s, int i) {
  struct channel *c = &s->ch[i];
  ssize_t w = sink_write(&c->to, c->buf + c->off, c->len - c->off);
  if (w > 0) {
    c->off += (size_t)w;
    if (i == s->err_ch) {
      s->err_writes++;
      s->err_at_start = c->buf[c->off - 1] == '\n';
      publish_line(s);
    }
  } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
    /* The reader is gone: drop the rest. A pipe of ours in place of fds 1-2 is closed, so that the command's
     * next write there fails (EPIPE, SIGPIPE) as it would have without the monitor in between: `vak exec --
     * yes 2>&1 | head -1` ends. */
    c->to.broken = 1;
    if (!c->filtered && c->counted && c->open) {
      close(c->from);
      c->open = 0;
    }
  }
  if (c->off >= c->len) c->len = c->off = 0;
}

/* Moves what is ready. Returns 1 when sfd is readable. */
int streams_step(struct streams *s, int sfd, int draining) {
  struct pollfd pf[1 + MAX_CHANNELS];
  int idx[1 + MAX_CHANNELS];
  int n = 0;
  pf[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
  idx[n++] = -1;
  int timeout = -1;
  for (int i = 0; i < s->nch; i++) {
    struct channel *c = &s->ch[i];
    /* Keystrokes wait while the client's job is stopped or in the background; looked at again every 100 ms. */
    if (i == s->in_ch && s->in_paused && c->len <= c->off) {
      if (!client_in_foreground(s->foreground_of)) {
        timeout = 100;
        continue;
      }
      s->in_paused = 0;
    }
    if (c->len > c->off && !c->to.broken) pf[n] = (struct pollfd){.fd = c->to.fd, .events = POLLOUT};
    else if (c->open && !(draining && !c->counted)) pf[n] = (struct pollfd){.fd = c->from, .events = POLLIN};
    else continue;
    idx[n++] = i;
  }
  if (poll(pf, (nfds_t)n, timeout) < 0) {
    if (errno == EINTR) return 0;
    die_step("monitor", "poll: %s", strerror(errno));
  }
  for (int j = 1; j < n; j++) {
    struct channel *c = &s->ch[idx[j]];
    if (!pf[j].revents) continue;
    if (c->len > c->off && !c->to.broken) {
      put_out(s, idx[j]);
      continue;
    }
    /* In-process the monitor is in vak's process group: once the user's shell has the terminal back (vak stopped),
     * its read fails (EIO: SIGTTIN is ignored) and what is typed stays the shell's. Outside the terminal's session
     * (the resident host's launcher) the kernel does not stop it: the client's process group is looked at instead,
     * and nothing is read until it has the terminal again (fg). */
    if (idx[j] == s->in_ch && s->foreground_of >= 0 && !client_in_foreground(s->foreground_of)) {
      s->in_paused = 1;
      continue;
    }
    /* A filtered channel reads into raw and keeps room for what the filter held back from the last read. */
    char raw[sizeof c->buf - TERM_FILTER_SLACK];
    ssize_t r = read(c->from, c->filtered ? raw : c->buf, c->filtered ? sizeof raw : sizeof c->buf);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r <= 0) { /* EOF, or EIO once every slave descriptor is closed */
      c->open = 0;
      continue;
    }
    if (c->counted && s->budget) {
      if (s->exceeded) continue; /* the sandbox is being stopped: nothing more goes out */
      long long left = s->budget - s->used;
      if (r > left) {
        r = (ssize_t)left;
        s->exceeded = 1;
      }
      s->used += r;
    }
    if (c->to.broken) continue;
    c->len = c->filtered ? term_filter(&c->filter, raw, (size_t)r, c->buf) : (size_t)r;
    c->off = 0;
    /* Most sinks take it at once: no round through poll for each read. */
    if (c->len) put_out(s, idx[j]);
  }
  return pf[0].revents != 0;
}

int streams_done(const struct streams *s) {
  for (int i = 0; i < s->nch; i++) {
    const struct channel *c = &s->ch[i];
    if (!c->counted) continue; /* keystrokes are not waited for */
    if (c->open || (c->len > c->off && !c->to.broken)) return 0;
  }
  return 1;
}
