import { existsSync, linkSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

/**
 * The host's credential stores against a grant that covers them only as a parent: the user runs `vak exec`
 * from the home directory (the workspace is HOME), or grants `--allow-read ~`. Other tools' logins are in
 * there (registry auths, OAuth tokens, cloud keys, private keys); the sandbox must not read them, change
 * them or make them, by any name, unless the user named the store itself. A home of the test's own, with
 * fake credentials in it, each as its tool writes it.
 */
let s: Scratch;
let home: string;
beforeEach(() => {
  s = scratch();
  home = join(s.root, "home");
  mkdirSync(home);
});
afterEach(() => s.cleanup());

/** [a file the tool writes, the store Vak's line names (the file itself, or the directory holding it)]. */
const STORES: [string, string][] = [
  [".docker/config.json", ".docker/config.json"],
  [".config/gh/hosts.yml", ".config/gh/hosts.yml"],
  [".config/gcloud/credentials.db", ".config/gcloud/credentials.db"],
  [".config/gcloud/application_default_credentials.json", ".config/gcloud/application_default_credentials.json"],
  [".aws/credentials", ".aws"],
  [".azure/msal_token_cache.json", ".azure/msal_token_cache.json"],
  [".kube/config", ".kube/config"],
  [".git-credentials", ".git-credentials"],
  [".netrc", ".netrc"],
  [".pypirc", ".pypirc"],
  [".npmrc", ".npmrc"],
  [".cargo/credentials.toml", ".cargo/credentials.toml"],
  [".ssh/id_ed25519", ".ssh"],
  [".gnupg/private-keys-v1.d/0123ABCD.key", ".gnupg"],
  [".password-store/github.com.gpg", ".password-store"],
  [".terraform.d/credentials.tfrc.json", ".terraform.d/credentials.tfrc.json"],
  [".config/hub", ".config/hub"],
  [".vault-token", ".vault-token"],
];
const secret = (i: number) => `store-${i}-tok`;
const plant = () => {
  STORES.forEach(([rel], i) => {
    const p = join(home, rel);
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, `${rel}: ${secret(i)}\n`);
  });
  // What the user keeps beside them, which the workspace shows as before.
  writeFileSync(join(home, "notes.txt"), "plain-notes\n");
};
const leaked = (out: string, n = STORES.length) => Array.from({ length: n }, (_, i) => secret(i)).filter((x) => out.includes(x));
const fromHome = (args: string[], env: Record<string, string> = {}) => runVak(["exec", ...args], { cwd: home, env: baseEnv({ HOME: home, ...env }) });
const catAll = (paths: string[]) => `for f in ${paths.map((p) => `'${p}'`).join(" ")}; do cat "$f" 2>/dev/null; done; cat ~/notes.txt; echo done`;

describe("run from the home directory, the host's credential stores are hidden", () => {
  it("cat of each store shows nothing, and Vak's line names the store and --allow-read", async () => {
    plant();
    // Six to a run: Vak prints a line for the first refusal of each kind and place, at most twelve.
    for (let at = 0; at < STORES.length; at += 6) {
      const batch = STORES.slice(at, at + 6);
      const r = await fromHome(["--", "sh", "-c", catAll(batch.map(([rel]) => join(home, rel)))]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("plain-notes");
      expect(leaked(r.stdout)).toEqual([]);
      for (const [rel, store] of batch) {
        // A second refusal in the same directory for the same reason is counted at the end, by its name.
        const first = batch.find(([, st]) => st === store)![0] === rel;
        expect(r.stderr, rel).toContain(first ? `refused read ${join(home, rel)}: protected path ${join(home, store)}` : basename(rel));
        expect(r.stderr, rel).toContain(`--allow-read ${join(home, store)} shows it`);
      }
    }
  });

  it("listing and searching the home directory finds no store's content (find | xargs cat, grep -r)", async () => {
    plant();
    const r = await fromHome(["--", "sh", "-c", "find ~ -type f -exec cat {} + 2>/dev/null; grep -r tok ~ 2>/dev/null; tar cf - -C ~ . 2>/dev/null | strings; echo done"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("plain-notes");
    expect(leaked(r.stdout)).toEqual([]);
  });

  it("a store cannot be overwritten, appended to, removed or replaced by a rename", async () => {
    plant();
    const cmds = STORES.map(([rel]) => {
      const p = join(home, rel);
      return `echo pwned > '${p}'; echo pwned >> '${p}'; rm -f '${p}'; echo pwned > ~/x.tmp; mv -f ~/x.tmp '${p}'`;
    });
    const r = await fromHome(["--", "sh", "-c", `${cmds.join("; ")} 2>/dev/null; echo done`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("done");
    STORES.forEach(([rel], i) => expect(readFileSync(join(home, rel), "utf8"), rel).toBe(`${rel}: ${secret(i)}\n`));
    // The directory that holds one cannot be moved away (to put another in its place) either.
    const moved = await fromHome(["--", "sh", "-c", "mv ~/.aws ~/aws-old 2>/dev/null && echo MOVED; mv ~/.config ~/config-old 2>/dev/null && echo MOVED; echo done"]);
    expect(moved.stdout).not.toContain("MOVED");
    expect(existsSync(join(home, ".aws", "credentials"))).toBe(true);
  });

  it("a store that does not exist yet cannot be planted (a kubeconfig's exec plugin, AWS keys, docker credsStore, a netrc)", async () => {
    mkdirSync(join(home, ".config"));
    const planted = [".kube/config", ".aws/credentials", ".aws/config", ".docker/config.json", ".netrc", ".config/gh/hosts.yml", ".git-credentials", ".vault-token"];
    const r = await fromHome(["--", "sh", "-c", `${planted.map((rel) => `mkdir -p '${dirname(join(home, rel))}' 2>/dev/null; echo planted > '${join(home, rel)}' 2>/dev/null`).join("; ")}; echo done`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("done");
    for (const rel of planted) expect(existsSync(join(home, rel)), rel).toBe(false);
    expect(r.stderr).toContain("credential store of the host, which the sandbox may not make");
  });

  it("no other name reaches them: a symlink made in the workspace, `..`, /proc/self/root, /proc/self/cwd", async () => {
    plant();
    const names = STORES.flatMap(([rel], i) => {
      const p = join(home, rel);
      return [`~/via-${i}`, `${home}/.config/../${rel}`, `/proc/self/root${p}`, `/proc/self/cwd/${rel}`, `${home}//${rel}`, `${home}/./${rel}`].map((n) => ({ i, p, n }));
    });
    const links = STORES.map(([rel], i) => `ln -s '${join(home, rel)}' ~/via-${i}`).join("; ");
    const r = await fromHome(["--", "sh", "-c", `${links}; ${catAll(names.map((x) => x.n))}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("plain-notes");
    expect(leaked(r.stdout)).toEqual([]);
  });

  it("no other name reaches them: a symlink or a hard link planted in the workspace before the run", async () => {
    plant();
    mkdirSync(join(home, "proj"));
    STORES.forEach(([rel], i) => {
      symlinkSync(join(home, rel), join(home, "proj", `sym-${i}`));
      linkSync(join(home, rel), join(home, "proj", `hard-${i}`));
    });
    const r = await fromHome(["--", "sh", "-c", catAll(STORES.flatMap((_, i) => [join(home, "proj", `sym-${i}`), join(home, "proj", `hard-${i}`)]))]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("plain-notes");
    expect(leaked(r.stdout)).toEqual([]);
    expect(r.stderr).toContain("is a host credential store Vak hides");
  });

  it("--allow-read ~ from another workspace does not show them either", async () => {
    plant();
    const r = await runVak(["exec", "--allow-read", home, "--", "sh", "-c", catAll(STORES.map(([rel]) => join(home, rel)))], { cwd: s.ws, env: baseEnv({ HOME: home }) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("plain-notes");
    expect(leaked(r.stdout)).toEqual([]);
  });

  it("where a variable moves a store (DOCKER_CONFIG, AZURE_CONFIG_DIR, AWS_SHARED_CREDENTIALS_FILE, KUBECONFIG, CLOUDSDK_CONFIG, GNUPGHOME, PASSWORD_STORE_DIR, CARGO_HOME, XDG_CONFIG_HOME, NETRC), it is hidden there", async () => {
    const moved: [string, string, string][] = [
      ["DOCKER_CONFIG", "tools/docker", "tools/docker/config.json"],
      ["AZURE_CONFIG_DIR", "tools/azure", "tools/azure/msal_token_cache.json"],
      ["AWS_SHARED_CREDENTIALS_FILE", "tools/aws-creds", "tools/aws-creds"],
      ["KUBECONFIG", `tools/kube-a:${home}/tools/kube-b`, "tools/kube-b"],
      ["CLOUDSDK_CONFIG", "tools/gcloud", "tools/gcloud/credentials.db"],
      ["GNUPGHOME", "tools/gnupg", "tools/gnupg/private-keys-v1.d/k.key"],
      ["PASSWORD_STORE_DIR", "tools/pass", "tools/pass/site.gpg"],
      ["CARGO_HOME", "tools/cargo", "tools/cargo/credentials.toml"],
      ["XDG_CONFIG_HOME", "tools/xdg", "tools/xdg/gh/hosts.yml"],
      ["NETRC", "tools/my-netrc", "tools/my-netrc"],
    ];
    const env: Record<string, string> = {};
    moved.forEach(([name, value, file], i) => {
      env[name] = value.split(":").map((v) => (v.startsWith("/") ? v : join(home, v))).join(":");
      mkdirSync(dirname(join(home, file)), { recursive: true });
      writeFileSync(join(home, file), `${secret(i)}\n`);
    });
    writeFileSync(join(home, "notes.txt"), "plain-notes\n");
    const r = await fromHome(["--", "sh", "-c", `find ~/tools -type f -exec cat {} + 2>/dev/null; ${catAll(moved.map(([, , f]) => join(home, f)))}`], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("plain-notes");
    expect(leaked(r.stdout, moved.length)).toEqual([]);
  });
});

describe("a store asked for by name is shown", () => {
  it("--allow-read of the file shows it, and nothing else of its store; a profile line naming the store shows it whole", async () => {
    plant();
    writeFileSync(join(home, ".aws", "config"), "[default]\naws_secret_access_key = aws-config-tok\n");
    for (const [rel] of STORES) {
      const i = STORES.findIndex(([x]) => x === rel);
      const r = await fromHome(["--allow-read", join(home, rel), "--", "sh", "-c", catAll(STORES.map(([x]) => join(home, x)))]);
      expect(r.code, `${rel}: ${r.stderr}`).toBe(0);
      expect(r.stdout, rel).toContain(secret(i));
      // The one it named, not its neighbours (in the same store or not).
      expect(leaked(r.stdout).filter((x) => x !== secret(i)), rel).toEqual([]);
    }
    const part = await fromHome(["--allow-read", join(home, ".aws", "credentials"), "--", "sh", "-c", `cat ~/.aws/config 2>&1; echo x > ~/.aws/new 2>&1; echo done`]);
    expect(part.stdout).not.toContain("aws-config-tok");
    expect(existsSync(join(home, ".aws", "new"))).toBe(false);
    mkdirSync(join(home, ".config", "vak"), { recursive: true });
    writeFileSync(join(home, ".config", "vak", "config.toml"), `[profiles.aws]\nallow_read = ["~/.aws"]\n`);
    const whole = await fromHome(["--profile", "aws", "--", "sh", "-c", "cat ~/.aws/credentials ~/.aws/config; cat ~/.kube/config 2>/dev/null; echo done"]);
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.stdout).toContain(secret(STORES.findIndex(([x]) => x === ".aws/credentials")));
    expect(whole.stdout).toContain("aws-config-tok");
    expect(whole.stdout).not.toContain(secret(STORES.findIndex(([x]) => x === ".kube/config")));
  });

  it("a preset's allow_read_redacted file with nothing to strip is shown as it is from HOME (~/.npmrc), one with a token is not, and the other stores stay hidden", async () => {
    plant();
    writeFileSync(join(home, ".npmrc"), "registry=https://registry.npmjs.org/\nfund=false\n");
    const clean = await fromHome(["--profile", "npm", "--", "sh", "-c", `cat ~/.npmrc; ${catAll(STORES.map(([x]) => join(home, x)))}`]);
    expect(clean.code, clean.stderr).toBe(0);
    expect(clean.stdout).toContain("fund=false");
    expect(leaked(clean.stdout)).toEqual([]);
    writeFileSync(join(home, ".npmrc"), "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=npm-home-tok\n");
    const token = await fromHome(["--profile", "npm", "--", "sh", "-c", "cat ~/.npmrc 2>/dev/null; echo done"]);
    expect(token.code, token.stderr).toBe(0);
    expect(token.stdout).not.toContain("npm-home-tok");
  });
});

describe("the plan says what it hides", () => {
  it("--print-plan lists the stores hidden, each with what it is and the grant that shows it", async () => {
    plant();
    const r = await fromHome(["--print-plan", "--", "true"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("hidden: the host's credential stores");
    expect(r.stdout).toContain("--allow-read");
    expect(r.stdout).toContain(".aws");
  });
});
