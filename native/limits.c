/* Resource limits that hold even when Vak runs as root.
 *
 * The kernel exempts uid 0 from RLIMIT_NPROC, even inside a user namespace, so
 * the process count is held by a pids cgroup where one can be created (always
 * for root on cgroup v1, or where v2 delegates the controller) and by
 * RLIMIT_NPROC for other users, or, cheapest, by the pid namespace's own
 * pid_max where the kernel has one (6.14+) and the limit is high enough. Memory is held by a memory cgroup, or by
 * RLIMIT_DATA where no cgroup is available (and the report says which). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"

/* Processes of ours inside the sandbox besides the command's: init, the guard
 * and the relay. */
#define OWN_PROCS 3

enum cg_version { CG_NONE, CG_V1, CG_V2 };

struct cgroup {
  enum cg_version version;
  char dir[600]; /* our cgroup, created under the caller's own */
};

static struct cgroup pids_cg, mem_cg;

/* Finds the caller's cgroup for a controller: "/sys/fs/cgroup/pids/<path>" on
 * v1, or the v2 directory when the controller is delegated there. */
static enum cg_version locate(const char *controller, char *base, size_t cap) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f) return CG_NONE;
  char line[1024], v2path[512] = "";
  enum cg_version found = CG_NONE;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = 0;
    const char *ctrls = c1 + 1, *path = c2 + 1;
    if (!*ctrls) { snprintf(v2path, sizeof v2path, "%s", path); continue; }
    char list[256];
    snprintf(list, sizeof list, "%s", ctrls);
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
      if (!strcmp(t, controller)) {
        snprintf(base, cap, "/sys/fs/cgroup/%s%s", controller, path);
        found = CG_V1;
      }
  }
  fclose(f);
  if (found) return found;
  if (!*v2path) return CG_NONE;
  /* v2: a child can use the controller only if our cgroup delegates it. */
  char sub[600], ctl[256] = "";
  snprintf(sub, sizeof sub, "/sys/fs/cgroup%s/cgroup.subtree_control", strcmp(v2path, "/") ? v2path : "");
  FILE *s = fopen(sub, "re");
  if (!s) return CG_NONE;
  if (!fgets(ctl, sizeof ctl, s)) ctl[0] = 0;
  fclose(s);
  char *save = NULL;
  for (char *t = strtok_r(ctl, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
    if (!strcmp(t, controller)) {
      snprintf(base, cap, "/sys/fs/cgroup%s", strcmp(v2path, "/") ? v2path : "");
      return CG_V2;
    }
  return CG_NONE;
}

/* Removes cgroups left behind by launchers that were killed outright. */
static void sweep_stale(const char *base) {
  DIR *d = opendir(base);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    int pid;
    if (sscanf(e->d_name, "vak-%d", &pid) != 1) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", base, e->d_name);
    rmdir(p);
  }
  closedir(d);
}

static int cg_write(const struct cgroup *cg, const char *file, long long value) {
  char p[800], v[32];
  snprintf(p, sizeof p, "%s/%s", cg->dir, file);
  snprintf(v, sizeof v, "%lld", value);
  return write_file(p, v);
}

static int cg_create(const char *controller, struct cgroup *cg) {
  char base[512];
  cg->version = locate(controller, base, sizeof base);
  if (cg->version == CG_NONE) return -1;
  sweep_stale(base);
  snprintf(cg->dir, sizeof cg->dir, "%s/vak-%d", base, getpid());
  if (mkdir(cg->dir, 0755) != 0 && errno != EEXIST) { cg->version = CG_NONE; return -1; }
  return 0;
}

static void cg_remove(struct cgroup *cg) {
  if (cg->version == CG_NONE) return;
  /* The namespace's processes are dead once init has been reaped, but the
   * kernel may still be tearing them down: retry briefly. */
  for (int i = 0; i < 100 && rmdir(cg->dir) != 0 && errno == EBUSY; i++) {
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  cg->version = CG_NONE;
}

static long long cg_event(const struct cgroup *cg, const char *file, const char *key) {
  char p[800], line[256];
  snprintf(p, sizeof p, "%s/%s", cg->dir, file);
  FILE *f = fopen(p, "re");
  if (!f) return 0;
  long long v = 0;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, kl) && line[kl] == ' ') v = atoll(line + kl + 1);
  fclose(f);
  return v;
}

/* A pid namespace's own pid_max (Linux 6.14+) caps how many tasks exist in it
 * at once, for root too, and costs one write. The kernel's floor is 301. */
#define PID_MAX_FLOOR 301

int kernel_at_least(int major, int minor) {
  struct utsname u;
  int a = 0, b = 0;
  if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &a, &b) != 2) return 0;
  return a > major || (a == major && b >= minor);
}

/* Once a pid namespace has used its pids up to pid_max, the kernel hands out
 * new ones from 300 upward: the cap shrinks to pid_max - 300 for long-running
 * sandboxes. It is used only for the default ceiling, sized for after the
 * wrap, so it is never a promise the user made: an explicit --max-procs is
 * held exactly by a cgroup or RLIMIT_NPROC. */
static long long pid_max_for(long long procs) { return procs + PID_MAX_FLOOR + OWN_PROCS; }

static int cgroup_usable(const char *controller) {
  char base[512];
  return locate(controller, base, sizeof base) != CG_NONE && access(base, W_OK) == 0;
}

enum procs_mech choose_procs(const struct plan *p) {
  long long n = p->max_procs ? p->max_procs : p->default_max_procs;
  if (!n) return PROCS_NONE;
  /* Cheapest first: moving a task into a cgroup waits for an RCU grace period
   * (milliseconds), which would dominate a short command's start-up. */
  if (!p->max_procs && p->use_ns && kernel_at_least(6, 14)) return PROCS_PIDNS;
  if (cgroup_usable("pids")) return PROCS_CGROUP;
  if (getuid() != 0) return PROCS_RLIMIT;
  if (p->max_procs)
    die_step("limits", "cannot hold --max-procs %lld as root here: no pids cgroup, and RLIMIT_NPROC does not apply to uid 0; "
                       "mount the pids controller or run Vak as a regular user",
             p->max_procs);
  return PROCS_NONE;
}

const char *procs_mechanism_name(enum procs_mech m) {
  static const char *names[] = {"none", "pid-namespace", "cgroup", "rlimit"};
  return names[m];
}

const char *memory_mechanism(const struct plan *p) {
  if (!p->max_memory) return "none";
  return cgroup_usable("memory") ? "cgroup" : "rlimit-data";
}

static enum procs_mech procs_used;

/* In the monitor: creates the cgroups the limits need and moves child (the
 * sandbox's init) into them. Returns the mechanisms, for limits_use(). */
int limits_setup(const struct plan *p, pid_t child) {
  procs_used = choose_procs(p);
  int flags = procs_used;
  if (procs_used == PROCS_CGROUP) {
    long long n = p->max_procs ? p->max_procs : p->default_max_procs;
    if (cg_create("pids", &pids_cg) != 0) die_step("limits", "create a pids cgroup: %s", strerror(errno));
    if (cg_write(&pids_cg, "pids.max", n + OWN_PROCS) != 0 || cg_write(&pids_cg, "cgroup.procs", child) != 0)
      die_step("limits", "pids cgroup %s: %s", pids_cg.dir, strerror(errno));
  }
  if (p->max_memory && cg_create("memory", &mem_cg) == 0) {
    const char *limit = mem_cg.version == CG_V1 ? "memory.limit_in_bytes" : "memory.max";
    if (cg_write(&mem_cg, limit, p->max_memory) != 0 || cg_write(&mem_cg, "cgroup.procs", child) != 0)
      die_step("limits", "memory cgroup %s: %s", mem_cg.dir, strerror(errno));
    /* Swap must not become a way around the limit. */
    int swap = mem_cg.version == CG_V1 ? cg_write(&mem_cg, "memory.memsw.limit_in_bytes", p->max_memory)
                                       : cg_write(&mem_cg, "memory.swap.max", 0);
    /* v1 without swap accounting has no memsw file; there is no swap to escape to then. */
    if (swap != 0 && errno != ENOENT) die_step("limits", "cap swap in %s: %s", mem_cg.dir, strerror(errno));
    flags |= LIMIT_MEMORY_CGROUP;
  }
  return flags;
}

static int limit_flags;

void limits_use(int flags) { limit_flags = flags; }

/* In init, with the new /proc mounted at proc_dir: the pid namespace's cap. */
void limits_apply_pidns(const struct plan *p, const char *proc_dir) {
  if ((limit_flags & LIMIT_PROCS_MASK) != PROCS_PIDNS) return;
  long long n = p->max_procs ? p->max_procs : p->default_max_procs;
  char path[256], v[32];
  snprintf(path, sizeof path, "%s/sys/kernel/pid_max", proc_dir);
  snprintf(v, sizeof v, "%lld", pid_max_for(n));
  if (write_file(path, v) != 0) die_step("limits", "set the pid namespace's pid_max: %s", strerror(errno));
}

void limits_report_and_cleanup(void) {
  long long procs_hit = pids_cg.version ? cg_event(&pids_cg, "pids.events", "max") : 0;
  long long oom = 0;
  if (mem_cg.version == CG_V1) oom = cg_event(&mem_cg, "memory.oom_control", "oom_kill");
  else if (mem_cg.version == CG_V2) oom = cg_event(&mem_cg, "memory.events", "oom_kill");
  char line[256];
  snprintf(line, sizeof line, "{\"event\":\"limits\",\"procs\":\"%s\",\"memory_cgroup\":%s,\"procs_hit\":%lld,\"oom_kills\":%lld}",
           procs_mechanism_name(procs_used), mem_cg.version ? "true" : "false", procs_hit, oom);
  report_line(line);
  cg_remove(&pids_cg);
  cg_remove(&mem_cg);
}

static void set_limit(int resource, const char *name, rlim_t soft, rlim_t hard) {
  struct rlimit rl = {soft, hard};
  if (setrlimit(resource, &rl) != 0) die_step("limits", "setrlimit %s: %s", name, strerror(errno));
}

void apply_rlimits(const struct plan *p) {
  set_limit(RLIMIT_CORE, "core", 0, 0);
  if (p->max_fsize) set_limit(RLIMIT_FSIZE, "fsize", (rlim_t)p->max_fsize, (rlim_t)p->max_fsize);
  if (p->max_nofile) set_limit(RLIMIT_NOFILE, "nofile", (rlim_t)p->max_nofile, (rlim_t)p->max_nofile);
  /* A soft limit below the hard one sends SIGXCPU first, then SIGKILL. */
  if (p->cpu_seconds) set_limit(RLIMIT_CPU, "cpu", (rlim_t)p->cpu_seconds, (rlim_t)p->cpu_seconds + 1);
  long long procs = p->max_procs ? p->max_procs : p->default_max_procs;
  if ((limit_flags & LIMIT_PROCS_MASK) == PROCS_RLIMIT)
    set_limit(RLIMIT_NPROC, "nproc", (rlim_t)(procs + OWN_PROCS), (rlim_t)(procs + OWN_PROCS));
  if (p->max_memory && !(limit_flags & LIMIT_MEMORY_CGROUP)) set_limit(RLIMIT_DATA, "data", (rlim_t)p->max_memory, (rlim_t)p->max_memory);
}
