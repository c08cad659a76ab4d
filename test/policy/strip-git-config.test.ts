import { describe, expect, it } from "vitest";
import { scanGitConfig } from "../../src/policy/git-config.js";
import { includeTarget, REMOVED_LINE, stripGitConfig } from "../../src/policy/strip-git-config.js";

// The git preset's config files as the sandbox sees them: every credential form git config can hold is gone,
// decided on what git reads (sections, subsections, names and values after quotes, escapes and continuation
// lines), and what stays is what git reads in the same section as on the host.
const HOME = "/home/u";
const FILE = "/home/u/.gitconfig";
const strip = (text: string, include: (t: string | undefined) => string | undefined = () => undefined) => stripGitConfig(text, FILE, { home: HOME, include });
/** What git reads from the copy: key=value per variable (a bare name as key). */
const readBack = (text: string): string[] => {
  const scan = scanGitConfig(text, FILE);
  expect(scan.error, text).toBeUndefined();
  return scan.entries.map((e) => (e.value === undefined ? e.key : `${e.key}=${e.value}`));
};
const SECRET = "ghp_SECRETVALUE0123456789abcdefghij";

describe("a git config file loses every credential git could read in it", () => {
  const removes: [string, string][] = [
    ["http.extraheader", `[http]\n\textraheader = AUTHORIZATION: basic c2VjcmV0\n`],
    ["http.<url>.extraHeader, any case", `[HTTP "https://github.com/"]\n\tExtraHeader = "PRIVATE-TOKEN: zzsecretzz"\n`],
    ["a token in url.<base>.insteadOf's base", `[url "https://x-access-token:${SECRET}@github.com/"]\n\tinsteadOf = https://github.com/\n`],
    ["a token in url.<base>.pushInsteadOf's base, the old [url.base] spelling aside", `[url "https://${SECRET}@github.com/"]\n\tpushInsteadOf = https://github.com/\n`],
    ["userinfo in an insteadOf value", `[url "https://github.com/"]\n\tinsteadOf = https://bob:zzsecretzz@github.com/\n`],
    ["userinfo in remote.<name>.url of a global config", `[remote "origin"]\n\turl = https://bob:zzsecretzz@example.com/r.git\n`],
    ["userinfo in remote.<name>.pushurl, quoted in two pieces", `[remote "origin"]\n\tpushurl = "https://bob:zzsecretzz"@example.com/r.git\n`],
    ["http.proxy with userinfo", `[http]\n\tproxy = http://bob:zzsecretzz@proxy.example:3128\n`],
    ["http.proxy with userinfo and no scheme", `[http]\n\tproxy = bob:zzsecretzz@proxy.example:3128\n`],
    ["a credential helper with the token inline", `[credential]\n\thelper = "!f() { echo username=bob; echo password=zzsecretzz; }; f"\n`],
    ["a credential helper continued over lines", `[credential]\n\thelper = "!f() { echo username=bob; \\\n echo password=zzsecretzz; }; f"\n`],
    ["credential.<url>.username and a store helper", `[credential "https://example.com"]\n\tusername = zzsecretzz\n\thelper = store --file /home/u/zzsecretzz\n`],
    ["a credential section in the old spelling", `[Credential.https]\n\thelper = zzsecretzz\n`],
    ["sendemail.smtpPass", `[sendemail]\n\tsmtpPass = zzsecretzz\n`],
    ["sendemail.<identity>.smtppass", `[sendemail "work"]\n\tsmtppass = zzsecretzz\n`],
    ["imap.pass", `[imap]\n\tpass = zzsecretzz\n`],
    ["http.cookieFile", `[http]\n\tcookiefile = /home/u/zzsecretzz\n`],
    ["a token's shape in an alias", `[alias]\n\tpr = !gh pr create --repo x --with ${SECRET}\n`],
    ["a token by its word in an alias", `[alias]\n\tapi = !curl -H 'Authorization: token zzsecretzz' https://api.example/\n`],
    ["a token after a header on the same line", `[http] extraheader = zzsecretzz\n`],
    ["a credential section and a variable on one line", `[credential] helper = zzsecretzz\n`],
    ["a commented-out token", `[http]\n#\textraheader = AUTHORIZATION: basic zzsecretzz\n\t; token zzsecretzz\n`],
    ["a token in a comment after a value", `[user]\n\tname = A # zzsecretzz\n`],
    ["userinfo in an includeIf condition", `[includeIf "hasconfig:remote.*.url:https://zzsecretzz@example.com/**"]\n\tpath = /home/u/.gitconfig-x\n`],
    ["a CR LF file", `[http]\r\n\textraheader = zzsecretzz\r\n[user]\r\n\tname = A\r\n`],
    ["after a byte order mark", `\uFEFF[http]\n\textraheader = zzsecretzz\n`],
  ];
  for (const [title, text] of removes)
    it(title, () => {
      const s = strip(text);
      expect(s.text).not.toMatch(/zzsecretzz|ghp_|c2VjcmV0/);
      expect(s.text.split("\n").length, "lines numbered as on the host").toBe(text.split("\n").length);
      expect(s.removed.length + (/[#;]/.test(text) ? 1 : 0)).toBeGreaterThan(0);
      readBack(s.text);
    });

  it("keeps identity, the signing key's id and ordinary settings, even with a credential's words in a name", () => {
    const text = `[user]\n\tname = Tokenia Secretary\n\temail = secret.agent@example.com\n\tsigningkey = 0xDEADBEEF\n[core]\n\teditor = vim\n[pull]\n\trebase\n[url "git@github.com:"]\n\tinsteadOf = https://github.com/\n[init]\n\tdefaultBranch = main\n`;
    const s = strip(text);
    expect(s.text).toBe(text);
    expect(s.removed).toEqual([]);
  });

  it("a header sharing its line with a removed variable stays, so what follows is read in the same section", () => {
    const s = strip(`[user]\n\tname = A\n[http] extraheader = zzsecretzz\n\tsslVerify = false\n[user]\n\temail = a@example.com\n`);
    expect(s.text).toBe(`[user]\n\tname = A\n[http] ${REMOVED_LINE}\n\tsslVerify = false\n[user]\n\temail = a@example.com\n`);
    expect(readBack(s.text)).toEqual(["user.name=A", "http.sslverify=false", "user.email=a@example.com"]);
    expect(s.removed).toEqual(["line 3 (http.extraheader: its name says it holds a credential)"]);
  });

  it("a kept variable whose header went is removed too, rather than read by git in the section before", () => {
    // [user] shares a line with a removed section's header: git inside would read email in [http].
    const s = strip(`[http]\n\tsslVerify = false\n[credential "x"] [user] name = A\n\temail = a@example.com\n`);
    expect(readBack(s.text)).toEqual(["http.sslverify=false"]);
    expect(s.removed.join("; ")).toMatch(/line 4 \(user\.email: its section's header was removed\)/);
  });

  it("everything from where git's grammar stops is removed (fail closed), and the rest read as git reads it", () => {
    const cases = [
      `[user]\n\tname = A\n\tthis is not a variable\n[http]\n\textraheader = zzsecretzz\n`,
      `[user]\n\tname = A\n[alias]\n\tx = "unterminated \\\n\textraheader = zzsecretzz\n`,
      `[user]\n\tname = A\n[alias]\n\tx = bad escape \\q zzsecretzz\n`,
      `[user]\n\tname = A\n[credential.https://x]\n\thelper = zzsecretzz\n`,
      `[user]\n\tname = A\n[http ]\n\textraheader = zzsecretzz\n`,
      `[user]\n\tname = A\n\r[http]\n\textraheader = zzsecretzz\n`,
    ];
    for (const text of cases) {
      const s = strip(text);
      expect(s.text, text).not.toContain("zzsecretzz");
      expect(readBack(s.text), text).toEqual(["user.name=A"]);
      expect(s.removed.join("; "), text).toMatch(/not read with certainty/);
    }
  });

  it("an include is followed where the caller shows its target without credentials too, and removed where not", () => {
    const asked: (string | undefined)[] = [];
    const s = strip(`[include]\n\tpath = ~/.gitconfig-work\n\tpath = local.inc\n\tpath = ~bob/x\n\tpath = ../etc/x\n[includeIf "gitdir:~/work/"]\n\tpath = /srv/shared.inc\n`, (t) => {
      asked.push(t);
      return t === "/srv/shared.inc" ? "inside a path bound from the host" : t === undefined ? "not certain" : undefined;
    });
    expect(asked).toEqual(["/home/u/.gitconfig-work", "/home/u/local.inc", undefined, undefined, "/srv/shared.inc"]);
    expect(readBack(s.text)).toEqual(["include.path=~/.gitconfig-work", "include.path=local.inc"]);
    expect(s.removed).toEqual([
      "line 4 (include.path: not followed: not certain)",
      "line 5 (include.path: not followed: not certain)",
      "line 7 (includeif.*.path: not followed: inside a path bound from the host)",
    ]);
  });

  it("an include's target is where git opens it, or not certain", () => {
    expect(includeTarget("~/.gitconfig-work", FILE, HOME)).toBe("/home/u/.gitconfig-work");
    expect(includeTarget("work/inc", "/home/u/.config/git/config", HOME)).toBe("/home/u/.config/git/work/inc");
    expect(includeTarget("/abs/inc", FILE, HOME)).toBe("/abs/inc");
    for (const v of ["~other/x", "%(prefix)/etc/x", "a/../b", "./x", "/a//b", "", undefined]) expect(includeTarget(v, FILE, HOME), String(v)).toBeUndefined();
  });
});
