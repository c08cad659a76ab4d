import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// Landlock does not cover chmod, chown, utimes or xattrs; the read-only view
// and the write guard must.
describe("no chmod, chown, utime or xattr change outside grants", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch({ git: true });
    writeFileSync(join(s.outside, "target"), "x\n");
  });
  afterEach(() => s.cleanup());

  const meta = (p: string) => {
    const st = statSync(p);
    return { mode: st.mode, uid: st.uid, gid: st.gid, mtime: st.mtimeMs, atime: st.atimeMs };
  };

  it("a read-only grant keeps its mode, owner and times", async () => {
    const t = join(s.outside, "target");
    const before = meta(t);
    const r = await sandboxSh(
      s.ws,
      `chmod 777 ${t}; chmod 000 ${s.outside}; chown 65534:65534 ${t}; touch -d 2000-01-01 ${t}; touch -a -d 2000-01-01 ${t}; setfattr -n user.x -v y ${t} 2>/dev/null; python3 -c "import os; os.setxattr('${t}', 'user.x', b'y')"; true`,
      ["--allow-read", s.outside],
    );
    expect(r.code).toBe(0);
    expect(meta(t)).toEqual(before);
    expect(statSync(s.outside).mode & 0o777).not.toBe(0);
  });

  it("system files keep their mode", async () => {
    const before = meta("/usr/bin/env");
    const r = await sandboxSh(s.ws, `chmod 777 /usr/bin/env; touch /usr/bin/env; true`);
    expect(r.code).toBe(0);
    expect(meta("/usr/bin/env")).toEqual(before);
  });

  it("a protected file keeps its mode and times, by path and by fd", async () => {
    const cfg = join(s.ws, ".git/config");
    const before = meta(cfg);
    const r = await sandboxSh(
      s.ws,
      `chmod 777 .git/config; touch -d 2000-01-01 .git/config; python3 -c "
import os
fd = os.open('.git/config', os.O_RDONLY)
for f in (lambda: os.fchmod(fd, 0o777), lambda: os.utime(fd, (0, 0)), lambda: os.setxattr(fd, 'user.x', b'y')):
    try: f()
    except OSError as e: print('refused', e.errno)
"; true`,
    );
    expect(r.code).toBe(0);
    expect(meta(cfg)).toEqual(before);
    expect(r.stdout).toContain("refused");
  });

  it("ordinary chmod and touch inside the workspace still work", async () => {
    writeFileSync(join(s.ws, "script.sh"), "#!/bin/sh\necho ran\n");
    const r = await sandboxSh(s.ws, `chmod +x script.sh && touch -d 2001-01-01 script.sh && ./script.sh`);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("ran\n");
    expect(statSync(join(s.ws, "script.sh")).mode & 0o111).not.toBe(0);
    expect(new Date(statSync(join(s.ws, "script.sh")).mtimeMs).getUTCFullYear()).toBe(2001);
  });
});
