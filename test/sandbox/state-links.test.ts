import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The guard's rule for a host tool's state (a profile's state_dirs: native/guard_links.c), against the real
 * launcher: at and below S only regular files and directories are made, and nothing else moves in; the workspace
 * W keeps its links. Each row runs one command in one sandbox of a profile whose state_dirs is S.
 */
const py = (code: string) => `python3 -c '${code}'`;
const RENAMEAT2 = (a: string, b: string, flags: number) =>
  py(`import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); r = l.renameat2(-100, b"${a}", -100, b"${b}", ${flags}); sys.exit(0 if r == 0 else 1)`);

// [what, command (S: the state directory, W: the workspace, H: a link the host made in S), allowed]
const table: [string, string, boolean][] = [
  ["a regular file", "echo x > S/new", true],
  ["a directory and a file in it", "mkdir -p S/a/b && echo x > S/a/b/f", true],
  ["a file moved within", "echo x > S/m1 && mkdir -p S/d && mv S/m1 S/d/m2", true],
  ["a directory moved within", "mkdir -p S/d1/x && mv S/d1 S/d2", true],
  ["a regular file made by mknod", py(`import os, stat; os.mknod("S/node", 0o600 | stat.S_IFREG)`), true],
  ["a file moved in from the workspace, copied by mv", "echo x > W/f && mv W/f S/from-ws && test -f S/from-ws", true],
  ["writing through the host's own link to a file in S", "echo x > S/target && echo y >> S/H-in", true],
  ["removing the host's own link", "rm S/H", true],
  ["a symbolic link out of it", "ln -s /etc/passwd S/out", false],
  ["a symbolic link within it", "ln -s new S/rel", false],
  ["a symbolic link to a directory, deeper down", "mkdir -p S/2026/12 && ln -s /tmp S/2026/12/07", false],
  ["a hard link of a file in it", "echo x > S/h1 && ln S/h1 S/h2", false],
  ["a FIFO", "mkfifo S/fifo", false],
  ["a unix socket bound there", py(`import socket; socket.socket(socket.AF_UNIX).bind("S/sock")`), false],
  ["a symbolic link moved in by mv (a copy: a new link)", "ln -s /etc W/l && mv W/l S/l", false],
  ["a symbolic link renamed in (EXDEV, as between mounts)", `ln -s /etc W/l2 && ${py(`import os; os.rename("W/l2", "S/l2")`)}`, false],
  ["the host's link moved within", "mv S/H S/H2", false],
  ["the host's link exchanged with a file", `echo x > S/e && ${RENAMEAT2("S/e", "S/H", 2)}`, false],
  ["a whiteout left behind (RENAME_WHITEOUT)", `echo x > S/w && ${RENAMEAT2("S/w", "S/w2", 4)}`, false],
  // The workspace is a project: links there are ordinary.
  ["a symbolic link in the workspace", "ln -s README W/link && test -L W/link", true],
  ["a hard link in the workspace", "echo x > W/h && ln W/h W/h2", true],
];

describe("a host tool's state directory (state_dirs) takes only regular files and directories", () => {
  let s: Scratch;
  let home: string;
  let state: string;
  const results = new Map<string, string>();
  let stderr = "";
  beforeAll(async () => {
    s = scratch();
    home = join(s.root, "home");
    state = join(home, "state");
    mkdirSync(join(home, ".config", "vak"), { recursive: true });
    writeFileSync(join(home, ".config", "vak", "config.toml"), `[profiles.tool]\nstate_dirs = ["~/state"]\n`);
    mkdirSync(state);
    // Each row in its own directories, with the links the host made in S before the run (its tools make some themselves).
    const rows = table.map(([, cmd], i) => {
      const S = join(state, `r${i}`);
      const W = join(s.ws, `r${i}`);
      mkdirSync(S);
      mkdirSync(W);
      writeFileSync(join(W, "README"), "hi\n");
      symlinkSync("new", join(S, "H"));
      symlinkSync("target", join(S, "H-in"));
      const c = cmd.replace(/\bS\//g, `${S}/`).replace(/"S"/g, `"${S}"`).replace(/\bW\//g, `${W}/`);
      return `if ( ${c} ) >/dev/null 2>&1; then echo "${i}:yes"; else echo "${i}:no"; fi`;
    });
    const r = await runVak(["exec", "--profile", "tool", "--", "sh", "-c", rows.join("\n")], { cwd: s.ws, env: baseEnv({ HOME: home, XDG_CONFIG_HOME: join(home, ".config") }) });
    stderr = r.stderr;
    for (const m of r.stdout.matchAll(/^(\d+):(yes|no)$/gm)) results.set(table[Number(m[1])]![0], m[2]!);
  }, 120_000);
  afterAll(() => s.cleanup());

  for (const [what, , allowed] of table)
    it(`${what}: ${allowed ? "made" : "refused"}`, () => {
      expect(results.get(what), stderr).toBe(allowed ? "yes" : "no");
    });

  it("a refusal says what the state directory is and why, with the profile that made it one", () => {
    expect(stderr).toMatch(/refused symlink \S+: \S+\/state is a host tool's state: only regular files and directories are made there, since the tool on the host writes there later and would follow a symbolic link out of the sandbox \(state_dirs, from profile tool/);
    expect(stderr).toMatch(/refused link \S+: \S+ is a host tool's state: .* would write another file through a hard link/);
    expect(stderr).toMatch(/refused mknod \S+: \S+ is a host tool's state: .* would hang or fail on a FIFO, socket or device/);
  });
});
