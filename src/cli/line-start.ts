import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import type { LineWord } from "../sandbox/launch-result.js";
import { fmt, own, type Output, processOutput, type Text } from "./output.js";

/**
 * Vak's own lines after and while a command runs (its refusals, the --json
 * summary) must start on a line of their own: a command's last output may end
 * without a newline, or with a progress bar's bare `\r`, and a reader that
 * takes the last line of stderr as the summary would get both glued together.
 * Nor may they add an empty line where the output is at a line's start.
 *
 * Where vak's stderr is a pipe, a socket or a terminal, the launcher's monitor
 * relays what the command writes there (and, with `2>&1`, to stdout) and keeps
 * the answer in a word (LineWord: its writes, and whether the last ended a
 * line); vak's own line after its last write is a whole line too. Where stderr
 * is a regular file, vak reads its last byte. Otherwise (a backend without the
 * word) it starts a new line to be sure: an empty line is harmless, a glued
 * one is not. One OwnLines follows one run, so that it knows its own last line.
 */
export class OwnLines {
  private word: (() => LineWord | undefined) | undefined;
  /** The monitor's count of writes when vak wrote its last line (which ended with a newline). */
  private seen: number | undefined;

  constructor(
    private readonly fd = 2,
    private readonly err: Output = processOutput().err,
  ) {}

  /** From now on, the monitor's word (a running sandbox's lineWord). */
  follow(word: (() => LineWord | undefined) | undefined): void {
    this.word = word;
  }

  private atLineStart(): { start: boolean; writes: number | undefined } {
    const w = this.word?.();
    if (w) return { start: w.writes === this.seen || w.atStart, writes: w.writes };
    return { start: endsLine(this.fd), writes: undefined };
  }

  /** Writes one line of vak's own to stderr (through the output module), after a newline if the command left one open. */
  line(t: Text): void {
    const at = this.atLineStart();
    this.err.line(at.start ? t : fmt`${own("\n")}${t}`);
    this.seen = at.writes;
  }

  /** The same for one JSON line (the --json summary). */
  json(value: unknown): void {
    const at = this.atLineStart();
    this.err.json(value, at.start ? "" : "\n");
    this.seen = at.writes;
  }
}

/** Does what fd refers to end with a newline (or hold nothing)? Only a regular file can say; anything else is "no". */
function endsLine(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return false;
    if (st.size === 0) return true;
    // Opened anew for reading: a shell's `2>file` gives a write-only fd.
    const r = openSync(`/proc/self/fd/${fd}`, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const b = Buffer.alloc(1);
      return readSync(r, b, 0, 1, st.size - 1) === 1 && b[0] === 0x0a;
    } finally {
      closeSync(r);
    }
  } catch {
    // Not readable by us, or gone: we cannot tell.
    return false;
  }
}
