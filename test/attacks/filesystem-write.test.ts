import { existsSync, linkSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// Each test tries to write outside the grants from inside `vak exec` and then
// checks the host file system, not just the exit status.
describe("no write outside grants", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
    writeFileSync(join(s.outside, "target"), "original\n");
  });
  afterEach(() => s.cleanup());

  const untouched = () => expect(readFileSync(join(s.outside, "target"), "utf8")).toBe("original\n");

  it("direct write to an absolute path outside the workspace fails", async () => {
    const r = await sandboxSh(s.ws, `echo evil > ${s.outside}/target; echo evil > ${s.outside}/new; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
  });

  it("write through ../ traversal fails", async () => {
    const r = await sandboxSh(s.ws, `echo evil > ../outside/target; echo evil > ../outside/new; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
  });

  it("write through a symlink in the workspace that points outside fails", async () => {
    symlinkSync(join(s.outside, "target"), join(s.ws, "link-file"));
    symlinkSync(s.outside, join(s.ws, "link-dir"));
    const r = await sandboxSh(s.ws, `echo evil > link-file; echo evil > link-dir/new; echo evil > link-dir/target; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
  });

  it("a symlink created inside the sandbox does not lead outside", async () => {
    const r = await sandboxSh(s.ws, `ln -s ${s.outside}/target mine; echo evil > mine; ln -s ${s.outside} d; echo evil > d/new; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
  });

  it("a hardlink to a file outside cannot be made or written", async () => {
    const r = await sandboxSh(s.ws, `ln ${s.outside}/target hl; echo evil > hl; true`);
    expect(r.code).toBe(0);
    untouched();
  });

  it("a hardlink made on the host before the run does not carry write access into a read-only grant", async () => {
    const ro = join(s.root, "ro");
    mkdirSync(ro);
    writeFileSync(join(ro, "f"), "original\n");
    linkSync(join(ro, "f"), join(s.ws, "same-inode"));
    const r = await sandboxSh(s.ws, `ln ${ro}/f copy; echo x > ${ro}/f; true`, ["--allow-read", ro]);
    expect(r.code).toBe(0);
    expect(readFileSync(join(ro, "f"), "utf8")).toBe("original\n");
    expect(existsSync(join(s.ws, "copy"))).toBe(false);
  });

  it("renaming a workspace file onto a path outside fails", async () => {
    writeFileSync(join(s.ws, "mine"), "evil\n");
    const r = await sandboxSh(s.ws, `mv mine ${s.outside}/target; mv mine ../outside/new; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
    expect(existsSync(join(s.ws, "mine"))).toBe(true);
  });

  it("renaming a read-only granted file into the workspace leaves the original in place", async () => {
    // Copying what may be read is allowed; moving it (removing the original) is not.
    const r = await sandboxSh(s.ws, `mv ${s.outside}/target ./stolen; rm -f ${s.outside}/target; true`, ["--allow-read", s.outside]);
    expect(r.code).toBe(0);
    untouched();
  });

  it("/proc/self/root and /proc/1/root lead only into the sandbox's own view", async () => {
    const r = await sandboxSh(s.ws, `echo evil > /proc/self/root${s.outside}/target; echo evil > /proc/1/root${s.outside}/new; echo evil > /proc/self/root/tmp/escaped; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
    expect(existsSync("/tmp/escaped")).toBe(false);
  });

  it("/proc/<pid>/cwd of another sandboxed process leads nowhere outside", async () => {
    const r = await sandboxSh(s.ws, `for p in /proc/[0-9]*; do echo evil > $p/cwd/../outside/new 2>/dev/null; echo evil > $p/cwd/../outside/target 2>/dev/null; done; true`);
    expect(r.code).toBe(0);
    untouched();
    expect(existsSync(join(s.outside, "new"))).toBe(false);
  });

  it("writes to the private /tmp and HOME never reach the host", async () => {
    const marker = `vak-private-${process.pid}-${Date.now()}`;
    const r = await sandboxSh(s.ws, `echo x > /tmp/${marker} && echo x > "$HOME/${marker}" && cat /tmp/${marker} "$HOME/${marker}"`);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("x\nx\n");
    expect(existsSync(`/tmp/${marker}`)).toBe(false);
    expect(existsSync(join(process.env.HOME ?? "/root", marker))).toBe(false);
  });

  it("read-only mode refuses writes to the workspace and says how to grant them", async () => {
    writeFileSync(join(s.ws, "f"), "original\n");
    const r = await sandboxSh(s.ws, `echo evil > f; echo evil > new; true`, ["--mode", "read-only"]);
    expect(r.code).toBe(0);
    expect(readFileSync(join(s.ws, "f"), "utf8")).toBe("original\n");
    expect(existsSync(join(s.ws, "new"))).toBe(false);
    expect(r.stderr).toContain("--mode workspace-write");
  });

  it("--deny-write cannot be sidestepped by renaming a parent directory away and back", async () => {
    mkdirSync(join(s.ws, "conf"));
    writeFileSync(join(s.ws, "conf", "prod.env"), "ORIGINAL\n");
    const r = await sandboxSh(s.ws, `mv conf conf_old; mkdir y && echo INJECTED > y/prod.env && mv y conf; true`, ["--deny-write", "conf/prod.env"]);
    expect(r.code).toBe(0);
    expect(readFileSync(join(s.ws, "conf", "prod.env"), "utf8")).toBe("ORIGINAL\n");
  });

  it("host device nodes keep their mode, owner and times", async () => {
    const before = ["/dev/null", "/dev/full", "/dev/zero"].map((d) => statSync(d)).map((st) => [st.mode, st.uid, st.mtimeMs]);
    const r = await sandboxSh(s.ws, `chmod 000 /dev/null; chmod 4600 /dev/full; touch -d 2001-01-01 /dev/zero; chown 1:1 /dev/full; echo still-writable > /dev/null && echo ok`);
    expect(r.stdout.trim()).toBe("ok");
    expect(["/dev/null", "/dev/full", "/dev/zero"].map((d) => statSync(d)).map((st) => [st.mode, st.uid, st.mtimeMs])).toEqual(before);
  });

  it("a host file inherited on stdin cannot have its mode or xattrs changed, nor be reopened for writing", async () => {
    const host = join(s.outside, "target");
    const mode = statSync(host).mode;
    const r = await sandboxSh(s.ws, `python3 -c "
import os
for f in (lambda: os.fchmod(0, 0o4777), lambda: os.setxattr(0, 'user.pwn', b'1'), lambda: open('/proc/self/fd/0', 'w').write('evil')):
    try: f(); print('DONE')
    except OSError as e: print('refused', e.errno)
" < ${host}`);
    expect(r.stdout).not.toContain("DONE");
    expect(statSync(host).mode).toBe(mode);
    untouched();
  });

  it("rmdir of a symlink with a trailing slash does not remove the directory it points to", async () => {
    mkdirSync(join(s.ws, "real"));
    symlinkSync("real", join(s.ws, "link"));
    const r = await sandboxSh(s.ws, `rmdir link/; echo status=$?`);
    expect(r.stdout).not.toContain("status=0");
    expect(existsSync(join(s.ws, "real"))).toBe(true);
  });

  it("--deny-write inside a writable workspace holds, for existing and missing paths", async () => {
    mkdirSync(join(s.ws, "frozen"));
    writeFileSync(join(s.ws, "frozen", "f"), "original\n");
    const r = await sandboxSh(s.ws, `echo evil > frozen/f; echo evil > frozen/new; mkdir later; echo x > later/x; echo ok > fine`, [
      "--deny-write", "frozen", "--deny-write", "later",
    ]);
    expect(readFileSync(join(s.ws, "frozen", "f"), "utf8")).toBe("original\n");
    expect(existsSync(join(s.ws, "frozen", "new"))).toBe(false);
    expect(existsSync(join(s.ws, "later"))).toBe(false);
    expect(readFileSync(join(s.ws, "fine"), "utf8")).toBe("ok\n");
    expect(r.code).toBe(0);
  });
});
