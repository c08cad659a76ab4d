import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { fmt, own, type Output, processOutput, type Text } from "./output.js";

/**
 * Vak's own lines after a command ran (its refusals, the --json summary) must
 * start on a line of their own: a command's last output may end without a
 * newline, or with a progress bar's bare `\r`, and a reader that takes the
 * last line of stderr as the summary would get both glued together.
 *
 * Where vak relays the command's output it knows the last byte; where the
 * command wrote to the terminal, a pipe or a file itself, vak looks at what
 * it can (the last byte of a regular file) and otherwise starts a new line
 * to be sure: an empty line is harmless, a glued one is not.
 */
export class OwnLines {
  private atLineStart: boolean;

  /** lastByte: the last byte the command wrote where vak's lines go, when vak relayed it (undefined: nothing, or unknown). */
  constructor(
    relayed: { wrote: boolean; lastByte: number | undefined } | undefined,
    fd = 2,
    private readonly err: Output = processOutput().err,
  ) {
    this.atLineStart = relayed ? !relayed.wrote || relayed.lastByte === 0x0a : endsLine(fd);
  }

  /** Writes one line of vak's own to stderr (through the output module), after a newline if the command left one open. */
  line(t: Text): void {
    this.err.line(this.atLineStart ? t : fmt`${own("\n")}${t}`);
    this.atLineStart = true;
  }

  /** The same for one JSON line (the --json summary). */
  json(value: unknown): void {
    this.err.json(value, this.atLineStart ? "" : "\n");
    this.atLineStart = true;
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
