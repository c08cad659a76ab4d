import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

/**
 * --deny-read masks a path. A file git holds is also a blob in the repository's object store, readable
 * under its object name (`git show HEAD:secret.env`, `git cat-file`, or zlib on the loose object): the
 * content must be denied, not only the name.
 */
describe("--deny-read holds the content git keeps of a file, not only its path", () => {
  let s: Scratch;
  const SECRET = "API_KEY=sk-committed-0123456789abcdef";
  const git = (...a: string[]) => execFileSync("git", ["-c", "user.email=t@t.invalid", "-c", "user.name=t", ...a], { cwd: s.ws, stdio: "ignore" });
  beforeEach(() => {
    s = scratch({ git: true });
  });
  afterEach(() => s.cleanup());
  const reader = "git show HEAD:secret.env; git show :secret.env; git cat-file -p $(git rev-parse HEAD:secret.env 2>/dev/null || echo x); echo ran";

  it("a committed file: the run is refused, naming the file, the repository and how to go on; git never shows it", async () => {
    writeFileSync(join(s.ws, "secret.env"), `${SECRET}\n`);
    git("add", "secret.env");
    git("commit", "-qm", "oops");
    const r = await sandboxSh(s.ws, reader, ["--deny-read", "secret.env"]);
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain(SECRET);
    expect(r.stdout).not.toContain("ran");
    expect(r.stderr).toContain("secret.env");
    expect(r.stderr).toContain(`--deny-read ${join(s.ws, ".git/objects")}`);
  });

  it("the same once git has packed it (git gc), and when it is only added", async () => {
    writeFileSync(join(s.ws, "secret.env"), `${SECRET}\n`);
    git("add", "secret.env");
    const added = await sandboxSh(s.ws, reader, ["--deny-read", "secret.env"]);
    expect(added.code).toBe(125);
    expect(added.stdout).not.toContain(SECRET);
    git("commit", "-qm", "oops");
    git("gc", "-q");
    const packed = await sandboxSh(s.ws, reader, ["--deny-read", "secret.env"]);
    expect(packed.code).toBe(125);
    expect(packed.stdout).not.toContain(SECRET);
  });

  it("a file below a denied directory counts too", async () => {
    execFileSync("mkdir", ["-p", join(s.ws, "conf")]);
    writeFileSync(join(s.ws, "conf/prod.env"), `${SECRET}\n`);
    git("add", "conf");
    git("commit", "-qm", "oops");
    const r = await sandboxSh(s.ws, "git show HEAD:conf/prod.env; echo ran", ["--deny-read", "conf"]);
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain(SECRET);
  });

  it("denying the objects too lets it run, and git cannot show the content; a file git never held runs as before", async () => {
    writeFileSync(join(s.ws, "secret.env"), `${SECRET}\n`);
    git("add", "secret.env");
    git("commit", "-qm", "oops");
    const both = await sandboxSh(s.ws, `${reader} 2>/dev/null`, ["--deny-read", "secret.env", "--deny-read", ".git/objects"]);
    expect(both.stdout).toContain("ran");
    expect(both.stdout).not.toContain(SECRET);
    writeFileSync(join(s.ws, ".gitignore"), "local.env\n");
    writeFileSync(join(s.ws, "local.env"), "LOCAL_ONLY=1\n");
    const ignored = await sandboxSh(s.ws, "cat local.env; git status --short; echo ran", ["--deny-read", "local.env"]);
    expect(ignored.stdout).toContain("ran");
    expect(ignored.stdout).not.toContain("LOCAL_ONLY");
  });
});

describe("--deny-read inside the runtime set", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  it("a denied path under /usr (where npm's global npmrc and pip's sys.prefix/pip.conf lie) is not shown: the runtime set shows /usr whole", async () => {
    // /usr/bin/env: a file every machine has under /usr; its bytes stand for a global config's.
    const r = await sandboxSh(s.ws, "head -c 4 /usr/bin/env | od -c | head -1; echo done", ["--deny-read", "/usr/bin/env"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("done");
    expect(r.stdout).not.toMatch(/E {3}L {3}F/);
    expect(r.stderr).toContain("refused read /usr/bin/env");
  });
});
