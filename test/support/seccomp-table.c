/* Test helper: the seccomp table (native/seccomp.c) and its compiler
 * (native/bpf.c), checked without a sandbox.
 *
 *   seccomp-table check            every variant compiled, run through a BPF
 *                                  interpreter and compared with what the
 *                                  table says, call by call; loaded into the
 *                                  kernel; and the compiler's refusals
 *   seccomp-table probes VARIANT   the calls test/attacks/seccomp.test.ts makes
 *                                  for real inside the sandbox, one per line:
 *                                  "nr a0 .. a5 expected name"
 *
 * The reference below reads the table directly; it shares no code with the
 * compiler. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bpf.h"
#include "launcher.h"

#define BAD 0xdeadbeefu

static uint32_t reference(const struct sc_filter *f, unsigned when, uint32_t arch, uint32_t nr, const uint64_t a[6]) {
  if (arch != f->arch || nr >= 0x40000000u) return f->bad_arch;
  if (nr >= (uint32_t)f->first_unknown) return f->unknown_action;
  for (unsigned i = 0; i < f->nrules; i++) {
    const struct sc_rule *r = &f->rules[i];
    if ((r->when & ~when) || (uint32_t)r->nr != nr) continue;
    for (unsigned k = 0; k < r->nclauses; k++) {
      const struct sc_clause *c = &r->clause[k];
      if (c->when & ~when) continue;
      int all = 1;
      for (unsigned t = 0; t < c->ntests; t++) {
        uint32_t v = (uint32_t)a[c->test[t].arg] & c->test[t].mask;
        all &= c->test[t].op == SC_ANY ? v != 0 : v == (c->test[t].value & c->test[t].mask);
      }
      if (all) return c->action;
    }
    return r->action;
  }
  return f->default_action;
}

/* The subset of classic BPF the compiler emits; anything else is BAD. */
static uint32_t interpret(const struct sock_filter *p, int n, const struct seccomp_data *d) {
  uint32_t acc = 0;
  for (int pc = 0, steps = 0; pc >= 0 && pc < n && steps < 100000; steps++) {
    const struct sock_filter *i = &p[pc];
    switch (i->code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (i->k % 4 || i->k + 4 > sizeof *d) return BAD;
        memcpy(&acc, (const char *)d + i->k, 4);
        pc++;
        break;
      case BPF_ALU | BPF_AND | BPF_K: acc &= i->k; pc++; break;
      case BPF_JMP | BPF_JEQ | BPF_K: pc += 1 + (acc == i->k ? i->jt : i->jf); break;
      case BPF_JMP | BPF_JGE | BPF_K: pc += 1 + (acc >= i->k ? i->jt : i->jf); break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += 1 + ((acc & i->k) ? i->jt : i->jf); break;
      case BPF_RET | BPF_K: return i->k;
      default: return BAD;
    }
  }
  return BAD;
}

typedef void (*probe_fn)(void *ctx, uint32_t arch, uint32_t nr, const uint64_t a[6], const char *name);

static uint32_t low_bit(uint32_t m) { return m & -m; }

/* Argument vectors that exercise every clause of every rule: zeros, each
 * clause satisfied, each of its tests broken in turn, and the same with high
 * words set (only the low word may count). Then every other number. */
static void each_probe(const struct sc_filter *f, unsigned when, probe_fn fn, void *ctx) {
  static const uint64_t zero[6];
  for (unsigned i = 0; i < f->nrules; i++) {
    const struct sc_rule *r = &f->rules[i];
    if (r->when & ~when) continue;
    fn(ctx, f->arch, (uint32_t)r->nr, zero, r->name);
    for (unsigned k = 0; k < r->nclauses; k++) {
      const struct sc_clause *c = &r->clause[k];
      uint64_t a[6] = {0};
      for (unsigned t = 0; t < c->ntests; t++) {
        const struct sc_test *x = &c->test[t];
        a[x->arg] = x->op == SC_ANY ? (a[x->arg] | low_bit(x->mask)) : ((a[x->arg] & ~(uint64_t)x->mask) | (x->value & x->mask));
      }
      fn(ctx, f->arch, (uint32_t)r->nr, a, r->name);
      uint64_t hi[6];
      memcpy(hi, a, sizeof hi);
      for (unsigned t = 0; t < c->ntests; t++) hi[c->test[t].arg] |= 1ULL << 32;
      fn(ctx, f->arch, (uint32_t)r->nr, hi, r->name);
      for (unsigned t = 0; t < c->ntests; t++) {
        const struct sc_test *x = &c->test[t];
        uint64_t b[6];
        memcpy(b, a, sizeof b);
        b[x->arg] = x->op == SC_ANY ? (b[x->arg] & ~(uint64_t)x->mask) : (b[x->arg] ^ low_bit(x->mask));
        fn(ctx, f->arch, (uint32_t)r->nr, b, r->name);
        b[x->arg] |= 0xffffffff00000000ULL;
        fn(ctx, f->arch, (uint32_t)r->nr, b, r->name);
      }
    }
  }
  for (int nr = 0; nr < f->first_unknown + 40; nr++) {
    int named = 0;
    for (unsigned i = 0; i < f->nrules; i++) named |= f->rules[i].nr == nr && !(f->rules[i].when & ~when);
    if (!named) fn(ctx, f->arch, (uint32_t)nr, zero, nr < f->first_unknown ? "unnamed" : "unreviewed");
  }
  fn(ctx, f->arch, 0x40000000u | 39, zero, "x32 getpid");
  fn(ctx, AUDIT_ARCH_I386, 20, zero, "i386 getpid");
}

struct check {
  const struct sock_filter *prog;
  int len;
  unsigned when;
  const struct sc_filter *f;
  unsigned probes, mismatches;
};

static void check_one(void *ctx, uint32_t arch, uint32_t nr, const uint64_t a[6], const char *name) {
  struct check *c = ctx;
  struct seccomp_data d = {.nr = (int)nr, .arch = arch};
  memcpy(d.args, a, sizeof d.args);
  uint32_t want = reference(c->f, c->when, arch, nr, a), got = interpret(c->prog, c->len, &d);
  c->probes++;
  if (want != got && c->mismatches++ < 20)
    printf("MISMATCH when=%u %s nr=%u a0=%#llx a1=%#llx a2=%#llx: table %#x, compiled %#x\n", c->when, name, nr,
           (unsigned long long)a[0], (unsigned long long)a[1], (unsigned long long)a[2], want, got);
}

/* Does the kernel accept the program? Tried in a child, which then exits. */
static int kernel_accepts(const struct sock_filter *prog, int len) {
  pid_t pid = fork();
  if (pid == 0) {
    struct sock_fprog fp = {.len = (unsigned short)len, .filter = (struct sock_filter *)prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(2);
    _exit(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) == 0 ? 0 : 1);
  }
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int compiler_refuses(const char *what, const struct sc_rule *rules, unsigned n) {
  struct sc_filter f = *seccomp_table();
  f.rules = rules;
  f.nrules = n;
  struct sock_filter out[SC_MAX_INSNS];
  const char *err = NULL;
  int r = sc_compile(&f, W_COMMAND, out, SC_MAX_INSNS, &err);
  printf("refuses %s: %s\n", what, r < 0 ? err : "NO (compiled)");
  return r < 0;
}

static int check(void) {
  const struct sc_filter *f = seccomp_table();
  int failed = 0;
  unsigned probes = 0;
  for (unsigned when = 0; when < W_MAX; when++) {
    struct sock_filter prog[SC_MAX_INSNS];
    const char *err = NULL;
    int len = sc_compile(f, when, prog, SC_MAX_INSNS, &err);
    if (len < 0) {
      printf("COMPILE when=%u: %s\n", when, err);
      failed++;
      continue;
    }
    struct check c = {.prog = prog, .len = len, .when = when, .f = f};
    each_probe(f, when, check_one, &c);
    probes += c.probes;
    if (c.mismatches) failed++;
    if (!kernel_accepts(prog, len)) {
      printf("KERNEL refused the program for when=%u\n", when);
      failed++;
    }
    printf("variant when=%u: %d instructions, %u probes, %u mismatches\n", when, len, c.probes, c.mismatches);
  }
  /* The compiler's own refusals, on small tables of their own. */
  struct sc_rule twice[2] = {{.nr = 1, .name = "write", .action = SECCOMP_RET_KILL_PROCESS},
                             {.nr = 1, .name = "write", .action = SECCOMP_RET_KILL_PROCESS}};
  failed += !compiler_refuses("a call named twice", twice, 2);
  struct sc_rule past = {.nr = 463, .name = "setxattrat", .action = SECCOMP_RET_KILL_PROCESS};
  failed += !compiler_refuses("a number past the reviewed ones", &past, 1);
  struct sc_rule empty = {.nr = 1, .name = "write", .action = SECCOMP_RET_KILL_PROCESS, .nclauses = 1};
  failed += !compiler_refuses("a clause without a test", &empty, 1);
  /* 12 clauses of two masked tests is 85 instructions: fine. A block past 255 needs more than one rule can hold,
   * so the jump check is tried with a tiny instruction budget instead. */
  struct sc_filter small = *f;
  struct sock_filter out[8];
  const char *err = NULL;
  int r = sc_compile(&small, W_COMMAND, out, 8, &err);
  printf("refuses a program past its room: %s\n", r < 0 ? err : "NO (compiled)");
  failed += r >= 0;
  printf("%u probes over %u variants; %s\n", probes, W_MAX, failed ? "FAILED" : "ok");
  return failed ? 1 : 0;
}

static void print_probe(void *ctx, uint32_t arch, uint32_t nr, const uint64_t a[6], const char *name) {
  const struct check *c = ctx;
  uint32_t want = reference(c->f, c->when, arch, nr, a);
  char what[32];
  if (want == SECCOMP_RET_ALLOW) snprintf(what, sizeof what, "allow");
  else if (want == SECCOMP_RET_USER_NOTIF) snprintf(what, sizeof what, "notify");
  else if (want == SECCOMP_RET_KILL_PROCESS) snprintf(what, sizeof what, "kill");
  else if ((want & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO) snprintf(what, sizeof what, "errno:%u", want & SECCOMP_RET_DATA);
  else snprintf(what, sizeof what, "other:%#x", want);
  printf("%s %#x %#llx %#llx %#llx %#llx %#llx %#llx %s %s\n", arch == AUDIT_ARCH_I386 ? "i386" : "x86_64", nr,
         (unsigned long long)a[0], (unsigned long long)a[1], (unsigned long long)a[2], (unsigned long long)a[3],
         (unsigned long long)a[4], (unsigned long long)a[5], what, name);
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "check")) return check();
  if (argc == 3 && !strcmp(argv[1], "probes")) {
    /* The command's filter as vak launches it: always with the guard. */
    struct plan p = {.guard = 1, .use_ns = 1};
    if (!strcmp(argv[2], "inet")) p.allow_inet = 1;
    else if (!strcmp(argv[2], "reduced")) p.use_ns = 0;
    else if (strcmp(argv[2], "namespaces")) return 2;
    struct check c = {.when = seccomp_conditions(&p, 0), .f = seccomp_table()};
    each_probe(c.f, c.when, print_probe, &c);
    return 0;
  }
  fprintf(stderr, "usage: seccomp-table check | probes namespaces|inet|reduced\n");
  return 2;
}
