// A client of the resident host that lies, one way per run: argv[1] is the
// socket, argv[2] the lie. It prints the host's first reply line (or EOF).
// The request asks for `exec -- /bin/sh -c "touch MARKER"` (argv[3]): a host
// that believed the lie would create the marker.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  signal(SIGPIPE, SIG_IGN);
  const char *lie = argv[2];
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
  if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) return perror("connect"), 3;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return 4;
  char script[4200];
  snprintf(script, sizeof script, "touch %s", argv[3]);
  const char *claimed = strcmp(lie, "cwd") == 0 ? "/etc" : cwd;
  const char *args[] = {"exec", "--", "/bin/sh", "-c", script};
  const char *envs[] = {"PATH=/usr/bin:/bin", getenv("HOME") ? NULL : NULL};
  char home[4200], rt[4200], st[4200];
  snprintf(home, sizeof home, "HOME=%s", getenv("HOME") ? getenv("HOME") : "/");
  snprintf(rt, sizeof rt, "XDG_RUNTIME_DIR=%s", getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR") : "");
  snprintf(st, sizeof st, "XDG_STATE_HOME=%s", getenv("XDG_STATE_HOME") ? getenv("XDG_STATE_HOME") : "");
  const char *env[] = {envs[0], home, rt, st};
  char body[65536];
  size_t n = 0;
  n += (size_t)sprintf(body + n, "%s", claimed) + 1;
  for (int i = 0; i < 5; i++) n += (size_t)sprintf(body + n, "%s", args[i]) + 1;
  for (int i = 0; i < 4; i++) n += (size_t)sprintf(body + n, "%s", env[i]) + 1;
  uint32_t h[6] = {0, 5, 4, 4, (uint32_t)n, 0};
  memcpy(h, "VAK\1", 4);
  if (strcmp(lie, "argc") == 0) h[1] = 9;           // more arguments than the body holds
  if (strcmp(lie, "envc") == 0) h[2] = 1;           // fewer environment entries than it holds
  if (strcmp(lie, "size-huge") == 0) h[4] = 0xfffffff0u;
  if (strcmp(lie, "size-long") == 0) h[4] = (uint32_t)n + 100; // says more than it sends, then hangs up
  if (strcmp(lie, "size-short") == 0) h[4] = (uint32_t)n - 10; // says less: the rest is not its body
  if (strcmp(lie, "magic") == 0) memcpy(h, "VAK\2", 4);
  int dir = open(".", O_PATH | O_DIRECTORY);
  int file = open("/etc/hostname", O_RDONLY);
  int fds[6] = {0, 1, 2, dir, dir, dir};
  int nfds = 4;
  if (strcmp(lie, "fds3") == 0) nfds = 3;
  if (strcmp(lie, "fds6") == 0) nfds = 6;
  if (strcmp(lie, "cwd-file") == 0) fds[3] = file;
  union {
    char space[CMSG_SPACE(sizeof fds)];
    struct cmsghdr align;
  } c;
  memset(&c, 0, sizeof c);
  struct iovec iov = {.iov_base = h, .iov_len = 24};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.space, .msg_controllen = CMSG_SPACE(sizeof(int) * nfds)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
  cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
  memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
  if (strcmp(lie, "no-fds") == 0) m.msg_control = NULL, m.msg_controllen = 0;
  if (sendmsg(s, &m, 0) != 24) return perror("sendmsg"), 5;
  // A host that refuses the header at once may hang up before the body is out: the refusal it wrote first is
  // still there to read, so a short write is not the finding (and must not kill the liar with SIGPIPE).
  if (write(s, body, n) != (ssize_t)n && errno != EPIPE) return 6;
  if (strcmp(lie, "size-long") == 0) shutdown(s, SHUT_WR);
  char reply[4096];
  ssize_t r = read(s, reply, sizeof reply - 1);
  if (r <= 0) return puts("EOF"), 0;
  reply[r] = 0;
  char *nl = strchr(reply, '\n');
  if (nl) *nl = 0;
  puts(reply);
  return 0;
}
