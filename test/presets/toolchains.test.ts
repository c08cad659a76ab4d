import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { baseEnv, runVak } from "../support/vak.js";

// The toolchain presets with the real tools inside the sandbox: git commits
// with the user's identity, npm installs from a registry served on loopback
// (its token never reaching the sandbox), pip installs from a wheel directory
// with pyenv's interpreter, and cargo builds a crate with no dependencies
// offline. Each test has a home directory of its own, so the machine's own
// configuration is neither read nor changed.
const which = (cmd: string): string | undefined => {
  try {
    return execFileSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
};

describe("toolchain presets, with the real tools", () => {
  let s: Scratch;
  let home: string;
  beforeAll(() => {
    s = scratch();
    home = join(s.root, "home");
    mkdirSync(home);
  });
  afterAll(() => s.cleanup());

  const vak = (args: string[], env: Record<string, string> = {}, cwd = s.ws) => runVak(["exec", ...args], { cwd, env: baseEnv({ HOME: home, ...env }) });

  it("git: a commit carries the identity from ~/.gitconfig; without the preset git does not know who you are", async () => {
    writeFileSync(join(home, ".gitconfig"), "[user]\n\tname = Daily User\n\temail = daily@example.invalid\n[credential]\n\thelper = store\n");
    writeFileSync(join(home, ".git-credentials"), "https://daily:ghp_secretsecretsecretsecretsecretsecret12@example.invalid\n");
    const repo = join(s.root, "repo");
    mkdirSync(repo);
    execFileSync("git", ["init", "-q", "-b", "main"], { cwd: repo });
    writeFileSync(join(repo, "f.txt"), "one\n");
    const bare = await vak(["--", "sh", "-c", "git add f.txt && git commit -qm first"], {}, repo);
    expect(bare.code).not.toBe(0);
    expect(bare.stderr).toMatch(/Author identity unknown|Please tell me who you are/);
    const r = await vak(["--profile", "git", "--", "sh", "-c", "git add f.txt && git commit -qm first && git log --format='%an <%ae>' && (cat ~/.git-credentials || echo no-credentials)"], {}, repo);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("Daily User <daily@example.invalid>");
    expect(r.stdout).toContain("no-credentials");
    expect(r.stdout).not.toContain("ghp_");
    expect(execFileSync("git", ["log", "--format=%an"], { cwd: repo, encoding: "utf8" }).trim()).toBe("Daily User");
    // Read-only: the sandbox cannot change the identity the host's git uses.
    const w = await vak(["--profile", "git", "--", "git", "config", "--global", "user.name", "Someone Else"], {}, repo);
    expect(w.code).not.toBe(0);
    expect(readFileSync(join(home, ".gitconfig"), "utf8")).toContain("Daily User");
  });

  describe("npm, from a registry served on loopback", () => {
    let registry: Server;
    let port: number;
    const seen: IncomingHttpHeaders[] = [];
    const TOKEN = "npm_0123456789abcdefghijklmnopqrstuvwxyzAB";
    beforeAll(async () => {
      const pkg = join(s.root, "pkg");
      mkdirSync(pkg);
      writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: "vak-hello", version: "1.0.0", main: "index.js" }));
      writeFileSync(join(pkg, "index.js"), 'module.exports = () => "hello from the registry";\n');
      execFileSync("npm", ["pack", "--silent"], { cwd: pkg, env: { ...process.env, npm_config_cache: join(s.root, "npm-cache") } });
      const tgz = readFileSync(join(pkg, "vak-hello-1.0.0.tgz"));
      registry = createServer((req, res) => {
        seen.push(req.headers);
        const base = `http://127.0.0.1:${port}`;
        if (req.url === "/vak-hello")
          return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
            name: "vak-hello", "dist-tags": { latest: "1.0.0" },
            versions: { "1.0.0": { name: "vak-hello", version: "1.0.0", main: "index.js", dist: { tarball: `${base}/vak-hello/-/vak-hello-1.0.0.tgz`, integrity: `sha512-${createHash("sha512").update(tgz).digest("base64")}` } } },
          }));
        if (req.url === "/vak-hello/-/vak-hello-1.0.0.tgz") return res.writeHead(200).end(tgz);
        res.writeHead(404, { "content-type": "application/json" }).end("{}");
      });
      await new Promise<void>((r) => registry.listen(0, "127.0.0.1", r));
      port = (registry.address() as AddressInfo).port;
      writeFileSync(join(home, ".npmrc"), `registry=http://127.0.0.1:${port}/\n//127.0.0.1:${port}/:_authToken=${TOKEN}\nfund=false\naudit=false\nupdate-notifier=false\n`);
    });
    afterAll(() => registry?.close());

    it("npm install works with ~/.npmrc's registry, and its token reaches neither the sandbox nor the registry", async () => {
      const ws = join(s.root, "npm-ws");
      mkdirSync(ws);
      writeFileSync(join(ws, "package.json"), "{}\n");
      const r = await vak(["--profile", "npm", "--allow-net", `127.0.0.1:${port}`, "--", "sh", "-c", `npm install --no-audit --no-fund vak-hello && node -e 'console.log(require("vak-hello")())' && (grep -c ${TOKEN} ~/.npmrc || echo token-not-here) && cat ~/.npmrc`], {}, ws);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("hello from the registry");
      expect(r.stdout).toContain("token-not-here");
      expect(r.stdout).toContain(`registry=http://127.0.0.1:${port}/`);
      expect(r.stdout + r.stderr).not.toContain(TOKEN);
      expect(seen.length).toBeGreaterThan(0);
      for (const h of seen) expect(h.authorization ?? "").not.toContain(TOKEN);
      expect(existsSync(join(ws, "node_modules/vak-hello/index.js"))).toBe(true);
    });

    it("--print-plan says where ~/.npmrc comes from and which line it lost, and runs nothing", async () => {
      const r = await vak(["--profile", "npm", "--allow-net", `127.0.0.1:${port}`, "--print-plan", "--json", "--", "npm", "install"]);
      expect(r.code).toBe(0);
      const plan = JSON.parse(r.stdout) as { redacted: { path: string; removed: string[]; from: string }[]; network: { allow: { rule: string; from: string }[] }; recorded: boolean };
      expect(plan.recorded).toBe(false);
      expect(plan.redacted).toEqual([{ path: join(home, ".npmrc"), removed: ["line 2"], from: expect.stringMatching(/^profile npm \(preset presets\/npm\.toml:\d+\)$/) }]);
      expect(plan.network.allow.map((a) => [a.rule, a.from.replace(/:\d+\)$/, ")")])).toEqual([[`127.0.0.1:${port}`, "--allow-net"], ["registry.npmjs.org", "profile npm (preset presets/npm.toml)"]]);
      expect(r.stdout).not.toContain(TOKEN);
    });
  });

  const python = which("python3");
  const pyenvRoot = process.env.PYENV_ROOT ?? (existsSync("/root/.pyenv") ? "/root/.pyenv" : undefined);
  it.skipIf(!python)("pip: installs from a wheel directory, with pyenv's interpreter when pyenv is there, and pip.conf without its credentials", async () => {
    const wheels = join(s.root, "wheels");
    mkdirSync(wheels);
    execFileSync("python3", ["-c", `
import zipfile, hashlib, base64
name, ver = "vak_hello", "1.0"
files = {f"{name}/__init__.py": "def hello():\\n    return 'hello from a wheel'\\n",
         f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {ver}\\n",
         f"{name}-{ver}.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: vak-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
record = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b'=').decode()},{len(v.encode())}" for k, v in files.items()]
files[f"{name}-{ver}.dist-info/RECORD"] = "\\n".join(record + [f"{name}-{ver}.dist-info/RECORD,,"]) + "\\n"
with zipfile.ZipFile("${wheels}/vak_hello-1.0-py3-none-any.whl", "w") as z:
    for k, v in files.items(): z.writestr(k, v)
`]);
    mkdirSync(join(home, ".config", "pip"), { recursive: true });
    writeFileSync(join(home, ".config", "pip", "pip.conf"), `[global]\nno-index = true\nfind-links = ${wheels}\nextra-index-url = https://pipuser:pip-secret-5678@pypi.example.invalid/simple\n`);
    const env: Record<string, string> = pyenvRoot ? { PYENV_ROOT: pyenvRoot, PATH: `${pyenvRoot}/shims:${process.env.PATH}` } : {};
    const r = await vak(["--profile", "python", "--allow-read", wheels, "--", "sh", "-c",
      // A virtual environment in the workspace, on pyenv's interpreter, with the base's pip (no download).
      `python3 -m venv --without-pip --system-site-packages .venv && .venv/bin/python -c 'import os, sys; print("exe", os.path.realpath(sys.executable))' && .venv/bin/python -m pip install -q --disable-pip-version-check vak_hello && .venv/bin/python -c 'import vak_hello; print(vak_hello.hello())' && cat ~/.config/pip/pip.conf`], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("hello from a wheel");
    if (pyenvRoot) expect(r.stdout).toMatch(new RegExp(`exe ${realpathSync(pyenvRoot).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/versions/`));
    expect(r.stdout).toContain("extra-index-url = https://pypi.example.invalid/simple");
    expect(r.stdout + r.stderr).not.toContain("pip-secret-5678");
  }, 120_000);

  const cargo = which("cargo");
  it.skipIf(!cargo)("cargo: builds a crate with no dependencies offline; its bin/ and env scripts stay read-only, its credentials unreadable", async () => {
    // The test's own CARGO_HOME, so that the machine's is not written; the toolchain from where cargo is installed.
    const cargoHome = join(s.root, "cargo-home");
    mkdirSync(join(cargoHome, "bin"), { recursive: true });
    writeFileSync(join(cargoHome, "env"), "# sourced by the shell\n");
    writeFileSync(join(cargoHome, "credentials.toml"), '[registry]\ntoken = "cio-secret-token-9999"\n');
    const rustupHome = process.env.RUSTUP_HOME ?? (existsSync(join(process.env.HOME ?? "/root", ".rustup")) ? join(process.env.HOME ?? "/root", ".rustup") : undefined);
    const crate = join(s.root, "hello");
    mkdirSync(join(crate, "src"), { recursive: true });
    writeFileSync(join(crate, "Cargo.toml"), '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n');
    writeFileSync(join(crate, "src", "main.rs"), 'fn main() { println!("hello from cargo"); }\n');
    const bin = dirname(realpathSync(cargo!)) === dirname(cargo!) ? dirname(cargo!) : dirname(cargo!);
    const r = await vak(
      ["--profile", "rust", "--allow-read", bin, "--", "sh", "-c",
        `cargo build --offline -q && ./target/debug/hello && (echo x >> "$CARGO_HOME/env" || echo env-read-only) && (touch "$CARGO_HOME/bin/cargo-evil" || echo bin-read-only) && (grep -q cio-secret "$CARGO_HOME/credentials.toml" 2>/dev/null && echo CREDENTIALS-SEEN || echo no-credentials)`],
      { CARGO_HOME: cargoHome, ...(rustupHome ? { RUSTUP_HOME: rustupHome } : {}), PATH: `${bin}:/usr/bin:/bin` },
      crate,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("hello from cargo");
    expect(r.stdout).toContain("env-read-only");
    expect(r.stdout).toContain("bin-read-only");
    expect(r.stdout).toContain("no-credentials");
    expect(r.stdout).not.toContain("cio-secret");
    expect(readFileSync(join(cargoHome, "env"), "utf8")).toBe("# sourced by the shell\n");
    expect(existsSync(join(cargoHome, "bin", "cargo-evil"))).toBe(false);
  }, 180_000);
});
