/* What the command writes to the user's terminal, less what would reach past it.
 *
 * The command's output is relayed to the real terminal as it is (colours, cursor moves and full-screen
 * programs need every control sequence), except the few sequences that make the terminal act on the
 * host outside the terminal: OSC 52 and kitty's OSC 5522 (write the host's clipboard, where the user's next
 * paste into a host shell runs it), iTerm2's OSC 1337 (File= saves a file to the host's Downloads) and
 * kitty's OSC 5113 (file transfer). Both spellings of the introducer are seen (ESC ] and the C1 form in
 * UTF-8), and so are the wrappers that carry one to an outer terminal: tmux's DCS passthrough
 * (ESC P tmux; ... ESC \) and screen's (a DCS whose payload starts with ESC). A dropped sequence is
 * dropped whole, through its terminator (BEL, ST, CAN, SUB), however the bytes are split between reads.
 * kitty's graphics commands that make the terminal read a file or shared memory on the host (APC G with
 * t=f, t=t or t=s) are dropped too; images sent inline (t=d) pass. */
#include <string.h>

#include "launcher.h"

enum { NORMAL, ESC_SEEN, C2_SEEN, OSC_NUM, OSC_PASS, OSC_DROP, DROP_ESC, DROP_C2, DCS_HEAD, DCS_PASS, DCS_DROP, DCS_DROP_ESC, APC_HEAD };

/* kitty's graphics protocol names its transmission medium with t=: f, t and s make the terminal itself
 * open a file or shared memory on the host (and answer OK or ENOENT back to the command). */
static int host_medium(const char *ctl, size_t n) {
  for (size_t i = 0; i + 2 < n; i++) {
    if ((i == 0 || ctl[i - 1] == ',') && ctl[i] == 't' && ctl[i + 1] == '=' && (ctl[i + 2] == 'f' || ctl[i + 2] == 't' || ctl[i + 2] == 's')) return 1;
  }
  return 0;
}

static int dropped_osc(const char *num, size_t n) {
  static const char *const kinds[] = {"52", "1337", "5113", "5522"};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    if (strlen(kinds[k]) == n && !memcmp(kinds[k], num, n)) return 1;
  return 0;
}

size_t term_filter(struct term_filter *f, const char *in, size_t n, char *out) {
  size_t o = 0;
#define EMIT(b) (out[o++] = (char)(b))
#define EMIT_HELD() (memcpy(out + o, f->held, f->nheld), o += f->nheld, f->nheld = 0)
  for (size_t i = 0; i < n; i++) {
    unsigned char b = (unsigned char)in[i];
  again:
    switch (f->state) {
    case NORMAL:
      if (b == 0x1b) f->state = ESC_SEEN, f->held[0] = (char)b, f->nheld = 1;
      else if (b == 0xc2) f->state = C2_SEEN, f->held[0] = (char)b, f->nheld = 1;
      else EMIT(b);
      break;
    case ESC_SEEN:
    case C2_SEEN: {
      int esc = f->state == ESC_SEEN;
      if ((esc && b == ']') || (!esc && b == 0x9d)) f->state = OSC_NUM, f->held[f->nheld++] = (char)b, f->nnum = 0;
      else if ((esc && b == 'P') || (!esc && b == 0x90)) f->state = DCS_HEAD, f->held[f->nheld++] = (char)b, f->nhead = 0;
      else if ((esc && b == '_') || (!esc && b == 0x9f)) f->state = APC_HEAD, f->held[f->nheld++] = (char)b, f->nctl = 0;
      else {
        EMIT_HELD();
        f->state = NORMAL;
        goto again;
      }
      break;
    }
    case OSC_NUM:
      if (b >= '0' && b <= '9' && f->nnum < sizeof f->num) {
        f->num[f->nnum++] = (char)b;
        break;
      }
      if (dropped_osc(f->num, f->nnum)) {
        f->nheld = 0;
        f->state = OSC_DROP;
        goto again;
      }
      EMIT_HELD();
      memcpy(out + o, f->num, f->nnum), o += f->nnum;
      f->state = OSC_PASS;
      goto again;
    case OSC_PASS:
      /* Passed on as it is; an ESC or a C1 ends it as the terminal would, and is read afresh. */
      if (b == 0x1b || b == 0xc2) {
        f->state = NORMAL;
        goto again;
      }
      EMIT(b);
      if (b == 0x07 || b == 0x18 || b == 0x1a) f->state = NORMAL;
      break;
    case OSC_DROP:
      if (b == 0x07 || b == 0x18 || b == 0x1a) f->state = NORMAL;
      else if (b == 0x1b) f->state = DROP_ESC;
      else if (b == 0xc2) f->state = DROP_C2;
      break;
    case DROP_ESC:
      if (b == '\\') f->state = NORMAL;
      else {
        /* Another sequence starts: the dropped one ended at its ESC. */
        f->state = ESC_SEEN, f->held[0] = 0x1b, f->nheld = 1;
        goto again;
      }
      break;
    case DROP_C2:
      f->state = b == 0x9c ? NORMAL : OSC_DROP;
      if (b != 0x9c) goto again;
      break;
    case DCS_HEAD:
      /* The first bytes of a DCS say whether it carries a sequence to an outer terminal. */
      if (f->nhead == 0 && b == 0x1b) {
        f->nheld = 0;
        f->state = DCS_DROP;
        break;
      }
      f->head[f->nhead++] = (char)b;
      if (f->nhead < 5 && !memcmp(f->head, "tmux;", f->nhead) && b != 0x1b) break;
      if (f->nhead == 5 && !memcmp(f->head, "tmux;", 5)) {
        f->nheld = 0;
        f->state = DCS_DROP;
        break;
      }
      EMIT_HELD();
      memcpy(out + o, f->head, f->nhead - 1), o += f->nhead - 1;
      f->state = DCS_PASS;
      goto again;
    case DCS_PASS:
      if (b == 0x1b || b == 0xc2) {
        f->state = NORMAL;
        goto again;
      }
      EMIT(b);
      if (b == 0x18 || b == 0x1a) f->state = NORMAL;
      break;
    case DCS_DROP:
      /* tmux doubles every ESC inside; a single ESC before \ ends it. */
      if (b == 0x1b) f->state = DCS_DROP_ESC;
      else if (b == 0x18 || b == 0x1a) f->state = NORMAL;
      break;
    case DCS_DROP_ESC:
      f->state = b == '\\' ? NORMAL : DCS_DROP;
      break;
    case APC_HEAD:
      /* An APC's control data, up to its ';' or its end, says whether it is a graphics command reading the host. */
      if (b != ';' && b != 0x1b && b != 0x07 && b != 0xc2 && f->nctl < sizeof f->ctl) {
        f->ctl[f->nctl++] = (char)b;
        break;
      }
      if (f->nctl == sizeof f->ctl || (f->nctl > 0 && f->ctl[0] == 'G' && host_medium(f->ctl + 1, f->nctl - 1))) {
        f->nheld = 0;
        f->state = OSC_DROP; /* dropped through its ST, as an OSC is */
        goto again;
      }
      EMIT_HELD();
      memcpy(out + o, f->ctl, f->nctl), o += f->nctl;
      f->state = DCS_PASS; /* the rest passes as a string does, until its ST */
      goto again;
    }
  }
  return o;
#undef EMIT
#undef EMIT_HELD
}
