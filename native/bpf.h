/* A seccomp filter as data, and its compiler (bpf.c).
 *
 * A filter is a list of rules, one per system call: clauses tried in order,
 * each a conjunction of at most two tests on the low 32 bits of an argument,
 * and the action when no clause matches. Every rule and clause carries the
 * conditions under which it is part of the filter (the plan's mode, network,
 * guard). The compiler computes every jump itself; nothing is hand-counted.
 *
 * Why not libseccomp: 2.5 (Debian 12) cannot give a system call a fallback
 * other than the filter's default (socket: allow two kinds, EACCES for the
 * rest), refuses rules whose action equals the default, compares one
 * argument at most once per rule, has no range (every number from 463 up),
 * and its 32-bit comparisons still require the high word to be zero, so that
 * ioctl(fd, TIOCSTI | 1 << 32) passes a rule on TIOCSTI while the kernel runs
 * TIOCSTI (tried here). It would also be a build dependency of every
 * install. */
#ifndef VAK_BPF_H
#define VAK_BPF_H

#include <linux/filter.h>
#include <stdint.h>

/* Conditions a rule or clause can require (all of them must hold). */
#define W_ALL 0u
#define W_COMMAND 1u /* the command's filter, not the guard's or the relay's */
#define W_GUARD 2u   /* the write guard performs path-taking writes */
#define W_REDUCED 4u /* no namespaces: the host's processes and IPC are shared */
#define W_INET 8u    /* inet sockets are granted (inside the private netns) */
#define W_EXPLAIN 16u /* vak exec --explain: the guard sees the command's lookups too, and lets them go on */
#define W_NOREAD 32u  /* a --deny-read path in the view: the guard sees opens for reading and execve, to refuse it by name */
#define W_MAX 64u    /* every condition set is below this */

enum sc_op {
  SC_EQ,  /* (arg & mask) == value */
  SC_ANY, /* (arg & mask) != 0 */
};

struct sc_test {
  uint8_t arg; /* 0..5 */
  uint8_t op;  /* enum sc_op */
  uint32_t mask;
  uint32_t value;
};

#define SC_MAX_TESTS 2
#define SC_MAX_CLAUSES 12

struct sc_clause {
  unsigned when;
  uint32_t action;
  uint8_t ntests;
  struct sc_test test[SC_MAX_TESTS];
};

struct sc_rule {
  int nr;
  const char *name;
  unsigned when;
  uint32_t action; /* when no clause matches */
  uint8_t nclauses;
  struct sc_clause clause[SC_MAX_CLAUSES];
  const char *why;
};

struct sc_filter {
  uint32_t arch;           /* the only audit architecture accepted */
  uint32_t bad_arch;       /* another architecture, or an x32 call */
  int first_unknown;       /* system calls numbered from here on are not reviewed */
  uint32_t unknown_action;
  uint32_t default_action; /* a reviewed call no rule names */
  const struct sc_rule *rules;
  unsigned nrules;
};

#define SC_MAX_INSNS 1024

/* Compiles the rules that hold under conditions `when` into out (cap
 * instructions). Returns the length, or -1 with *err set (a rule too long for
 * a jump, a system call named twice, a number past first_unknown, no room). */
int sc_compile(const struct sc_filter *f, unsigned when, struct sock_filter *out, unsigned cap, const char **err);

#endif
