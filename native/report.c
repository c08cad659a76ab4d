/* One JSON line per event on the report fd, read by the host. Lines stay under
 * PIPE_BUF so that writers in different processes never interleave. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher.h"

static int rfd = -1;
static void (*on_die)(void);

void report_on_die(void (*fn)(void)) { on_die = fn; }

void report_init(int fd) { rfd = fd; }
int report_fd(void) { return rfd; }

void report_line(const char *json) {
  if (rfd < 0) return;
  char buf[4096];
  int n = snprintf(buf, sizeof buf, "%s\n", json);
  if (n <= 0) return;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1, buf[n - 1] = '\n';
  ssize_t w;
  do w = write(rfd, buf, (size_t)n); while (w < 0 && errno == EINTR);
}

/* Escapes s as the inside of a JSON string, truncating to fit cap. */
void jstr(char *out, size_t cap, const char *s) {
  size_t o = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c && o + 7 < cap; c++) {
    if (*c == '"' || *c == '\\') { out[o++] = '\\'; out[o++] = (char)*c; }
    else if (*c < 0x20 || *c == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", *c);
    else out[o++] = (char)*c;
  }
  out[o] = 0;
}

static void emit(const char *event, const char *step, const char *fmt, va_list ap) {
  char msg[1024], jm[2048], js[128], line[2400];
  vsnprintf(msg, sizeof msg, fmt, ap);
  /* Standalone use has no host to explain the failure, so say it here. */
  if (rfd < 0) fprintf(stderr, "vak-launcher: %s: %s\n", step, msg);
  jstr(jm, sizeof jm, msg);
  jstr(js, sizeof js, step);
  snprintf(line, sizeof line, "{\"event\":\"%s\",\"step\":\"%s\",\"message\":\"%s\"}", event, js, jm);
  report_line(line);
}

void die_step(const char *step, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("setup-error", step, fmt, ap);
  va_end(ap);
  if (on_die) on_die();
  _exit(EXIT_SETUP);
}

void warn_step(const char *step, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("warning", step, fmt, ap);
  va_end(ap);
}

int write_file(const char *path, const char *data) {
  FILE *f = fopen(path, "we");
  if (!f) return -1;
  size_t n = strlen(data);
  int ok = fwrite(data, 1, n, f) == n;
  if (fclose(f) != 0) ok = 0;
  return ok ? 0 : -1;
}
