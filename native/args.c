/* The launch plan arrives as argv, computed by the TypeScript policy core.
 * Anything unknown or malformed is refused: the launcher never guesses. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher.h"

static long long number(const char *flag, const char *s) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *s == 0 || *end != 0 || v < 0) die_step("args", "%s needs a non-negative integer, got '%s'", flag, s);
  return v;
}

static const char *abs_path(const char *flag, const char *s) {
  if (s[0] != '/') die_step("args", "%s needs an absolute path, got '%s'", flag, s);
  if (strlen(s) >= PATH_MAX) die_step("args", "%s path too long", flag);
  return s;
}

static void add_op(struct plan *p, enum op_kind k, const char *path, const char *arg) {
  if (p->nops >= MAX_OPS) die_step("args", "too many mount operations (max %d)", MAX_OPS);
  p->ops[p->nops++] = (struct mount_op){k, path, arg};
}

static void add_rule(struct plan *p, enum prot_kind k, const char *pat) {
  if (p->nrules >= MAX_RULES) die_step("args", "too many protection rules (max %d)", MAX_RULES);
  if (!*pat || strstr(pat, "//") || pat[strlen(pat) - 1] == '/') die_step("args", "bad protection pattern '%s'", pat);
  if (k != PROT_ABS && k != PROT_NOREAD && k != PROT_NOLINKS && pat[0] == '/') die_step("args", "relative protection pattern expected, got '%s'", pat);
  p->rules[p->nrules++] = (struct protect_rule){k, pat};
}

/* The worker's token arrives on an fd, never in argv: a sandboxed process can
 * read init's command line from /proc/1/cmdline. */
static void read_token(struct plan *p, int fd) {
  ssize_t n = pread(fd, p->net_token, sizeof p->net_token - 1, 0);
  close(fd);
  if (n < 16) die_step("args", "--net-token-fd: no token");
  p->net_token[n] = 0;
  for (ssize_t k = 0; k < n; k++)
    if (!strchr("0123456789abcdef", p->net_token[k])) die_step("args", "--net-token-fd: malformed token");
}

/* The resident host's client's /proc/PID/stat, held open: it names that process, never one that takes its pid later. */
static int client_stat(const char *flag, long long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (pid < 2 || fd < 0) die_step("args", "%s %lld: cannot open %s: %s", flag, pid, path, pid < 2 ? "not a client's pid" : strerror(errno));
  return fd;
}

void parse_args(struct plan *p, int argc, char **argv) {
  memset(p, 0, sizeof *p);
  p->use_ns = 1;
  p->report_fd = -1;
  p->go_fd = -1;
  p->line_fd = -1;
  p->foreground_of = -1;
  p->uid = getuid();
  p->gid = getgid();
  int i = 1;
#define NEED(n) do { if (i + (n) >= argc) die_step("args", "%s needs %d value(s)", a, n); } while (0)
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) { i++; break; }
    else if (!strcmp(a, "--reduced")) p->use_ns = 0;
    else if (!strcmp(a, "--guard")) p->guard = 1;
    else if (!strcmp(a, "--allow-inet")) p->allow_inet = 1;
    else if (!strcmp(a, "--explain")) p->explain = 1;
    else if (!strcmp(a, "--foreground")) { NEED(1); p->foreground = 1; p->foreground_of = client_stat(a, number(a, argv[++i])); }
    else if (!strcmp(a, "--ro")) { NEED(1); add_op(p, OP_RO, abs_path(a, argv[++i]), NULL); }
    else if (!strcmp(a, "--rw")) { NEED(1); add_op(p, OP_RW, abs_path(a, argv[++i]), NULL); }
    else if (!strcmp(a, "--mask")) { NEED(1); add_op(p, OP_MASK, abs_path(a, argv[++i]), NULL); }
    else if (!strcmp(a, "--dir")) { NEED(1); add_op(p, OP_DIR, abs_path(a, argv[++i]), NULL); }
    else if (!strcmp(a, "--dev")) {
      NEED(1);
      const char *d = abs_path(a, argv[++i]);
      if (strncmp(d, "/dev/", 5) || !d[5] || strchr(d + 5, '/')) die_step("args", "--dev needs /dev/NAME, got '%s'", d);
      add_op(p, OP_DEV, d, NULL);
    }
    else if (!strcmp(a, "--tmpfs")) {
      NEED(2);
      const char *pa = abs_path(a, argv[++i]);
      if (number(a, argv[i + 1]) == 0) die_step("args", "--tmpfs %s: a size of 0 would mean no limit", pa);
      add_op(p, OP_TMPFS, pa, argv[++i]);
    }
    else if (!strcmp(a, "--symlink")) { NEED(2); const char *pa = abs_path(a, argv[++i]); add_op(p, OP_SYMLINK, pa, argv[++i]); }
    else if (!strcmp(a, "--file")) { NEED(2); const char *pa = abs_path(a, argv[++i]); add_op(p, OP_FILE, pa, argv[++i]); }
    else if (!strcmp(a, "--protect-tree")) { NEED(1); add_rule(p, PROT_TREE, argv[++i]); }
    else if (!strcmp(a, "--protect-file")) { NEED(1); add_rule(p, PROT_FILE, argv[++i]); }
    else if (!strcmp(a, "--protect-abs")) { NEED(1); add_rule(p, PROT_ABS, abs_path(a, argv[++i])); }
    else if (!strcmp(a, "--protect-nolinks")) { NEED(1); add_rule(p, PROT_NOLINKS, abs_path(a, argv[++i])); }
    else if (!strcmp(a, "--protect-noread")) { NEED(1); add_rule(p, PROT_NOREAD, abs_path(a, argv[++i])); p->read_denied = 1; }
    else if (!strcmp(a, "--net-gate")) { NEED(1); p->net_gate = abs_path(a, argv[++i]); p->allow_inet = 1; }
    else if (!strcmp(a, "--net-port")) { NEED(1); p->net_port = (int)number(a, argv[++i]); }
    else if (!strcmp(a, "--net-token-fd")) { NEED(1); read_token(p, (int)number(a, argv[++i])); }
    else if (!strcmp(a, "--go-fd")) { NEED(1); p->go_fd = (int)number(a, argv[++i]); }
    else if (!strcmp(a, "--line-fd")) { NEED(1); p->line_fd = (int)number(a, argv[++i]); }
    else if (!strcmp(a, "--cwd")) { NEED(1); p->cwd = abs_path(a, argv[++i]); }
    else if (!strcmp(a, "--hostname")) { NEED(1); p->hostname = argv[++i]; }
    else if (!strcmp(a, "--max-procs")) { NEED(1); p->max_procs = number(a, argv[++i]); }
    else if (!strcmp(a, "--default-max-procs")) { NEED(1); p->default_max_procs = number(a, argv[++i]); }
    else if (!strcmp(a, "--max-memory")) { NEED(1); p->max_memory = number(a, argv[++i]); }
    else if (!strcmp(a, "--max-fsize")) { NEED(1); p->max_fsize = number(a, argv[++i]); }
    else if (!strcmp(a, "--max-nofile")) { NEED(1); p->max_nofile = number(a, argv[++i]); }
    else if (!strcmp(a, "--cpu-seconds")) { NEED(1); p->cpu_seconds = number(a, argv[++i]); }
    else if (!strcmp(a, "--timeout-ms")) { NEED(1); p->timeout_ms = number(a, argv[++i]); }
    else if (!strcmp(a, "--max-output")) { NEED(1); p->max_output = number(a, argv[++i]); }
    else if (!strcmp(a, "--setenv")) {
      /* A variable the dynamic loader reads (LD_PRELOAD, …) for the command: vak keeps it out of the launcher's own
       * environment, where it would act on the launcher, on the host; set now, after the loader is done, it reaches
       * only the command (the launcher execs nothing else). */
      NEED(1);
      char *e = argv[++i];
      const char *eq = strchr(e, '=');
      if (!eq || eq == e) die_step("args", "--setenv needs NAME=VALUE, got '%s'", e);
      if (putenv(e) != 0) die_step("args", "putenv: %s", strerror(errno));
    }
    else if (!strcmp(a, "--host-dir")) {
      NEED(1);
      if (p->report_fd >= 0) die_step("args", "--host-dir and --report-fd exclude each other");
      hostdir_open(p, abs_path(a, argv[++i]));
    }
    else if (!strcmp(a, "--report-fd")) {
      if (p->host_dir) die_step("args", "--host-dir and --report-fd exclude each other");
      NEED(1);
      p->report_fd = (int)number(a, argv[++i]);
      report_init(p->report_fd);
    }
    else die_step("args", "unknown option '%s'", a);
  }
#undef NEED
  if (i >= argc) die_step("args", "no command given after --");
  if (!p->cwd) die_step("args", "--cwd is required");
  if (p->host_dir && p->net_gate) {
    if (p->net_token[0]) die_step("args", "--host-dir carries the token: --net-token-fd is not used with it");
    hostdir_token(p);
  }
  if (p->net_gate && (p->net_port < 1 || p->net_port > 65535 || !p->net_token[0]))
    die_step("args", "--net-gate needs --net-port and --net-token-fd");
  if (p->net_gate && !p->use_ns) die_step("args", "reduced mode has no private network namespace: network grants are refused");
  p->argv = &argv[i];
}
