import { existsSync, lstatSync, mkdirSync, readdirSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The guard's rule for a host tool's state (a profile's state_dirs and state_files: native/guard_links.c), against
 * the real launcher, in both sandboxes (namespaces: each state directory is a mount of its own; reduced: no mounts,
 * the guard alone): at and below S only regular files and directories are made, nothing else moves in, and the
 * directories on the way to it stay where they are; the workspace W keeps its links. Each row runs one command in
 * one sandbox of a profile whose state_dirs is S (under a home the sandbox cannot write), P/state (P a directory in
 * the workspace, so writable: the way to that state passes through it) and whose state_files is F.
 */
const py = (code: string) => `python3 -c '${code}'`;
const RENAMEAT2 = (a: string, b: string, flags: number) =>
  py(`import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); r = l.renameat2(-100, b"${a}", -100, b"${b}", ${flags}); sys.exit(0 if r == 0 else 1)`);
const RENAME = (a: string, b: string) => py(`import os; os.rename("${a}", "${b}")`);
const isLink = (p: string) => lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink() ?? false;

// [what, command (S: the state directory, W: the workspace, H: a link the host made in S, O: a directory outside
// every grant, P: a workspace directory holding the state directory P/state, F: a state file), allowed]
const table: [string, string, boolean][] = [
  ["a regular file", "echo x > S/new", true],
  ["a directory and a file in it", "mkdir -p S/a/b && echo x > S/a/b/f", true],
  ["a file moved within", "echo x > S/m1 && mkdir -p S/d && mv S/m1 S/d/m2", true],
  ["a directory moved within", "mkdir -p S/d1/x && mv S/d1 S/d2", true],
  ["a regular file made by mknod", py(`import os, stat; os.mknod("S/node", 0o600 | stat.S_IFREG)`), true],
  ["a file moved in from the workspace, copied by mv", "echo x > W/f && mv W/f S/from-ws && test -f S/from-ws", true],
  ["writing through the host's own link to a file in S", "echo x > S/target && echo y >> S/H-in", true],
  ["removing the host's own link", "rm S/H", true],
  ["writing the state file", "echo x >> F", true],
  ["a symbolic link out of it", "ln -s /etc/passwd S/out", false],
  ["a symbolic link within it", "ln -s new S/rel", false],
  ["a symbolic link to a directory, deeper down", "mkdir -p S/2026/12 && ln -s /tmp S/2026/12/07", false],
  ["a hard link of a file in it", "echo x > S/h1 && ln S/h1 S/h2", false],
  ["a FIFO", "mkfifo S/fifo", false],
  ["a unix socket bound there", py(`import socket; socket.socket(socket.AF_UNIX).bind("S/sock")`), false],
  ["a symbolic link moved in by mv (a copy: a new link)", "ln -s /etc W/l && mv W/l S/l", false],
  ["a symbolic link renamed in (EXDEV, as between mounts)", `ln -s /etc W/l2 && ${RENAME("W/l2", "S/l2")}`, false],
  ["the host's link moved within", "mv S/H S/H2", false],
  ["the host's link exchanged with a file", `echo x > S/e && ${RENAMEAT2("S/e", "S/H", 2)}`, false],
  ["a whiteout left behind (RENAME_WHITEOUT)", `echo x > S/w && ${RENAMEAT2("S/w", "S/w2", 4)}`, false],
  // Other ways to the same names; the guard holds each (regressions).
  ["itself moved out, a link planted in it, moved back", "mv S W/s2 && ln -s O W/s2/l && mv W/s2 S && test -L S/l", false],
  ["a directory holding a link exchanged with it (RENAME_EXCHANGE)", `mkdir -p W/x && ln -s O W/x/l && ${RENAMEAT2("W/x", "S", 2)} && test -L S/l`, false],
  ["a symbolic link by a relative path from a directory in it (..)", "mkdir -p S/a && cd S/a && ln -s O ../dotdot", false],
  ["a symbolic link through a directory fd opened in it", py(`import os; d = os.open("S", os.O_RDONLY); os.symlink("O", "at", dir_fd=d)`), false],
  ["a symbolic link through /proc/self/fd/N of a directory in it", py(`import os; d = os.open("S", os.O_RDONLY); os.symlink("O", "/proc/self/fd/%d/pfd" % d)`), false],
  ["a symbolic link through /proc/self/cwd", "cd S && ln -s O /proc/self/cwd/pc", false],
  ["a workspace file linked in by linkat(AT_EMPTY_PATH)", `echo x > W/e && ${py(`import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); f = os.open("W/e", os.O_RDONLY); sys.exit(0 if l.linkat(f, b"", -100, b"S/e", 0x1000) == 0 else 1)`)}`, false],
  ["a FIFO by mknodat on a directory fd", py(`import os, stat; d = os.open("S", os.O_RDONLY); os.mknod("f", 0o600 | stat.S_IFIFO, dir_fd=d)`), false],
  ["a unix socket bound by a relative name", `cd S && ${py(`import socket; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).bind("rs")`)}`, false],
  ["a link extracted there by tar", "mkdir -p W/t && ln -s O W/t/l && tar -C W -cf W/t.tar t && tar -C S -xf W/t.tar && test -L S/t/l", false],
  ["a link copied there by cp -a", "mkdir -p W/c && ln -s O W/c/l && cp -a W/c S/c && test -L S/c/l", false],
  // Refused anywhere in the sandbox: seccomp blocks io_uring and mounts, and an O_TMPFILE file has no name in the view.
  ["an O_TMPFILE file given a name there by linkat(AT_EMPTY_PATH)", py(`import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); f = os.open("S", os.O_TMPFILE | os.O_WRONLY, 0o600); sys.exit(0 if l.linkat(f, b"", -100, b"S/tmp", 0x1000) == 0 else 1)`), false],
  // The guard names every path it checks: one a rename above made longer than PATH_MAX cannot be, and is refused.
  ["a symbolic link in a directory whose path a rename above it made longer than PATH_MAX", py(`import os
d = os.open("S", os.O_RDONLY)
os.mkdir("t", dir_fd=d)
d = os.open("t", os.O_RDONLY, dir_fd=d)
while len(os.readlink("/proc/self/fd/%d" % d)) < 3900:
    os.mkdir("a" * 150, dir_fd=d)
    d = os.open("a" * 150, os.O_RDONLY, dir_fd=d)
os.rename("S/t", "S/" + "b" * 250)
try:
    os.symlink("O", "evil", dir_fd=d)
    r = 0
except OSError:
    r = 1
os.rename("S/" + "b" * 250, "S/t")
raise SystemExit(r)`), false],
  ["io_uring (its SYMLINKAT, LINKAT, RENAMEAT, MKNODAT pass no guard)", py(`import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); p = ctypes.create_string_buffer(120); sys.exit(0 if l.syscall(425, 4, p) >= 0 else 1)`), false],
  ["a bind mount over it", py(`import ctypes, sys; l = ctypes.CDLL(None, use_errno=True); sys.exit(0 if l.mount(b"O", b"S", None, 4096, None) == 0 else 1)`), false],
  ["a symbolic link renamed over the state file", `ln -s O/x W/fl && ${RENAME("W/fl", "F")} && test -L F`, false],
  ["a link made at the state file's name, the file moved away", "mv F W/moved-away; ln -s O/x F && test -L F", false],
  ["a file hard-linked over the state file", "echo x > W/hf && rm -f F; ln W/hf F", false],
  // Out of it: the kernel answers EXDEV between the mounts; reduced mode answers the same, so the host tool's
  // later writes to its state do not show through a second name in the workspace.
  ["a hard link of a file in it made in the workspace", "echo x > S/out1 && ln S/out1 W/out1", false],
  ["a hard link of the state file made in the workspace", "ln F W/hist", false],
  // The way to it: the host's tool walks P to reach P/state, so P is neither moved nor replaced by a link.
  ["its parent moved away, a link planted in it, moved back", `mv P W/away && ln -s O W/away/state/l && mv W/away P && test -L P/state/l`, false],
  ["its parent renamed away, a link planted in it, renamed back", `${RENAME("P", "W/away")} && ln -s O W/away/state/l && ${RENAME("W/away", "P")} && test -L P/state/l`, false],
  ["its grandparent moved away and back with a link in it", `mv W/n W/away && ln -s O W/away/tool/state/l && mv W/away W/n && test -L P/state/l`, false],
  ["its parent exchanged with a directory holding a link (RENAME_EXCHANGE)", `mkdir -p W/evil/state && ln -s O W/evil/state/l && ${RENAMEAT2("W/evil", "P", 2)} && test -L P/state/l`, false],
  ["its parent replaced by a symbolic link", `{ mv P W/away || { rmdir P/state && rmdir P; }; }; ln -s O P && test -L P`, false],
  ["a directory holding a link renamed onto its emptied parent", `{ rmdir P/state && rmdir P; }; mkdir -p W/evil/state && ln -s O W/evil/state/l && ${RENAME("W/evil", "P")} && test -L P/state/l`, false],
  ["a link beside it in its parent", "ln -s O P/beside && test -L P/beside", true],
  ["a directory beside it moved within its parent", "mkdir P/d && mv P/d P/d2", true],
  // The workspace is a project: links there are ordinary.
  ["a symbolic link in the workspace", "ln -s README W/link && test -L W/link", true],
  ["a hard link in the workspace", "echo x > W/h && ln W/h W/h2", true],
];

for (const sandbox of ["namespaces", "reduced"] as const)
  describe(`a host tool's state (state_dirs, state_files) takes only regular files and directories (${sandbox})`, () => {
    let s: Scratch;
    let home: string;
    const dirs: { S: string; P: string; F: string }[] = [];
    const results = new Map<string, string>();
    let stderr = "";
    beforeAll(async () => {
      s = scratch();
      home = join(s.root, "home");
      mkdirSync(join(home, "state"), { recursive: true });
      mkdirSync(join(home, "files"));
      // Each row in its own directories, with the links the host made in S before the run (its tools make some themselves).
      const nested: string[] = [];
      const files: string[] = [];
      const rows = table.map(([, cmd], i) => {
        const S = join(home, "state", `r${i}`);
        const W = join(s.ws, `r${i}`);
        const P = join(W, "n", "tool");
        const F = join(home, "files", `r${i}.jsonl`);
        dirs.push({ S, P, F });
        mkdirSync(S);
        mkdirSync(W);
        writeFileSync(join(W, "README"), "hi\n");
        if (/\bP\b/.test(cmd)) {
          mkdirSync(join(P, "state"), { recursive: true });
          nested.push(join(P, "state"));
        }
        if (/\bF\b/.test(cmd)) {
          writeFileSync(F, "the host's history\n");
          files.push(F);
        }
        const c = cmd
          .replace(/\bS\b/g, S).replace(/\bW\//g, `${W}/`).replace(/\bW\b/g, W).replace(/\bO\b/g, s.outside)
          .replace(/\bP\//g, `${P}/`).replace(/\bP\b/g, P).replace(/\bF\b/g, F);
        return `if ( ${c} ) >/dev/null 2>&1; then echo "${i}:yes"; else echo "${i}:no"; fi`;
      });
      const list = (xs: string[]) => xs.map((x) => JSON.stringify(x)).join(", ");
      mkdirSync(join(home, ".config", "vak"), { recursive: true });
      writeFileSync(join(home, ".config", "vak", "config.toml"), `[profiles.tool]\nstate_dirs = ["~/state", ${list(nested)}]\nstate_files = [${list(files)}]\n`);
      // The host's links are made once the sandbox runs, as its tool would make them beside it: one there before
      // the run refuses it (test/attacks/state-entries.test.ts).
      const ready = join(s.ws, "ready");
      const go = join(s.ws, "go");
      const handshake = `: > ${ready}; i=0; while [ ! -e ${go} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`;
      const running = runVak(["exec", "--sandbox", sandbox, "--profile", "tool", "--", "sh", "-c", [handshake, ...rows].join("\n")], { cwd: s.ws, env: baseEnv({ HOME: home, XDG_CONFIG_HOME: join(home, ".config") }) });
      let early: Awaited<typeof running> | undefined;
      void running.then((x) => (early = x));
      while (!existsSync(ready) && !early) await new Promise((res) => setTimeout(res, 25));
      for (const { S } of dirs) {
        symlinkSync("new", join(S, "H"));
        symlinkSync("target", join(S, "H-in"));
      }
      writeFileSync(go, "");
      const r = await running;
      stderr = r.stderr;
      for (const m of r.stdout.matchAll(/^(\d+):(yes|no)$/gm)) results.set(table[Number(m[1])]![0], m[2]!);
    }, 120_000);
    afterAll(() => s.cleanup());

    for (const [i, [what, , allowed]] of table.entries())
      it(`${what}: ${allowed ? "made" : "refused"}`, () => {
        expect(results.get(what), stderr).toBe(allowed ? "yes" : "no");
        if (allowed) return;
        // Whatever the command's exit said, the host finds no link it did not make on the way to its state or in it.
        const { S, P, F } = dirs[i]!;
        const links = (dir: string): string[] =>
          readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
            e.isSymbolicLink() ? [join(dir, e.name)] : e.isDirectory() ? links(join(dir, e.name)) : []);
        expect(links(S).filter((l) => !/\/H(-in)?$/.test(l))).toEqual([]);
        expect(isLink(F)).toBe(false);
        for (let p = join(P, "state"); p !== s.ws; p = join(p, "..")) expect(isLink(p), p).toBe(false);
        if (lstatSync(join(P, "state"), { throwIfNoEntry: false })?.isDirectory()) expect(links(join(P, "state"))).toEqual([]);
      });

    it("a refusal says what the state directory is and why, with the profile that made it one", () => {
      expect(stderr).toMatch(/refused symlink \S+: \S+\/state is a host tool's state: only regular files and directories are made there, since the tool on the host writes there later and would follow a symbolic link out of the sandbox \(state_dirs, from profile tool/);
      expect(stderr).toMatch(/refused link \S+: \S+ is a host tool's state: .* would write another file through a hard link/);
      expect(stderr).toMatch(/refused mknod \S+: \S+ is a host tool's state: .* would hang or fail on a FIFO, socket or device/);
    });
  });

/**
 * The tool on the host walks its state's path as written: CODEX_HOME=W/home-link with W/home-link -> home (both in
 * the workspace, so writable). The rule on the resolved path alone let a sandbox swap the link for one to a
 * directory holding links of its choosing, or put a directory or one moved in at its name: the host's tool then
 * wrote through them. Each attack in its own workspace directory; after the run, the host walks the written path.
 */
for (const sandbox of ["namespaces", "reduced"] as const)
  describe(`the state's path as written, through a link in the workspace, stays the way to it (${sandbox})`, () => {
    const attacks: [string, string][] = [
      ["the link replaced by one to a directory holding a link", "mkdir -p W/evil/sessions && ln -s O W/evil/sessions/2026; rm L && ln -s evil L"],
      ["the link replaced by a directory with a link in it", "rm L && mkdir -p L/sessions && ln -s O L/sessions/2026"],
      ["the link replaced by a directory holding a link, moved in", "mkdir -p W/evil/sessions && ln -s O W/evil/sessions/2026; rm L && mv W/evil L"],
      ["the link renamed away and another made", "mkdir -p W/evil/sessions && ln -s O W/evil/sessions/2026; mv L W/old && ln -s evil L"],
    ];
    let s: Scratch;
    const out = new Map<string, string>();
    const ways: { W: string; L: string }[] = [];
    beforeAll(async () => {
      s = scratch();
      const home = join(s.root, "home");
      mkdirSync(join(home, ".config", "vak"), { recursive: true });
      const written: string[] = [];
      const rows = attacks.map(([, cmd], i) => {
        const W = join(s.ws, `w${i}`);
        const L = join(W, "home-link");
        mkdirSync(join(W, "home", "sessions"), { recursive: true });
        symlinkSync("home", L);
        ways.push({ W, L });
        written.push(join(L, "sessions"));
        const c = cmd.replace(/\bW\//g, `${W}/`).replace(/\bL\b/g, L).replace(/\bO\b/g, s.outside);
        return `( cd ${W} && ${c} ) >/dev/null 2>&1; echo ${i}:$?`;
      });
      writeFileSync(join(home, ".config", "vak", "config.toml"), `[profiles.tool]\nstate_dirs = [${written.map((x) => JSON.stringify(x)).join(", ")}]\n`);
      const r = await runVak(["exec", "--sandbox", sandbox, "--profile", "tool", "--", "sh", "-c", rows.join("\n")], { cwd: s.ws, env: baseEnv({ HOME: home, XDG_CONFIG_HOME: join(home, ".config") }) });
      for (const m of r.stdout.matchAll(/^(\d+):(\d+)$/gm)) out.set(attacks[Number(m[1])]![0], m[2]!);
      out.set("stderr", r.stderr);
    }, 120_000);
    afterAll(() => s.cleanup());

    for (const [i, [what]] of attacks.entries())
      it(`${what}: refused, and the host's tool finds no link on its way`, () => {
        expect(out.get(what), out.get("stderr")).not.toBe("0");
        const { L } = ways[i]!;
        // What the host's tool would walk: the written path, each name on it, and what lies below.
        const walk = (dir: string): string[] =>
          readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isSymbolicLink() ? [join(dir, e.name)] : e.isDirectory() ? walk(join(dir, e.name)) : []));
        const sessions = join(L, "sessions");
        if (lstatSync(sessions, { throwIfNoEntry: false })) {
          expect(isLink(sessions)).toBe(false);
          expect(walk(sessions)).toEqual([]);
        }
        // The link itself may be gone (removing it is allowed), but it never leads anywhere else.
        if (isLink(L)) expect(readlinkSync(L)).toBe("home");
      });
  });
