/* The seccomp filter compiler: rules (bpf.h) in, classic BPF out.
 *
 * Layout of the program:
 *   arch != f->arch            -> bad_arch
 *   nr >= X32 bit              -> bad_arch   (x32 calls share the x86-64 arch)
 *   nr >= first_unknown        -> unknown_action
 *   per rule: nr == rule.nr ?  -> its block : the next rule
 *     block: per clause, each test loads its argument's low word, masks it and
 *            jumps to the next clause on failure; all tests passed -> the
 *            clause's action; no clause matched -> the rule's action
 *   no rule matched            -> default_action
 * Every block ends in a return, so the accumulator holds nr at the start of
 * each rule. Jumps only go forward; each distance is computed from the sizes
 * of what it skips, and a distance that does not fit is an error, never a
 * silent wrap. */
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <stddef.h>

#include "bpf.h"

#define X32_BIT 0x40000000u
#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t)))

struct out {
  struct sock_filter *insn;
  unsigned len, cap;
  const char *err;
};

static void emit(struct out *o, struct sock_filter s) {
  if (o->len >= o->cap) {
    if (!o->err) o->err = "the filter is too long";
    return;
  }
  o->insn[o->len++] = s;
}

static void stmt(struct out *o, uint16_t code, uint32_t k) { emit(o, (struct sock_filter)BPF_STMT(code, k)); }

static void jump(struct out *o, uint16_t code, uint32_t k, unsigned jt, unsigned jf) {
  if (jt > 255 || jf > 255) {
    if (!o->err) o->err = "a jump is too long for classic BPF";
    return;
  }
  emit(o, (struct sock_filter)BPF_JUMP(code, k, (uint8_t)jt, (uint8_t)jf));
}

static unsigned test_size(const struct sc_test *t) {
  /* load, [and], compare */
  return t->op == SC_EQ && t->mask != 0xffffffffu ? 3 : 2;
}

static unsigned clause_size(const struct sc_clause *c) {
  unsigned n = 1; /* the return */
  for (unsigned i = 0; i < c->ntests; i++) n += test_size(&c->test[i]);
  return n;
}

static int holds(unsigned need, unsigned when) { return (need & ~when) == 0; }

static unsigned block_size(const struct sc_rule *r, unsigned when) {
  unsigned n = 1; /* the fallback return */
  for (unsigned i = 0; i < r->nclauses; i++)
    if (holds(r->clause[i].when, when)) n += clause_size(&r->clause[i]);
  return n;
}

static void emit_clause(struct out *o, const struct sc_clause *c) {
  unsigned left = clause_size(c);
  for (unsigned i = 0; i < c->ntests; i++) {
    const struct sc_test *t = &c->test[i];
    left -= test_size(t);
    stmt(o, BPF_LD | BPF_W | BPF_ABS, ARG_LO(t->arg));
    if (t->op == SC_ANY) {
      jump(o, BPF_JMP | BPF_JSET | BPF_K, t->mask, 0, left);
    } else {
      if (t->mask != 0xffffffffu) stmt(o, BPF_ALU | BPF_AND | BPF_K, t->mask);
      jump(o, BPF_JMP | BPF_JEQ | BPF_K, t->value & t->mask, 0, left);
    }
  }
  stmt(o, BPF_RET | BPF_K, c->action);
}

int sc_compile(const struct sc_filter *f, unsigned when, struct sock_filter *out, unsigned cap, const char **err) {
  struct out o = {.insn = out, .len = 0, .cap = cap, .err = NULL};
  for (unsigned i = 0; i < f->nrules && !o.err; i++) {
    const struct sc_rule *r = &f->rules[i];
    if (!holds(r->when, when)) continue;
    if (r->nr < 0 || r->nr >= f->first_unknown) o.err = "a rule names a system call past the reviewed ones";
    for (unsigned j = 0; j < i && !o.err; j++)
      if (f->rules[j].nr == r->nr && holds(f->rules[j].when, when)) o.err = "a system call is named by two rules";
    for (unsigned k = 0; k < r->nclauses && !o.err; k++)
      if (r->clause[k].ntests > SC_MAX_TESTS || r->clause[k].ntests == 0) o.err = "a clause has no test or too many";
  }
  stmt(&o, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  jump(&o, BPF_JMP | BPF_JEQ | BPF_K, f->arch, 1, 0);
  stmt(&o, BPF_RET | BPF_K, f->bad_arch);
  stmt(&o, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  jump(&o, BPF_JMP | BPF_JGE | BPF_K, X32_BIT, 0, 1);
  stmt(&o, BPF_RET | BPF_K, f->bad_arch);
  jump(&o, BPF_JMP | BPF_JGE | BPF_K, (uint32_t)f->first_unknown, 0, 1);
  stmt(&o, BPF_RET | BPF_K, f->unknown_action);
  for (unsigned i = 0; i < f->nrules && !o.err; i++) {
    const struct sc_rule *r = &f->rules[i];
    if (!holds(r->when, when)) continue;
    jump(&o, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)r->nr, 0, block_size(r, when));
    for (unsigned k = 0; k < r->nclauses; k++)
      if (holds(r->clause[k].when, when)) emit_clause(&o, &r->clause[k]);
    stmt(&o, BPF_RET | BPF_K, r->action);
  }
  stmt(&o, BPF_RET | BPF_K, f->default_action);
  if (o.err) {
    if (err) *err = o.err;
    return -1;
  }
  return (int)o.len;
}
