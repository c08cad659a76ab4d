import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, lstatSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// A set-id or capability-carrying file planted in the workspace runs with its
// owner's (or its group's, or its capabilities') rights when the host later
// executes it: root's, when vak runs as root (the uid map is 0 to 0). Inside,
// every mount is nosuid and no_new_privs holds, so only the host is at risk.
const SETID = 0o6000;
const CAP_BLOB = "struct.pack('<IIIII', 0x02000001, 1 << 13, 0, 0, 0)"; // VFS_CAP_REVISION_2, effective, CAP_NET_RAW

const py = (code: string) => `/usr/bin/python3 -c "${code.replace(/"/g, '\\"')}"`;

function hasCaps(path: string): boolean {
  const out = execFileSync("/usr/bin/python3", ["-c", `import os, sys
try: os.getxattr(sys.argv[1], 'security.capability', follow_symlinks=False); print('yes')
except OSError: print('no')`, path], { encoding: "utf8" });
  return out.trim() === "yes";
}

/** Every entry under root with a set-id bit or file capabilities, except those the host put there. */
function planted(root: string, hostMade: Set<string>): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir)) {
      const p = join(dir, e);
      const st = lstatSync(p);
      if (st.isSymbolicLink()) continue;
      if (st.isDirectory()) walk(p);
      if (hostMade.has(p)) continue;
      if (st.mode & SETID && !(st.isDirectory() && inheritsSetgid(p, st.mode))) found.push(`${p} mode ${(st.mode & 0o7777).toString(8)}`);
      if (st.isFile() && hasCaps(p)) found.push(`${p} has file capabilities`);
    }
  };
  walk(root);
  return found;
}

/** A directory made inside a setgid directory inherits S_ISGID: the host's own policy for that tree, not a planted bit. */
function inheritsSetgid(dir: string, mode: number): boolean {
  return (mode & SETID) === 0o2000 && (statSync(join(dir, "..")).mode & 0o2000) !== 0;
}

describe("no set-id bits or file capabilities planted on the host", () => {
  let s: Scratch;
  let hostMade: Set<string>;
  beforeEach(() => {
    s = scratch({ git: true });
    // The host's own: a setuid file outside (granted read-only), one inside, a file with capabilities, a setgid directory.
    copyFileSync("/bin/true", join(s.outside, "suid"));
    chmodSync(join(s.outside, "suid"), 0o4755);
    copyFileSync("/bin/true", join(s.outside, "capped"));
    execFileSync("/usr/bin/python3", ["-c", `import os, struct, sys; os.setxattr(sys.argv[1], 'security.capability', ${CAP_BLOB})`, join(s.outside, "capped")]);
    mkdirSync(join(s.ws, "sub"));
    copyFileSync("/bin/true", join(s.ws, "sub/suid"));
    chmodSync(join(s.ws, "sub/suid"), 0o4755);
    mkdirSync(join(s.ws, "shared"));
    chmodSync(join(s.ws, "shared"), 0o2775);
    hostMade = new Set([join(s.ws, "sub/suid"), join(s.ws, "shared")]);
    // An archive whose members carry set-id modes.
    execFileSync("/usr/bin/python3", ["-c", `import tarfile, io, sys
with tarfile.open(sys.argv[1], 'w') as t:
    for name, mode, kind in (('evil', 0o4755, tarfile.REGTYPE), ('evilgid', 0o2755, tarfile.REGTYPE), ('gdir', 0o2775, tarfile.DIRTYPE)):
        i = tarfile.TarInfo(name); i.mode = mode; i.type = kind; data = b'#!/bin/sh\\n' if kind == tarfile.REGTYPE else b''
        i.size = len(data); t.addfile(i, io.BytesIO(data))`, join(s.ws, "setid.tar")]);
  });
  afterEach(() => s.cleanup());

  it("chmod, chmod u+s/g+s, install -m, cp -p, perl, tar and python's os.chmod cannot set a set-id bit", async () => {
    const r = await sandboxSh(s.ws, [
      "cp /usr/bin/python3 py && chmod 4755 py",
      "cp /bin/true t1 && chmod u+s t1",
      "cp /bin/true t2 && chmod g+s t2",
      "mkdir d3 && chmod 2777 d3",
      "install -m 4755 /bin/true t4",
      `cp -p ${s.outside}/suid t5`,
      `cp -a ${s.outside}/suid t6`,
      "touch t7 && perl -e 'chmod 04755, \"t7\" or exit 3'",
      "mkdir x && tar xpf setid.tar -C x",
      py("import os; open('t8','w').close(); os.chmod('t8', 0o4755)"),
      py("import os; fd = os.open('t9', os.O_CREAT|os.O_WRONLY, 0o644); os.fchmod(fd, 0o2755)"),
      py("import os; open('t10','w').close(); os.chmod('t10', 0o6777, follow_symlinks=True)"),
      py("import tarfile; tarfile.open('setid.tar').extractall('y', filter='fully_trusted')"),
      "true",
    ].map((c, i) => `${c} || echo refused ${i}`).join("; "), ["--allow-read", s.outside]);
    expect(r.code).toBe(0);
    expect(planted(s.ws, hostMade)).toEqual([]);
    const denied = (r.summary?.denied ?? []) as { op: string; path: string; reason: string }[];
    expect(denied.some((d) => d.op === "chmod" && d.path === join(s.ws, "py") && /set-id/.test(d.reason))).toBe(true);
    expect(denied.some((d) => d.op === "fchmod" && d.path.startsWith(join(s.ws, "t")))).toBe(true);
  });

  it("open(O_CREAT), creat, mkdir, mknod, O_TMPFILE + link and fchmodat2 cannot create a set-id file", async () => {
    const r = await sandboxSh(s.ws, [
      py("import os; os.close(os.open('c1', os.O_CREAT|os.O_WRONLY, 0o6755))"),
      py("import os; os.close(os.open('c2', os.O_CREAT|os.O_EXCL|os.O_RDWR, 0o4755))"),
      py("import ctypes; libc = ctypes.CDLL(None); exit(libc.creat(b'c3', 0o4755) < 0)"),
      py("import os; os.mkdir('c4', 0o2777); os.mkdir('c5', 0o4777)"),
      py("import os, stat; os.mknod('c6', stat.S_IFREG | 0o4755)"),
      py("import os; fd = os.open('.', os.O_TMPFILE|os.O_WRONLY, 0o4755); os.link(f'/proc/self/fd/{fd}', 'c7')"),
      py("import ctypes, os; open('c8','w').close(); libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(452, -100, b'c8', 0o4755, 0); exit(0 if r == 0 else 1)"),
      py("import os; open('c9','w').close(); os.chmod('c9', 0o2755, dir_fd=os.open('.', os.O_RDONLY))"),
      "true",
    ].map((c) => `${c} || echo refused`).join("; "));
    expect(r.code).toBe(0);
    expect(planted(s.ws, hostMade)).toEqual([]);
    const denied = (r.summary?.denied ?? []) as { op: string; path: string; reason: string }[];
    for (const op of ["openat", "creat", "mkdir", "mknod", "chmod"]) expect(denied.map((d) => d.op), op).toContain(op);
    expect(denied.every((d) => d.reason.startsWith("set-id bits are refused"))).toBe(true);
  });

  it("file capabilities cannot be set, by any xattr call or by copying a file that has them", async () => {
    const r = await sandboxSh(s.ws, [
      py(`import os, struct; open('x1','w').close(); os.setxattr('x1', 'security.capability', ${CAP_BLOB})`),
      py(`import os, struct; open('x2','w').close(); os.setxattr('x2', 'security.capability', ${CAP_BLOB}, follow_symlinks=False)`),
      py(`import os, struct; fd = os.open('x3', os.O_CREAT|os.O_WRONLY); os.setxattr(fd, 'security.capability', ${CAP_BLOB})`),
      `cp -a ${s.outside}/capped x4`,
      `cp --preserve=all ${s.outside}/capped x5`,
      "true",
    ].map((c) => `${c} || echo refused`).join("; "), ["--allow-read", s.outside]);
    expect(r.code).toBe(0);
    expect(planted(s.ws, hostMade)).toEqual([]);
    const denied = (r.summary?.denied ?? []) as { op: string; path: string; reason: string }[];
    expect(denied.some((d) => d.op === "setxattr" && d.path === join(s.ws, "x1") && /capabilit/.test(d.reason))).toBe(true);
  });

  it("an existing set-id file cannot be linked or renamed to another name", async () => {
    const r = await sandboxSh(s.ws, `ln sub/suid l1 || echo refused; ${py("import os; os.link('sub/suid', 'l2')")} || echo refused; mv sub/suid l3 || echo refused; ln ${s.outside}/suid l4 || echo refused; true`, ["--allow-read", s.outside]);
    expect(r.code).toBe(0);
    expect(planted(s.ws, hostMade)).toEqual([]);
    expect(statSync(join(s.ws, "sub/suid")).mode & 0o4000).toBe(0o4000); // still where the host put it
    const denied = (r.summary?.denied ?? []) as { op: string; path: string; reason: string }[];
    expect(denied.map((d) => d.op)).toEqual(expect.arrayContaining(["link", "rename"]));
  });

  it("a setgid directory's inheritance stays the host's policy, but a file in it gets no set-id bit", async () => {
    const r = await sandboxSh(s.ws, `mkdir shared/child && chmod 775 shared/child && touch shared/f && chmod g+s shared/f || echo refused; ${py("import os; os.close(os.open('shared/g', os.O_CREAT|os.O_WRONLY, 0o2755))")} || echo refused; true`);
    expect(r.code).toBe(0);
    expect(statSync(join(s.ws, "shared/child")).mode & 0o2000).toBe(0o2000); // inherited, as on the host
    expect(statSync(join(s.ws, "shared/f")).mode & SETID).toBe(0);
    expect(planted(s.ws, hostMade)).toEqual([]);
  });

  it("ordinary modes still work: chmod +x, chmod 755, install -m 755, cp -p, mkdir -m, tar of a plain archive", async () => {
    const r = await sandboxSh(s.ws, "cp /bin/true a && chmod +x a && chmod 750 a && install -m 700 /bin/true b && cp -p a c && mkdir -m 711 d && mkdir -m 2775 shared/e && tar cf plain.tar a b && mkdir out && tar xpf plain.tar -C out && chmod g-s shared && ./a && echo fine");
    expect(r.stdout).toContain("fine");
    expect(statSync(join(s.ws, "a")).mode & 0o7777).toBe(0o750);
    expect(statSync(join(s.ws, "b")).mode & 0o7777).toBe(0o700);
    expect(statSync(join(s.ws, "c")).mode & 0o7777).toBe(0o750);
    expect(statSync(join(s.ws, "d")).mode & 0o7777).toBe(0o711);
    expect(statSync(join(s.ws, "shared/e")).mode & 0o2000).toBe(0o2000);
    expect(statSync(join(s.ws, "out/b")).mode & 0o7777).toBe(0o700);
    expect(statSync(join(s.ws, "shared")).mode & 0o2000).toBe(0); // removing a bit is always fine
    expect(r.summary?.denied).toEqual([]);
  });

  it("reduced mode refuses set-id bits and capabilities too", async () => {
    const r = await sandboxSh(s.ws, [
      "cp /bin/true r1 && chmod 4755 r1",
      py("import os; os.close(os.open('r2', os.O_CREAT|os.O_WRONLY, 0o4755))"),
      "mkdir r3 && chmod g+s r3",
      py(`import os, struct; open('r4','w').close(); os.setxattr('r4', 'security.capability', ${CAP_BLOB})`),
      "ln sub/suid r5",
      "true",
    ].map((c) => `${c} || echo refused`).join("; "), ["--sandbox", "reduced"], { wrapper: [inject("noUserns")] });
    expect(r.code).toBe(0);
    expect(planted(s.ws, hostMade)).toEqual([]);
    expect(((r.summary?.denied ?? []) as { op: string }[]).length).toBeGreaterThanOrEqual(5);
  });
});
