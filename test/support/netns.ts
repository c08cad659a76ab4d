import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { VAK_BIN } from "./paths.js";

/**
 * Two network namespaces made by the test: "client", where vak runs, and
 * "internet", where a web server plays the outside world. They are joined by a
 * veth pair on 11.0.0.0/24 and have no other route: a check that fails cannot
 * send a packet anywhere else. Names resolve through a hosts file bound over
 * /etc/hosts in a private mount namespace, never through the machine's own;
 * the DNS server that /etc/resolv.conf names there is 11.0.0.2:53, which
 * takes queries and never answers, as a blackholed name's server would.
 */
export interface TestInternet {
  serverAddress: string;
  dir: string;
  /** Runs `vak ARGS` in the client namespace; resolves with its output. */
  vak(args: string[], env?: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** What the server saw, one line per request. */
  log(): string[];
  /** What the silent servers saw: "dns" per DNS query, "PORT <first line>" per connection to a silent port. */
  silentLog(): string[];
  close(): void;
}

// Runs in the internet namespace: a DNS server that never answers, and TCP ports that accept and never answer.
const SILENT = `
const [host, ports, log] = process.argv.slice(1);
const { appendFileSync } = require("node:fs");
const udp = require("node:dgram").createSocket("udp4");
udp.on("message", () => appendFileSync(log, "dns\\n"));
udp.bind(53, host, () => process.stdout.write("listening dns\\n"));
for (const port of ports.split(",").filter(Boolean).map(Number))
  require("node:net").createServer({ allowHalfOpen: true }, (s) => {
    s.on("error", () => {});
    s.once("data", (d) => appendFileSync(log, port + " " + d.toString("latin1").split("\\r\\n")[0] + "\\n"));
  }).listen(port, host, () => process.stdout.write("listening " + port + "\\n"));
`;

const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });

/** HTTPS ports of the fixture server, each with its own key and certificate (PEM). */
export type TlsPorts = { port: number; key: string; cert: string }[];

export async function testInternet(hosts: Record<string, string>, ports: number[], silentPorts: number[] = [], tlsPorts: TlsPorts = []): Promise<TestInternet> {
  const id = `${process.pid % 100000}${Math.floor(Math.random() * 1000)}`;
  const client = `vakc${id}`;
  const inet = `vaki${id}`;
  const dir = mkdtempSync(join(tmpdir(), "vak-inet-"));
  ip("netns", "add", client);
  ip("netns", "add", inet);
  let server: ChildProcess | undefined;
  let silent: ChildProcess | undefined;
  const close = () => {
    server?.kill("SIGKILL");
    silent?.kill("SIGKILL");
    for (const ns of [client, inet]) {
      try {
        ip("netns", "del", ns);
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    ip("link", "add", `va${id}`, "type", "veth", "peer", "name", `vb${id}`);
    ip("link", "set", `va${id}`, "netns", client);
    ip("link", "set", `vb${id}`, "netns", inet);
    ip("-n", client, "addr", "add", "11.0.0.1/24", "dev", `va${id}`);
    ip("-n", inet, "addr", "add", "11.0.0.2/24", "dev", `vb${id}`);
    for (const [ns, dev] of [[client, `va${id}`], [inet, `vb${id}`]] as const) {
      ip("-n", ns, "link", "set", dev, "up");
      ip("-n", ns, "link", "set", "lo", "up");
    }
    writeFileSync(join(dir, "hosts"), Object.entries(hosts).map(([n, a]) => `${a}\t${n}`).join("\n") + "\n");
    writeFileSync(join(dir, "resolv.conf"), "nameserver 11.0.0.2\n");
    writeFileSync(join(dir, "server.log"), "");
    writeFileSync(join(dir, "silent.log"), "");
    writeFileSync(join(dir, "tls.json"), JSON.stringify(tlsPorts));
    const fixture = fileURLToPath(new URL("./fixture-server.mjs", import.meta.url));
    server = spawn("ip", ["netns", "exec", inet, process.execPath, fixture, "11.0.0.2", ports.join(","), join(dir, "www"), join(dir, "server.log"), join(dir, "tls.json")], { stdio: ["ignore", "pipe", "inherit"] });
    silent = spawn("ip", ["netns", "exec", inet, process.execPath, "-e", SILENT, "11.0.0.2", silentPorts.join(","), join(dir, "silent.log")], { stdio: ["ignore", "pipe", "inherit"] });
    const listening = (p: ChildProcess, count: number, what: string) =>
      new Promise<void>((resolve, reject) => {
        let out = "";
        p.stdout!.on("data", (d: Buffer) => {
          out += d.toString();
          if (out.split("\n").filter((l) => l.startsWith("listening")).length === count) resolve();
        });
        p.on("exit", (c) => reject(new Error(`${what} exited ${c}`)));
      });
    await Promise.all([listening(server, ports.length + tlsPorts.length, "fixture server"), listening(silent, silentPorts.length + 1, "silent servers")]);
  } catch (e) {
    close();
    throw e;
  }
  return {
    serverAddress: "11.0.0.2",
    dir,
    log: () => readFileSync(join(dir, "server.log"), "utf8").split("\n").filter(Boolean),
    silentLog: () => readFileSync(join(dir, "silent.log"), "utf8").split("\n").filter(Boolean),
    vak: (args, env = {}) =>
      new Promise((resolve, reject) => {
        const script = `mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"`;
        const child = spawn(
          "ip",
          ["netns", "exec", client, "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", join(dir, "hosts"), join(dir, "resolv.conf"), process.execPath, VAK_BIN, ...args],
          { cwd: join(dir, "ws"), env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", ...env }, stdio: ["ignore", "pipe", "pipe"] },
        );
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
        child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
        child.on("error", reject);
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      }),
    close,
  };
}

/**
 * What the tests' web server serves and their sandboxes work in, under a test
 * internet's dir: ws/ (a workspace) and www/repo.git, a bare repository with
 * one commit on main, served by plain HTTP (git's dumb protocol).
 */
export function servedTree(dir: string): void {
  mkdirSync(join(dir, "ws"));
  mkdirSync(join(dir, "www"));
  const repo = join(dir, "www", "repo.git");
  execFileSync("git", ["init", "-q", "--bare", repo]);
  const src = join(dir, "src");
  mkdirSync(src);
  const git = (...a: string[]) => execFileSync("git", a, { cwd: src, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  git("-c", "user.email=t@t.invalid", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x");
  git("push", "-q", repo, "main");
  execFileSync("git", ["update-server-info"], { cwd: repo });
}
