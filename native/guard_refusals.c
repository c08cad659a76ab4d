/* Calls the guard only refuses, so that the refusal gets a line of its own:
 * a new namespace (unshare, clone with a CLONE_NEW* flag), and a TCP socket
 * without a network grant. The filter would refuse them by itself; handing
 * them here first costs nothing on ordinary calls (only these come here) and
 * turns "a nested sandbox failed for no reason" (bubblewrap, Codex's or Claude
 * Code's own sandbox, a container runtime) or "permission denied" from a
 * client into a line that says why and what would grant it. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <sys/socket.h>
#include <stdio.h>
#include <sys/syscall.h>

#include "guard.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static int refuse_namespace(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  static const struct {
    unsigned long flag;
    const char *name;
  } NS[] = {{CLONE_NEWUSER, "user"}, {CLONE_NEWNS, "mount"}, {CLONE_NEWPID, "pid"}, {CLONE_NEWNET, "network"},
            {CLONE_NEWIPC, "ipc"}, {CLONE_NEWUTS, "uts"}, {CLONE_NEWCGROUP, "cgroup"}, {CLONE_NEWTIME, "time"}};
  char what[160] = "";
  size_t o = 0;
  for (size_t i = 0; i < sizeof NS / sizeof NS[0]; i++)
    if ((a[0] & NS[i].flag) && o + 16 < sizeof what) o += (size_t)snprintf(what + o, sizeof what - o, "%s%s", o ? ", " : "", NS[i].name);
  char path[200];
  snprintf(path, sizeof path, "(a new %s namespace)", what);
  log_denial(c, path,
             "a sandbox inside the sandbox: bubblewrap, a container runtime or a tool's own sandbox cannot start inside Vak's; "
             "run the tool with its own sandbox off (Vak's presets for agent CLIs do), Vak's holds it");
  return -EPERM;
}

static int refuse_tcp(struct call *c, const __u64 *a, struct target *t, struct target *u) {
  log_denial(c, a[0] == AF_INET6 ? "(an IPv6 TCP socket)" : "(a TCP socket)",
             "no network grant: --allow-net HOST reaches a host, through the egress gate");
  return -EACCES;
}

const struct guard_op REFUSAL_OPS[] = {
    {SYS_socket, "socket", refuse_tcp},
    {SYS_unshare, "unshare", refuse_namespace},
    {SYS_clone, "clone", refuse_namespace},
};
const unsigned NREFUSAL_OPS = sizeof REFUSAL_OPS / sizeof REFUSAL_OPS[0];
