import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { runVak } from "../support/vak.js";

// A script or a module a command is given that lies outside the sandbox's view: the command fails as it
// would without the file, and Vak says which grant would show it (issue 14: "a missing program or module
// outside the view says which --allow-read would show it").
describe("paths a failed command was given that the sandbox cannot see", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
    mkdirSync(join(s.outside, "lib", "pkg"), { recursive: true });
    writeFileSync(join(s.outside, "m.js"), "console.log('ran');\n");
    writeFileSync(join(s.outside, "lib", "pkg", "__init__.py"), "");
    writeFileSync(join(s.outside, "secret.txt"), "NOT-TO-BE-PRINTED\n");
  });
  afterAll(() => s.cleanup());

  it("node /elsewhere/m.js names the file and the --allow-read that shows it; granted, it runs", async () => {
    const r = await runVak(["exec", "--", "node", join(s.outside, "m.js")], { cwd: s.ws });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`vak: ${join(s.outside, "m.js")} is outside the sandbox's view, so the command could not see it: --allow-read ${s.outside}`);
    const granted = await runVak(["exec", "--allow-read", s.outside, "--", "node", join(s.outside, "m.js")], { cwd: s.ws });
    expect(granted.stdout).toBe("ran\n");
    expect(granted.code).toBe(0);
  });

  it("a PYTHONPATH directory and an --opt=PATH value are named too; nothing of a file's content is printed", async () => {
    const r = await runVak(["exec", "--allow-env", "PYTHONPATH", "--", "python3", "-c", "import pkg"], { cwd: s.ws, env: { PYTHONPATH: join(s.outside, "lib") } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`vak: ${join(s.outside, "lib")} is outside the sandbox's view, so the command could not see it: --allow-read ${join(s.outside, "lib")}`);
    const opt = await runVak(["exec", "--", "sh", "-c", 'cat "${1#--file=}"', "sh", `--file=${join(s.outside, "secret.txt")}`], { cwd: s.ws });
    expect(opt.code).not.toBe(0);
    expect(opt.stderr).toContain(`vak: ${join(s.outside, "secret.txt")} is outside the sandbox's view`);
    expect(opt.stderr + opt.stdout).not.toContain("NOT-TO-BE-PRINTED");
  });

  it("a path that does not exist on the host either, or one inside the view, gets no such line; a command that succeeds gets none", async () => {
    const gone = await runVak(["exec", "--", "cat", join(s.outside, "nope.txt")], { cwd: s.ws });
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).not.toContain("outside the sandbox's view");
    writeFileSync(join(s.ws, "here.txt"), "here\n");
    const inside = await runVak(["exec", "--", "cat", "./here.txt", join(s.ws, "missing")], { cwd: s.ws });
    expect(inside.code).not.toBe(0);
    expect(inside.stderr).not.toContain("outside the sandbox's view");
    const ok = await runVak(["exec", "--", "sh", "-c", "true", join(s.outside, "m.js")], { cwd: s.ws });
    expect(ok.code).toBe(0);
    expect(ok.stderr).not.toContain("outside the sandbox's view");
  });
});
