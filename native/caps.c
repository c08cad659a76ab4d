/* Leaves the process with no capability in any set, no way to regain one by
 * exec (even as uid 0), and no_new_privs. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher.h"

static int last_cap(void) {
  /* PR_CAPBSET_READ fails with EINVAL past the kernel's last capability. */
  int c = 0;
  while (c < 63 && prctl(PR_CAPBSET_READ, c + 1, 0, 0, 0) >= 0) c++;
  return c;
}

static int has_setpcap(void) {
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  if (syscall(SYS_capget, &h, d) != 0) die_step("capabilities", "capget: %s", strerror(errno));
  return (d[0].effective >> CAP_SETPCAP) & 1;
}

void drop_privileges(void) {
  int last = last_cap();
  /* An unprivileged caller in reduced mode holds nothing to drop; no_new_privs
   * below keeps it that way across exec. Everyone else must drop for real. */
  if (has_setpcap()) {
    /* Without these, uid 0 would regain every capability on the next exec. */
    int bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
               SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) die_step("capabilities", "PR_SET_SECUREBITS: %s", strerror(errno));
    for (int c = 0; c <= last; c++)
      if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) die_step("capabilities", "PR_CAPBSET_DROP %d: %s", c, strerror(errno));
  } else if (geteuid() == 0) {
    die_step("capabilities", "running as uid 0 without CAP_SETPCAP: cannot lock out capabilities regained on exec");
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    die_step("capabilities", "clear ambient: %s", strerror(errno));
  struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct d[2];
  memset(d, 0, sizeof d);
  if (syscall(SYS_capset, &h, d) != 0) die_step("capabilities", "capset: %s", strerror(errno));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die_step("no_new_privs", "%s", strerror(errno));
  /* Verify rather than trust. */
  if (syscall(SYS_capget, &h, d) != 0) die_step("capabilities", "capget: %s", strerror(errno));
  if (d[0].permitted || d[1].permitted || d[0].effective || d[1].effective || d[0].inheritable || d[1].inheritable)
    die_step("capabilities", "capabilities remain after capset");
  if (geteuid() == 0)
    for (int c = 0; c <= last; c++)
      if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1) die_step("capabilities", "capability %d still in the bounding set", c);
}
