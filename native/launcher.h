/* Vak's Linux sandbox launcher: shared declarations.
 *
 * The launcher is single-threaded on purpose: Landlock applies per thread and a
 * multithreaded process cannot enter a user namespace. Every failed step exits
 * 125 after writing one JSON line that names the step. */
#ifndef VAK_LAUNCHER_H
#define VAK_LAUNCHER_H

#include <stdint.h>
#include <sys/types.h>

#define EXIT_SETUP 125
#define EXIT_TIMEOUT 124

enum op_kind {
  OP_RO,      /* bind a host path read-only */
  OP_RW,      /* bind a host path writable */
  OP_TMPFS,   /* private tmpfs, writable (arg: size in bytes, or NULL) */
  OP_MASK,    /* empty read-only tmpfs or empty file over an existing path */
  OP_DIR,     /* empty directory in the new root */
  OP_SYMLINK, /* symlink (arg: link text) */
  OP_FILE,    /* read-only file with the given content (arg) */
  OP_DEV,     /* device node bound from the host /dev (path is /dev/NAME) */
};

struct mount_op {
  enum op_kind kind;
  const char *path;
  const char *arg;
};

enum prot_kind {
  PROT_TREE,  /* the named entry and everything below it */
  PROT_FILE,  /* the entry itself: no create, write, rename or remove */
  PROT_ABS,   /* an absolute path and everything below it */
  PROT_NOREAD, /* as PROT_ABS, and not read either: a --deny-read path the view masks (guard_lookup.c) */
  PROT_NOLINKS, /* an absolute path (a host tool's state) at and below which only regular files and directories are
                 * made: no symbolic or hard link, FIFO, socket or device, made there or moved in (guard_links.c) */
};

struct protect_rule {
  enum prot_kind kind;
  const char *pattern; /* components joined by '/', e.g. ".git/hooks" */
};

#define MAX_OPS 512
#define MAX_RULES 2048

struct plan {
  int use_ns;          /* 1: namespaces and a private mount view; 0: reduced mode */
  int guard;           /* run the write guard (seccomp user notification) */
  int allow_inet;      /* inet sockets permitted (only inside a private netns) */
  int explain;         /* --explain: report paths the command looked for that are not in its view */
  int read_denied;     /* a PROT_NOREAD rule exists: the guard sees the command's lookups to refuse them by name */
  int foreground;      /* --foreground PID: the terminal at fds 0-1 is in the foreground for this run (the resident host checked its client's process group) */
  int foreground_of;   /* /proc/PID/stat of that client, open: while its process group is not the terminal's foreground, nothing typed is read; or -1 */
  const char *net_gate; /* host directory holding the egress gate's socket; NULL: no network */
  int net_port;         /* the relay's port on the sandbox's loopback */
  char net_token[72];   /* names this worker to the gate; read from --net-token-fd */
  struct mount_op ops[MAX_OPS];
  int nops;
  struct protect_rule rules[MAX_RULES];
  int nrules;
  const char *cwd;
  const char *hostname;
  long long max_procs;   /* 0: none */
  long long default_max_procs; /* used when max_procs is 0, only where it can be held */
  long long max_memory;  /* bytes, 0: none */
  long long max_fsize;   /* bytes, 0: none */
  long long max_nofile;  /* 0: inherit */
  long long cpu_seconds; /* 0: none */
  long long timeout_ms;  /* 0: none */
  long long max_output;  /* bytes of output through the monitor, 0: no limit */
  int report_fd;         /* JSON lines for the host; -1: none */
  int go_fd;             /* --go-fd: the command is exec'd only after one byte arrives here (the host's record of the run is durable); -1: at once */
  int line_fd;           /* --line-fd: a file of the host's where the monitor keeps whether the output where vak's own lines go ends a line; -1: none */
  const char *host_dir;  /* --host-dir: report, token, env and lifeline by name (hostdir.c); NULL: fds */
  uid_t uid;
  gid_t gid;
  char **argv;
};

/* report.c */
void report_init(int fd);
int report_fd(void);
void report_line(const char *json);
void jstr(char *out, size_t cap, const char *s);
__attribute__((noreturn, format(printf, 2, 3)))
void die_step(const char *step, const char *fmt, ...);
__attribute__((format(printf, 2, 3)))
void warn_step(const char *step, const char *fmt, ...);

/* report.c: called by die_step() before it exits (the monitor restores the terminal). */
void report_on_die(void (*fn)(void));

/* args.c */
void parse_args(struct plan *p, int argc, char **argv);

/* view.c: the private mount view (namespace mode only). Returns an O_PATH fd
 * of the egress gate's directory, opened before the host root went away, or -1. */
int build_view(const struct plan *p);
void bring_loopback_up(void);

/* landlock.c */
int landlock_abi(void);
/* with_proc: also allow reading /proc. Always true in namespace mode (the
 * sandbox's own procfs); in reduced mode only for the guard's outer layer. */
void apply_landlock(const struct plan *p, int with_proc);

void restrict_relay_landlock(void);

/* relay.c */
/* Bound and listening in init, before the command starts: a command that connects at once finds the relay there. */
void relay_sockets(const struct plan *p, int fds[2]);
void relay_run(const struct plan *p, int gate_dirfd, const char *token, int fds[2]) __attribute__((noreturn));

/* resolver.c: the sandbox's own DNS server on 127.0.0.1:53, which answers every name at once */
void resolver_sockets(int fds[2]);
void resolver_run(const struct plan *p, int fds[2]) __attribute__((noreturn));

/* seccomp.c: the table of rules (bpf.h) and its installation */
struct sc_filter;
const struct sc_filter *seccomp_table(void);
/* The conditions (W_* in bpf.h) under which the plan's filter is compiled. */
unsigned seccomp_conditions(const struct plan *p, int for_guard);
int install_seccomp(const struct plan *p, int want_listener);
void install_guard_seccomp(const struct plan *p);

/* guard.c */
void guard_run(const struct plan *p, int listener) __attribute__((noreturn));

/* limits.c */
enum procs_mech { PROCS_NONE, PROCS_PIDNS, PROCS_CGROUP, PROCS_RLIMIT };
#define LIMIT_PROCS_MASK 3
#define LIMIT_MEMORY_CGROUP 4
enum procs_mech choose_procs(const struct plan *p);
const char *procs_mechanism_name(enum procs_mech m);
const char *memory_mechanism(const struct plan *p);
int limits_setup(const struct plan *p, pid_t child);
void limits_use(int flags);
void limits_apply_pidns(const struct plan *p, const char *proc_dir);
void limits_report_and_cleanup(void);
void apply_rlimits(const struct plan *p);
int kernel_at_least(int major, int minor);

/* terminal.c: the command's standard streams (see there) */
struct sink {
  int fd;
  int sock;   /* written with MSG_DONTWAIT */
  int broken; /* its reader went away: what is left is dropped */
};
/* term_filter.c: the sequences of the command's output that act on the host past the terminal, dropped. */
struct term_filter {
  int state;
  char held[4];
  size_t nheld;
  char num[6];
  size_t nnum;
  char head[5];
  size_t nhead;
  char ctl[64];
  size_t nctl;
};
/* Filters n bytes into out (room for n + sizeof held + sizeof num + sizeof head); returns the bytes written. */
size_t term_filter(struct term_filter *f, const char *in, size_t n, char *out);
#define TERM_FILTER_SLACK 80

struct channel {
  int from;
  struct sink to;
  int counted; /* output, against --max-output */
  int filtered; /* to the real terminal: term_filter applies */
  struct term_filter filter;
  int open;
  size_t len, off;
  char buf[16384];
};
#define MAX_CHANNELS 4
struct streams {
  int master, slave;  /* the pty, or -1 */
  int ctty;           /* the slave becomes the payload's controlling terminal */
  int use_slave[3];   /* which of the payload's fds 0-2 it replaces */
  int pipe_w[3];      /* counted pipes in place of fds 1-2, or -1 */
  int ro_stdin;       /* a read-only descriptor of the terminal as stdin, or -1 */
  int winch_from;     /* the real terminal whose size the pty follows */
  struct channel ch[MAX_CHANNELS];
  int nch;
  long long budget, used;
  int exceeded;
  /* Where vak's own lines go (its fd 2), when the monitor relays what the command writes there: that channel, how
   * many writes it made and whether the last ended a line, kept in line_fd for vak (streams_step). */
  int err_ch;
  int line_fd;
  /* The channel of what is typed at the terminal, or -1; and the resident host's client (plan.foreground_of), or -1. */
  int in_ch;
  int foreground_of;
  int in_paused; /* the client's job is not the terminal's foreground: what is typed is the shell's, not read */
  unsigned long long err_writes;
  int err_at_start;
};
void streams_setup(struct streams *s, const struct plan *p); /* the monitor, before the clone */
void streams_child(const struct streams *s);                 /* the payload */
void streams_inside(const struct streams *s);                /* init, in the namespace: lets go of the monitor's ends */
void streams_parent(struct streams *s);                      /* the monitor, after the clone */
void streams_winch(struct streams *s);
int streams_step(struct streams *s, int sfd, int draining);  /* 1 when sfd is readable */
int streams_done(const struct streams *s);
void term_restore(void);

/* caps.c */
void drop_privileges(void);

/* probe.c */
int probe_main(void);

/* seccomp.c: `--seccomp-table`, the table as JSON (the container backend's outer profile is made from it) */
int seccomp_table_main(void);

/* hostdir.c: --host-dir DIR, for a launcher that vak could not start itself (the container backend) */
void hostdir_open(struct plan *p, const char *dir);
void hostdir_token(struct plan *p);
void hostdir_env(void);
void hostdir_lifeline(void);

/* util */
int write_file(const char *path, const char *data);

#endif
