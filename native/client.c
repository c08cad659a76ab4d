// vak-client: `vak exec` through the resident host (src/resident/), for a
// start-up that Node cannot match. It decides nothing: it hands the host its
// argv, cwd (as a directory descriptor too), environment and stdio descriptors
// (SCM_RIGHTS), forwards the stop signals, and exits with the status the host
// sends. When there is no host it starts one for next time and runs this
// command in Node, in-process, exactly as `vak exec` without a host; it does
// the same when the host answers "fallback" (a flag the host does not serve, a
// terminal that is not interactive). If the host goes away while the command
// runs, the sandbox dies with it (the launcher's parent-death signal) and this
// exits 125. At an interactive terminal the host's launcher puts its pty in
// between as in-process; this forwards the window's changes (SIGWINCH comes
// here, the terminal's foreground), and puts the terminal's modes back as they
// were if the host did not (it was killed while the terminal was raw).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define EXIT_REFUSED 125
#define MAX_LINE 4096

extern char **environ;

static int host_fd = -1;
/** Set once the whole request is out: a signal before that waits in pending (a line then would split the body). */
static volatile sig_atomic_t sent, pending;

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "vak: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(EXIT_REFUSED);
}

/** bin/vak.cjs, from where this binary is (build/Release/vak-client). */
static void cli_path(char *out, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) die("cannot find the vak-client binary (%s)", strerror(errno));
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  if ((size_t)snprintf(out, size, "%s/../../bin/vak.cjs", self) >= size) die("installation path too long: %s", self);
}

/** VAK_RESIDENT=only: the host or nothing (for tests, and users who want to know). */
static int only;

/** `vak ARGS...` in Node, in-process: what bin/vak.cjs does without a host. */
static void in_process_because(int argc, char **argv, const char *why) {
  if (only) die("no resident host served this (%s); VAK_RESIDENT=only runs nothing in-process", why);
  char cli[PATH_MAX + 32];
  cli_path(cli, sizeof cli);
  char **a = calloc((size_t)argc + 2, sizeof *a);
  if (!a) die("%s", strerror(ENOMEM));
  a[0] = "node", a[1] = cli;
  for (int i = 1; i < argc; i++) a[i + 1] = argv[i];
  if (host_fd >= 0) close(host_fd);
  // A stop signal that came while the host was asked: this process was told to stop, so it stops.
  if (pending) signal(pending, SIG_DFL), raise(pending);
  execvp("node", a);
  die("cannot run node: %s", strerror(errno));
}

/**
 * Starts `vak host` detached (its own session, stdio on /dev/null), and does not wait for it. It starts once
 * this process (by then `vak exec` in Node, in-process) has exited, or after 10 s: on two cores a host starting
 * beside the command it was started for would slow it down. One fork, not waited for: the child is this
 * process's (then Node's) until that exits, and nothing reaps it but init; a double fork and its wait cost the
 * first command about a millisecond more (bench/resident.js, "cold"; measured pinned to one core).
 */
static void start_host(void) {
  char cli[PATH_MAX + 32];
  cli_path(cli, sizeof cli);
  pid_t self = getpid();
  if (fork() != 0) return;
  setsid();
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) _exit(127);
  dup2(null, 0), dup2(null, 1), dup2(null, 2);
  syscall(SYS_close_range, 3, ~0U, 0);
  int pidfd = (int)syscall(SYS_pidfd_open, self, 0);
  if (pidfd >= 0) {
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    poll(&p, 1, 10000);
    close(pidfd);
  }
  execlp("node", "node", cli, "host", (char *)NULL);
  _exit(127);
}

/** The host's socket, as src/policy/state.ts places Vak's runtime directory; 0 if it cannot be named. */
static int socket_path(char *out, size_t size) {
  const char *rt = getenv("XDG_RUNTIME_DIR");
  int n;
  if (rt && rt[0] == '/') {
    n = snprintf(out, size, "%s/vak/host.sock", rt);
  } else {
    const char *st = getenv("XDG_STATE_HOME");
    if (st && st[0] == '/') {
      n = snprintf(out, size, "%s/vak/run/host.sock", st);
    } else {
      const char *home = getenv("HOME");
      struct passwd *pw;
      if (!home || !home[0]) home = (pw = getpwuid(getuid())) ? pw->pw_dir : NULL;
      if (!home) return 0;
      n = snprintf(out, size, "%s/.local/state/vak/run/host.sock", home);
    }
  }
  return n > 0 && (size_t)n < size;
}

static void send_signal(int sig);

/** A stop signal, or the window's change: to the host once the request is out (a line before it would split the body). */
static void forward(int sig) {
  if (sent) {
    send_signal(sig);
    return;
  }
  if (sig != SIGWINCH) pending = sig; /* before the request, the launcher reads the size itself */
}

static void send_signal(int sig) {
  char line[32];
  int n = snprintf(line, sizeof line, "signal %d\n", sig);
  if (host_fd >= 0 && n > 0) (void)!send(host_fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/** The terminal's modes before the host had it, put back on the way out if they differ (never from the background: SIGTTOU). */
static struct termios saved_modes;
static int modes_saved;

static int finish(int code) {
  struct termios now;
  if (modes_saved && tcgetpgrp(0) == getpgrp() && (tcgetattr(0, &now) != 0 || memcmp(&now, &saved_modes, sizeof now) != 0)) {
    tcflush(0, TCIFLUSH); /* what the command's terminal answered is not the shell's input */
    tcsetattr(0, TCSANOW, &saved_modes);
  }
  return code;
}

static int send_all(int fd, const char *p, size_t len) {
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n, len -= (size_t)n;
  }
  return 0;
}

/** The request: a 24-byte header ("VAK\1", argc, envc, fds, body bytes, 0) and cwd, argv and environ as NUL-ended strings. */
static int send_request(int s, int argc, char **argv) {
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return -1;
  int dir = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -1;
  uint32_t envc = 0;
  size_t body = strlen(cwd) + 1;
  for (int i = 1; i < argc; i++) body += strlen(argv[i]) + 1;
  for (char **e = environ; *e; e++) body += strlen(*e) + 1, envc++;
  // Over the host's limit (src/resident/request.ts MAX_BODY): such a command runs in-process, as without a host.
  if (body > (1u << 20)) return close(dir), errno = E2BIG, -1;
  char *buf = malloc(24 + body), *p = buf + 24;
  if (!buf) return close(dir), -1;
  uint32_t head[6] = {0, (uint32_t)(argc - 1), envc, 4, (uint32_t)body, 0};
  memcpy(head, "VAK\1", 4);
  memcpy(buf, head, 24);
  p = stpcpy(p, cwd) + 1;
  for (int i = 1; i < argc; i++) p = stpcpy(p, argv[i]) + 1;
  for (char **e = environ; *e; e++) p = stpcpy(p, *e) + 1;

  int fds[4] = {0, 1, 2, dir};
  union {
    char space[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {.iov_base = buf, .iov_len = 24};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t n;
  do n = sendmsg(s, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  close(dir);
  int r = n == 24 ? send_all(s, buf + 24, body) : -1;
  free(buf);
  return r;
}

#define in_process(argc, argv) in_process_because(argc, argv, strerror(errno))

/**
 * A host that refuses at once (another uid, a request it will not take) writes its line and closes, and
 * the request still being sent then fails (EPIPE): its line is read here, so that the refusal is what
 * the user sees, not the broken pipe. Waits at most 200 ms for it; 0 when there is none.
 */
static int refusal(int s, char *line, size_t size) {
  struct pollfd p = {.fd = s, .events = POLLIN};
  if (poll(&p, 1, 200) <= 0) return 0;
  ssize_t n = read(s, line, size - 1);
  if (n <= 0) return 0;
  line[n] = 0;
  char *nl = memchr(line, '\n', (size_t)n);
  if (nl) *nl = 0;
  return strncmp(line, "refused ", 8) == 0;
}

/**
 * A closed fd 0, 1 or 2 becomes /dev/null, as Node makes it when vak runs in-process: else the host's socket
 * (or the cwd's descriptor) would take that number, and the host would be handed it as the command's stdio (a
 * command holding a connection to the host, reading its replies, or writing "signal N" lines to it).
 */
static void stdio_open(void) {
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    int null = open("/dev/null", O_RDWR); /* the lowest free number: fd, those below it are open */
    if (null != fd) die("cannot open /dev/null for a closed standard descriptor (%s)", null < 0 ? strerror(errno) : "it got another number");
  }
}

int main(int argc, char **argv) {
  stdio_open();
  const char *mode = getenv("VAK_RESIDENT");
  int off = mode && strcmp(mode, "off") == 0;
  only = mode && strcmp(mode, "only") == 0;
  if (off || argc < 2 || strcmp(argv[1], "exec") != 0) in_process_because(argc, argv, "not vak exec");

  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (!socket_path(addr.sun_path, sizeof addr.sun_path)) in_process(argc, argv);
  host_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (host_fd < 0) in_process(argc, argv);
  if (connect(host_fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    // No host (or a stale socket): start one for the next command, and run this one as without it.
    int err = errno;
    if ((err == ENOENT || err == ECONNREFUSED) && !only && !(mode && strcmp(mode, "no-start") == 0)) start_host();
    errno = err;
    in_process(argc, argv);
  }
  // From here the host may start the command: a stop signal is for it, forwarded (after the request).
  struct sigaction sa = {.sa_handler = forward, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
  for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) sigaction(stops[i], &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  modes_saved = isatty(0) && tcgetattr(0, &saved_modes) == 0;
  // Nothing has run yet: a host that cannot take the request leaves the command to Node.
  if (send_request(host_fd, argc, argv) != 0) {
    int err = errno;
    char said[MAX_LINE + 1];
    if (refusal(host_fd, said, sizeof said)) die("the resident host refused: %s", said + 8);
    errno = err;
    in_process(argc, argv);
  }
  sent = 1;
  if (pending) forward(pending);

  char line[MAX_LINE + 1];
  size_t got = 0;
  for (;;) {
    ssize_t n = read(host_fd, line + got, MAX_LINE - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      finish(0);
      fprintf(stderr, "vak: the resident host went away while the command ran; the sandbox was stopped with it\n");
      return EXIT_REFUSED;
    }
    got += (size_t)n;
    char *nl;
    while ((nl = memchr(line, '\n', got))) {
      *nl = 0;
      if (strncmp(line, "exit ", 5) == 0) {
        long code = strtol(line + 5, NULL, 10);
        return finish(code >= 0 && code <= 255 ? (int)code : EXIT_REFUSED);
      }
      if (strncmp(line, "fallback", 8) == 0) in_process_because(argc, argv, line);
      if (strncmp(line, "refused ", 8) == 0) die("the resident host refused: %s", line + 8);
      size_t used = (size_t)(nl - line) + 1;
      memmove(line, nl + 1, got - used);
      got -= used;
    }
    if (got == MAX_LINE) die("%s", "the resident host sent a line longer than 4 KiB");
  }
}
