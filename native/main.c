/* vak-launcher: runs one command inside Vak's Linux sandbox.
 *
 * Three processes in namespace mode:
 *   monitor  (this process, host namespaces): cgroups, uid maps, timeout,
 *            signal forwarding, the exit report.
 *   init     (pid 1 of new user/mount/pid/ipc/uts/net/cgroup namespaces): builds
 *            the mount view, reaps, and takes every process with it when the
 *            command exits or the monitor dies.
 *   payload  (pid 2): rlimits, no capabilities, Landlock, the write guard,
 *            seccomp, closed fds, exec.
 * Reduced mode (no user namespaces) has no init: the monitor is a subreaper
 * and kills whatever the command leaves behind. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

/* The guard's pid travels from the payload to whoever reaps the guard (init,
 * or the monitor in reduced mode), which stops everything if the guard dies:
 * without it every guarded call would fail, and the run would go on
 * half-broken and unrecorded. */
static int guard_pid_pipe[2] = {-1, -1};

static pid_t read_guard_pid(void) {
  static pid_t known = -1;
  if (known > 0 || guard_pid_pipe[0] < 0) return known;
  pid_t pid;
  if (read(guard_pid_pipe[0], &pid, sizeof pid) == (ssize_t)sizeof pid) known = pid;
  return known;
}

/* Called by the reaper for every child it reaps; returns nonzero (after
 * reporting) when that child was the guard and it died. The guard exits 0
 * only when no process is left to guard, which can be reaped before the
 * command's own exit is. */
static int guard_died(pid_t w, int status) {
  if (w <= 0 || w != read_guard_pid()) return 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  char line[160];
  snprintf(line, sizeof line, "{\"event\":\"guard-died\",\"%s\":%d}", WIFSIGNALED(status) ? "signal" : "status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  report_line(line);
  return 1;
}

/* ---- the payload ---- */

static void reset_signals(void) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
}

static void send_fd(int sock, int fd) {
  char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(sock, &m, MSG_NOSIGNAL) != 1) die_step("guard", "hand over the listener: %s", strerror(errno));
}

static int recv_fd(int sock) {
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1) _exit(0); /* the payload died before handing it over */
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) die_step("guard", "no listener received");
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

/* Starts the guard as a grandchild, so that the command never sees an extra
 * child of its own (a wait() loop would hang on it); init or the subreaper
 * monitor adopts it. Returns the socket on which to send the listener. */
static int start_guard(const struct plan *p) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) die_step("guard", "socketpair: %s", strerror(errno));
  pid_t mid = fork();
  if (mid < 0) die_step("guard", "fork: %s", strerror(errno));
  if (mid == 0) {
    pid_t g = fork();
    if (g < 0) die_step("guard", "fork: %s", strerror(errno));
    if (g > 0) _exit(write(guard_pid_pipe[1], &g, sizeof g) == (ssize_t)sizeof g ? 0 : EXIT_SETUP);
    close(sv[0]);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) signal(forwarded[i], SIG_IGN);
    int listener = recv_fd(sv[1]);
    close(sv[1]);
    /* Hold nothing of the command's: an inherited pipe end would keep the
     * host waiting for EOF after the command has exited. */
    int keep = report_fd(), lo = listener < keep ? listener : keep, hi = listener < keep ? keep : listener;
    if (lo > 0) syscall(SYS_close_range, 0, lo - 1, 0);
    if (hi - lo > 1) syscall(SYS_close_range, lo + 1, hi - 1, 0);
    syscall(SYS_close_range, hi + 1, ~0U, 0);
    install_guard_seccomp(p);
    guard_run(p, listener);
  }
  int st;
  while (waitpid(mid, &st, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die_step("guard", "could not start the write guard");
  close(sv[1]);
  return sv[0];
}

__attribute__((noreturn)) static void payload_main(const struct plan *p, const struct streams *st) {
  reset_signals();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) die_step("payload", "PR_SET_PDEATHSIG: %s", strerror(errno));
  /* Never the user's terminal (terminal.c). */
  streams_child(st);
  if (chdir(p->cwd) != 0) die_step("cwd", "%s: %s", p->cwd, strerror(errno));
  drop_privileges();
  /* Two Landlock layers: the guard lives in the outer one, the command in both.
   * The guard can then read the command's memory and fds (a nested domain),
   * while the command can neither signal the guard nor, in reduced mode, read
   * the host's /proc, which the guard needs to resolve "/proc/<pid>/cwd". */
  apply_landlock(p, 1);
  int guard_sock = p->guard ? start_guard(p) : -1;
  /* After the guard started: it must not inherit the command's file size,
   * CPU or memory ceilings, or the command could kill it by proxy. */
  apply_rlimits(p);
  apply_landlock(p, p->use_ns);
  int listener = install_seccomp(p, p->guard);
  if (p->guard) {
    send_fd(guard_sock, listener);
    close(listener);
    close(guard_sock);
  }
  /* The sandbox is complete; the command's first instruction waits for the host's word that the run's start is
   * on the record (vak builds the sandbox while the journal commits). EOF instead (the host could not record the
   * run, or died): nothing runs. */
  if (p->go_fd >= 0) {
    char go;
    ssize_t n;
    while ((n = read(p->go_fd, &go, 1)) < 0 && errno == EINTR) {}
    if (n != 1) _exit(EXIT_SETUP);
  }
  /* Nothing the host holds open reaches the command; the report fd closes on exec. */
  int rfd = report_fd();
  if (rfd >= 0 && rfd != 3) {
    if (dup3(rfd, 3, O_CLOEXEC) < 0) die_step("fds", "dup3: %s", strerror(errno));
    report_init(3);
  }
  if (syscall(SYS_close_range, rfd >= 0 ? 4 : 3, ~0U, 0) != 0) die_step("fds", "close_range: %s", strerror(errno));
  execvp(p->argv[0], p->argv);
  int e = errno;
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s", p->argv[0], e == ENOENT ? "command not found in the sandbox" : strerror(e));
  char js[1100], line[1300];
  jstr(js, sizeof js, msg);
  snprintf(line, sizeof line, "{\"event\":\"exec-error\",\"errno\":%d,\"message\":\"%s\"}", e, js);
  report_line(line);
  if (report_fd() < 0) fprintf(stderr, "vak-launcher: exec: %s\n", msg);
  _exit(e == ENOENT ? 127 : 126);
}

/* ---- init (namespace mode) ---- */

static void forward_to_all(int sig) { kill(-1, sig); }

static int init_main(const struct plan *p, int sync_rd, const struct streams *streams) {
  /* Die with the monitor; if it is already gone, the read below sees EOF. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) _exit(EXIT_SETUP);
  unsigned char flags;
  if (read(sync_rd, &flags, 1) != 1) _exit(EXIT_SETUP);
  close(sync_rd);
  streams_inside(streams);
  limits_use(flags);
  int gate_dir = build_view(p);
  const char *host = p->hostname ? p->hostname : "vak";
  if (sethostname(host, strlen(host)) != 0) die_step("uts", "sethostname: %s", strerror(errno));
  bring_loopback_up();
  {
    /* Name lookups fail at once and say which name (resolver.c); bound here, before the command exists. */
    int dns[2];
    resolver_sockets(dns);
    pid_t resolver = fork();
    if (resolver < 0) die_step("network", "fork resolver: %s", strerror(errno));
    if (resolver == 0) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) _exit(EXIT_SETUP);
      prctl(PR_SET_NAME, "vak-resolver", 0, 0, 0); /* told apart from the guard in ps and tests */
      resolver_run(p, dns);
    }
    close(dns[0]);
    if (dns[1] >= 0) close(dns[1]);
  }
  if (gate_dir >= 0) {
    int listening[2];
    relay_sockets(p, listening);
    pid_t relay = fork();
    if (relay < 0) die_step("network", "fork relay: %s", strerror(errno));
    if (relay == 0) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) _exit(EXIT_SETUP);
      prctl(PR_SET_NAME, "vak-relay", 0, 0, 0);
      relay_run(p, gate_dir, p->net_token, listening);
    }
    close(gate_dir);
    close(listening[0]);
    if (listening[1] >= 0) close(listening[1]);
  }

  if (pipe2(guard_pid_pipe, O_CLOEXEC | O_NONBLOCK) != 0) die_step("init", "pipe: %s", strerror(errno));
  pid_t payload = fork();
  if (payload < 0) die_step("init", "fork: %s", strerror(errno));
  if (payload == 0) payload_main(p, streams);
  close(guard_pid_pipe[1]);

  struct sigaction sa = {.sa_handler = forward_to_all};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaction(forwarded[i], &sa, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, __WALL | WUNTRACED);
    if (w < 0) {
      if (errno == EINTR) continue;
      die_step("init", "waitpid: %s", strerror(errno));
    }
    if (WIFSTOPPED(st)) {
      /* Ctrl-Z at the pty on a command that is not a shell: no one is there
       * to resume it (or its process group, which the pty stopped with it).
       * Without the pty, the user's shell stopped all of us and resumes us. */
      if (w == payload && streams->ctty) kill(-w, SIGCONT);
      continue;
    }
    if (guard_died(w, st)) return EXIT_SETUP; /* returning kills every other process in the namespace */
    if (w != payload) continue;
    /* Returning kills every other process in the namespace. */
    if (WIFSIGNALED(st)) {
      char line[96];
      snprintf(line, sizeof line, "{\"event\":\"signaled\",\"signal\":%d}", WTERMSIG(st));
      report_line(line);
      return 128 + WTERMSIG(st);
    }
    return WEXITSTATUS(st);
  }
}

/* ---- the monitor ---- */

static int signal_fd(void) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGALRM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGWINCH);
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) sigaddset(&set, forwarded[i]);
  if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) die_step("monitor", "sigprocmask: %s", strerror(errno));
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) die_step("monitor", "signalfd: %s", strerror(errno));
  return fd;
}

static void start_timer(const struct plan *p) {
  if (!p->timeout_ms) return;
  struct itimerval it = {{0, 0}, {(time_t)(p->timeout_ms / 1000), (suseconds_t)(p->timeout_ms % 1000) * 1000}};
  if (setitimer(ITIMER_REAL, &it, NULL) != 0) die_step("monitor", "setitimer: %s", strerror(errno));
}

/* Kills every remaining descendant (reduced mode, where no pid namespace does it). */
static void kill_descendants(void) {
  for (int round = 0; round < 1000; round++) {
    int found = 0;
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
      int pid = atoi(e->d_name);
      if (pid <= 0) continue;
      char path[64], buf[512];
      snprintf(path, sizeof path, "/proc/%d/stat", pid);
      FILE *f = fopen(path, "re");
      if (!f) continue;
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = 0;
      char *rp = strrchr(buf, ')');
      int ppid = 0;
      if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == getpid()) {
        kill(pid, SIGKILL);
        found = 1;
      }
    }
    closedir(d);
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    if (!found) return;
  }
}

static int is_stop_signal(int sig) {
  if (sig == SIGUSR1 || sig == SIGALRM) return 1;
  for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
    if (sig == forwarded[i]) return 1;
  return 0;
}

/* Forwards a signal: to init, which sends it to every process in the
 * namespace; in reduced mode to the command's whole process group when it
 * leads one (at an interactive terminal), else to the command itself. */
static void forward(const struct plan *p, pid_t child, int sig) {
  if (p->use_ns || kill(-child, sig) != 0) kill(child, sig);
}

static int monitor(const struct plan *p, pid_t child, int sfd, struct streams *st) {
  int timed_out = 0, code = -1, stopped = 0;
  start_timer(p);
  while (code < 0) {
    streams_step(st, sfd, 0); /* with no stream to move, this waits for a signal */
    if (st->exceeded && !stopped) {
      /* Past --max-output: everything, now. */
      stopped = 1;
      kill(child, SIGKILL);
      if (!p->use_ns) kill_descendants();
      char line[96];
      snprintf(line, sizeof line, "{\"event\":\"output-exceeded\",\"limit\":%lld}", st->budget);
      report_line(line);
    }
    struct signalfd_siginfo si;
    ssize_t n;
    while ((n = read(sfd, &si, sizeof si)) == (ssize_t)sizeof si) {
      int sig = (int)si.ssi_signo;
      if (sig == SIGALRM) {
        timed_out = 1;
        kill(child, SIGKILL);
      } else if (sig == SIGUSR1) {
        /* Cancel: everything, now (the broker's "kill the group and every descendant"). */
        kill(child, SIGKILL);
        if (!p->use_ns) kill_descendants();
      } else if (sig == SIGWINCH) {
        streams_winch(st);
      } else if (sig != SIGCHLD) {
        forward(p, child, sig);
      }
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) die_step("monitor", "signalfd read: %s", strerror(errno));
    int status;
    pid_t w;
    while ((w = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
      if (WIFSTOPPED(status)) {
        if (w == child && !p->use_ns && st->ctty) kill(-w, SIGCONT); /* as init does (reduced mode has none) */
        continue;
      }
      if (w == child) code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      else if (!p->use_ns && code < 0 && guard_died(w, status)) {
        kill(child, SIGKILL);
        code = EXIT_SETUP;
      }
    }
  }
  if (!p->use_ns) kill_descendants();
  /* What the command wrote before it ended still reaches its reader, unless
   * vak is told to stop (or the timeout comes) meanwhile. */
  for (int stop = 0; !stop && !streams_done(st);) {
    if (!streams_step(st, sfd, 1)) continue;
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      if (is_stop_signal((int)si.ssi_signo)) stop = 1;
      else if ((int)si.ssi_signo == SIGCHLD) while (waitpid(-1, NULL, WNOHANG) > 0) {}
    }
  }
  term_restore();
  limits_report_and_cleanup();
  if (timed_out) {
    char line[96];
    snprintf(line, sizeof line, "{\"event\":\"timeout\",\"ms\":%lld}", p->timeout_ms);
    report_line(line);
    return EXIT_TIMEOUT;
  }
  return code;
}

static void write_map(pid_t pid, const char *file, const char *data) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
  if (write_file(path, data) != 0) die_step("namespaces", "write %s: %s", file, strerror(errno));
}

static int run(const struct plan *p) {
  int sfd = signal_fd();
  static struct streams st;
  streams_setup(&st, p);
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) die_step("monitor", "pipe: %s", strerror(errno));
  if (!p->use_ns && pipe2(guard_pid_pipe, O_CLOEXEC | O_NONBLOCK) != 0) die_step("monitor", "pipe: %s", strerror(errno));
  long flags = SIGCHLD;
  if (p->use_ns)
    flags |= CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP;
  else if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    die_step("monitor", "PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
  pid_t child = (pid_t)syscall(SYS_clone, flags, 0, 0, 0, 0);
  if (child < 0)
    die_step("namespaces", "clone: %s%s", strerror(errno),
             errno == EPERM || errno == EINVAL || errno == ENOSPC ? " (user namespaces are unavailable; run `vak doctor`)" : "");
  if (child == 0) {
    close(sync[1]);
    close(sfd);
    if (p->use_ns) _exit(init_main(p, sync[0], &st));
    unsigned char fl;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || read(sync[0], &fl, 1) != 1) _exit(EXIT_SETUP);
    close(sync[0]);
    streams_inside(&st);
    limits_use(fl);
    payload_main(p, &st);
  }
  streams_parent(&st);
  close(sync[0]);
  if (!p->use_ns) close(guard_pid_pipe[1]);
  if (p->use_ns) {
    char map[64];
    write_map(child, "setgroups", "deny");
    snprintf(map, sizeof map, "%u %u 1", (unsigned)p->uid, (unsigned)p->uid);
    write_map(child, "uid_map", map);
    snprintf(map, sizeof map, "%u %u 1", (unsigned)p->gid, (unsigned)p->gid);
    write_map(child, "gid_map", map);
  }
  unsigned char cg = (unsigned char)limits_setup(p, child);
  if (write(sync[1], &cg, 1) != 1) die_step("monitor", "start the sandbox: %s", strerror(errno));
  close(sync[1]);
  return monitor(p, child, sfd, &st);
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--probe")) return probe_main();
  if (argc == 2 && !strcmp(argv[1], "--seccomp-table")) return seccomp_table_main();
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent) return EXIT_SETUP;
  static struct plan plan;
  parse_args(&plan, argc, argv);
  if (plan.report_fd >= 0 && fcntl(plan.report_fd, F_SETFD, FD_CLOEXEC) != 0)
    die_step("args", "--report-fd %d is not open", plan.report_fd);
  /* Blocking: the payload waits in read(2) for its word (the host's end may be a non-blocking socket of its own). */
  if (plan.go_fd >= 0 && (fcntl(plan.go_fd, F_SETFD, FD_CLOEXEC) != 0 || fcntl(plan.go_fd, F_SETFL, 0) != 0))
    die_step("args", "--go-fd %d is not open", plan.go_fd);
  if (plan.line_fd >= 0 && fcntl(plan.line_fd, F_SETFD, FD_CLOEXEC) != 0)
    die_step("args", "--line-fd %d is not open", plan.line_fd);
  if (plan.host_dir) {
    hostdir_env();
    hostdir_lifeline();
  }
  return run(&plan);
}
