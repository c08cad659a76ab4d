import { execFileSync, spawn } from "node:child_process";
import { closeSync, constants, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync, writeSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { VAK_BIN } from "../support/paths.js";
import { httpsUpstream, testCa } from "../support/tls.js";
import { CLIENT, client, type Client, type Host, type Ran, residentHosts, sleep, until } from "../support/resident.js";
import { baseEnv } from "../support/vak.js";

/**
 * Red team of the resident host now that it serves gate-held secrets and grants
 * its gate terminates TLS for: several clients' runs share one host process,
 * each with its own gate, CA and secrets. Each test is an attack; it fails if
 * the attack works. Every client runs with VAK_RESIDENT=only (served by the
 * host, or exit 125: nothing quietly runs in-process instead).
 */

const resident = residentHosts("vak-redhost-");
const { base, workspace } = resident;
const startHost = (env: Record<string, string> = {}, cwd?: string) => resident.start({ env, cwd });
let n = 0;

/** Resolves to the run, or to undefined if it has not ended within ms. */
const within = (c: Client, ms: number): Promise<Ran | undefined> => Promise.race([c.done, sleep(ms).then(() => undefined)]);

/** The host's descriptors: number → what /proc says it is. */
function hostFds(h: Host): Map<number, string> {
  const m = new Map<number, string>();
  for (const f of readdirSync(`/proc/${h.pid}/fd`)) {
    try {
      m.set(Number(f), readlinkSync(`/proc/${h.pid}/fd/${f}`));
    } catch {
      // closed meanwhile
    }
  }
  return m;
}

function journaled(s: string): { id: string; title: string; ended: string | null }[] {
  const list = JSON.parse(execFileSync(process.execPath, [VAK_BIN, "journal", "list", "--json"], { env: baseEnv(), encoding: "utf8" })) as { id: string; title: string; ended: string | null }[];
  return list.filter((x) => x.title.includes(s));
}

function exportedText(id: string): string {
  return execFileSync(process.execPath, [VAK_BIN, "journal", "export", id], { env: baseEnv(), encoding: "utf8" });
}

/** The first certificate of a PEM text (the run's own CA is the first of its bundle: src/net/tls-run.ts). */
const firstCert = (text: string): string => /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/.exec(text)?.[0] ?? "";

afterAll(() => resident.stopAll());

describe("red team: gate-held secrets and TLS termination in the resident host, across its clients", () => {
  it("three runs at once on one host: a run given the same reference gets its own value, a run holding another's placeholder gets it sent as is, and no CA or upstream connection is shared", async () => {
    const ca = await testCa();
    let sockets = 0;
    const ids = new WeakMap<object, number>();
    const seen: { url: string; auth: string; other: string; sock: number }[] = [];
    const up = await httpsUpstream(ca, ["127.0.0.1"], (req: IncomingMessage, _body, res) => {
      if (!ids.has(req.socket)) ids.set(req.socket, ++sockets);
      seen.push({ url: req.url ?? "", auth: String(req.headers.authorization ?? "-"), other: String(req.headers["x-other"] ?? "-"), sock: ids.get(req.socket)! });
      res.end(`auth=${req.headers.authorization ?? "-"}\n`);
      return true;
    });
    try {
      const h = await startHost();
      const tag = `${process.pid}${++n}`;
      const shared = `KEY_${tag}`;
      const [va, vb, vc] = ["a", "b", "c"].map((x) => `sk-${x}-${tag}-value`) as [string, string, string];
      const url = `https://127.0.0.1:${up.port}`;
      const run = (who: string, ref: string, env: Record<string, string>, script: string) => {
        const ws = workspace();
        copyFileSync(ca.file, join(ws, "upstream-ca.pem"));
        const c = client(h, ["exec", "--ca-file", "upstream-ca.pem", "--allow-net", `127.0.0.1:${up.port}`, "--secret", `TOKEN=${ref}@127.0.0.1`, "--", "/bin/sh", "-c", `: run-${who}-${tag}; ${script}`], { cwd: ws, env });
        return { c, ws };
      };
      const printCa = `echo "ph=$TOKEN"; sed '/END CERTIFICATE/q' "$SSL_CERT_FILE"; echo "bundle=$SSL_CERT_FILE"`;
      const curl = (path: string, extra = "") => `curl -s -S -H "Authorization: Bearer $TOKEN" ${extra} ${url}${path}; echo`;
      // A holds its secret and waits, its gate alive, until B and C are done.
      const a = run("a", `env:${shared}`, { [shared]: va }, `${printCa}; ${curl("/a1")}; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; ${curl("/a2")}`);
      await until("A's first request", () => seen.some((s) => s.url === "/a1"));
      const aPlaceholder = /ph=(vak-placeholder-[0-9a-f]{24})/.exec(a.c.out())?.[1];
      expect(aPlaceholder).toBeDefined();
      // B: the same reference name, its own value (its own environment).
      const b = run("b", `env:${shared}`, { [shared]: vb }, `${printCa}; ${curl("/b1")}`);
      // C: another reference, and A's placeholder in its headers.
      const other = `OTHER_${tag}`;
      const c = run("c", `env:${other}`, { [other]: vc }, `${printCa}; ${curl("/c1", `-H "X-Other: ${aPlaceholder}"`)}; curl -s -S -H "Authorization: Bearer ${aPlaceholder}" ${url}/c2; echo`);
      const [rb, rc] = await Promise.all([b.c.done, c.c.done]);
      writeFileSync(join(a.ws, "go"), "");
      const ra = await a.c.done;
      for (const r of [ra, rb, rc]) expect(r.code, r.stderr).toBe(0);

      const byUrl = (u: string) => seen.filter((s) => s.url === u);
      expect(byUrl("/a1").map((s) => s.auth)).toEqual([`Bearer ${va}`]);
      expect(byUrl("/a2").map((s) => s.auth)).toEqual([`Bearer ${va}`]);
      expect(byUrl("/b1").map((s) => s.auth)).toEqual([`Bearer ${vb}`]);
      expect(byUrl("/c1").map((s) => [s.auth, s.other])).toEqual([[`Bearer ${vc}`, aPlaceholder]]);
      // B's placeholder for the same reference is its own: a placeholder lives no longer than its run, as in-process.
      const bPlaceholder = /ph=(vak-placeholder-[0-9a-f]{24})/.exec(rb.stdout)?.[1];
      expect(bPlaceholder).toBeDefined();
      expect(bPlaceholder).not.toBe(aPlaceholder);
      // A's placeholder sent by C goes out as it is: C's gate does not know it, and never puts A's value in.
      expect(byUrl("/c2").map((s) => s.auth)).toEqual([`Bearer ${aPlaceholder}`]);
      expect(JSON.stringify(seen.filter((s) => !s.url.startsWith("/a")))).not.toContain(va);
      // No upstream connection carried two runs' requests.
      const runOf = (s: { url: string }) => s.url[1];
      for (const s of seen) expect(seen.filter((x) => x.sock === s.sock && runOf(x) !== runOf(s))).toEqual([]);
      // Each run has a CA of its own, and no other run's is in its bundle.
      const cas = [ra, rb, rc].map((r) => firstCert(r.stdout));
      for (const x of cas) expect(x).toMatch(/BEGIN CERTIFICATE/);
      expect(new Set(cas).size).toBe(3);
      for (const [i, r] of [ra, rb, rc].entries()) for (const [j, x] of cas.entries()) if (i !== j) expect(r.stdout).not.toContain(x.slice(30, 90));
      // None of the values reached a sandbox, a client's stderr, or the record of a run that was not given it.
      for (const r of [ra, rb, rc]) for (const v of [va, vb, vc]) (expect(r.stdout).not.toContain(v), expect(r.stderr).not.toContain(v));
      for (const who of ["a", "b", "c"]) {
        const [s] = journaled(`run-${who}-${tag}`);
        const text = exportedText(s!.id);
        for (const v of [va, vb, vc]) expect(text).not.toContain(v);
      }
    } finally {
      await up.close();
    }
  });

  it("another run's trust directory is not in this run's sandbox, by its path or by a search of /tmp", async () => {
    const ca = await testCa();
    const up = await httpsUpstream(ca, ["127.0.0.1"]);
    try {
      const h = await startHost();
      const tag = `${process.pid}${++n}`;
      const wa = workspace();
      copyFileSync(ca.file, join(wa, "upstream-ca.pem"));
      const a = client(h, ["exec", "--ca-file", "upstream-ca.pem", "--allow-net", `read:127.0.0.1:${up.port}`, "--", "/bin/sh", "-c", `echo "bundle=$SSL_CERT_FILE"; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`], { cwd: wa });
      await until("A's bundle path", () => /bundle=\S+\n/.test(a.out()));
      const bundle = /bundle=(\S+)\n/.exec(a.out())![1]!;
      expect(existsSync(bundle)).toBe(true);
      const wb = workspace();
      copyFileSync(ca.file, join(wb, "upstream-ca.pem"));
      const b = await client(h, ["exec", "--ca-file", "upstream-ca.pem", "--allow-net", `read:127.0.0.1:${up.port}`, "--", "/bin/sh", "-c", `: ${tag}; cat ${bundle} >/dev/null 2>&1 && echo read-other; ls -d ${dirname(bundle)} 2>/dev/null; ls -d /tmp/vak-tls-* 2>/dev/null; echo "own=$SSL_CERT_FILE"`], { cwd: wb }).done;
      writeFileSync(join(wa, "go"), "");
      await a.done;
      expect(b.code, b.stderr).toBe(0);
      expect(b.stdout).not.toContain("read-other");
      expect(b.stdout).not.toContain(dirname(bundle));
      const own = /own=(\S+)\n/.exec(b.stdout)?.[1];
      expect(own).toBeDefined();
      expect(own).not.toBe(bundle);
    } finally {
      await up.close();
    }
  });

  it("a client killed mid-run: its sandbox dies, its trust directory is removed, and the host holds no descriptor of the run after", async () => {
    const ca = await testCa();
    const up = await httpsUpstream(ca, ["127.0.0.1"]);
    try {
      const h = await startHost();
      const tag = `${process.pid}${++n}`;
      const ws = workspace();
      copyFileSync(ca.file, join(ws, "upstream-ca.pem"));
      const name = `KEY_${tag}`;
      const args = ["exec", "--ca-file", "upstream-ca.pem", "--allow-net", `127.0.0.1:${up.port}`, "--secret", `TOKEN=env:${name}@127.0.0.1`, "--", "/bin/sh", "-c"];
      // One run first, so that what the host loads once (the journal, the engine) is open before the count.
      const warm = await client(h, [...args, "true"], { cwd: ws, env: { [name]: "v" } }).done;
      expect(warm.code, warm.stderr).toBe(0);
      await sleep(300);
      const before = hostFds(h).size;
      const a = client(h, [...args, `: killed-${tag}; curl -s -S -H "Authorization: Bearer $TOKEN" https://127.0.0.1:${up.port}/k; echo; echo "bundle=$SSL_CERT_FILE"; sleep 60`], { cwd: ws, env: { [name]: `sk-killed-${tag}` } });
      await until("the run's bundle path", () => /bundle=\S+\n/.test(a.out()));
      const dir = dirname(/bundle=(\S+)\n/.exec(a.out())![1]!);
      expect(existsSync(dir)).toBe(true);
      a.child.kill("SIGKILL");
      await a.done;
      await until("the run's trust directory removed", () => !existsSync(dir));
      await until("the run's end on the record", () => journaled(`killed-${tag}`)[0]?.ended != null);
      await until(`the host's descriptors back to ${before}`, () => hostFds(h).size <= before, 5000);
    } finally {
      await up.close();
    }
  });

  it("--ca-file naming the host's own /proc/self files and descriptors: refused, and nothing of their content in the message", async () => {
    const secret = `host-only-${process.pid}-${++n}-marker`;
    const h = await startHost({ HOSTONLY_MARK: secret });
    const ws = workspace();
    const files = new Set(["/proc/self/environ", "/proc/self/cmdline", "/proc/self/maps", "/proc/self/status", "/proc/self/mem", "/dev/stdin", "/dev/fd/0"]);
    // The host's regular files (the journal among them) by its descriptors.
    for (const [fd, what] of hostFds(h)) if (what.startsWith("/") && !what.startsWith("/dev/")) files.add(`/proc/self/fd/${fd}`);
    let i = 0;
    for (const f of files) {
      // Named so, the host sends it back to the client (in-process they are the client's own files)...
      const direct = await client(h, ["exec", "--ca-file", f, "--allow-net", "127.0.0.1:9", "--", "/bin/sh", "-c", "echo ran"], { cwd: ws }).done;
      expect(direct.stdout, f).toBe("");
      expect(direct.code, `${f}: ${direct.stderr}`).toBe(125);
      expect(direct.stderr, f).toContain("no resident host served this (fallback a path naming the process's own files");
      // ...and through a link in the client's cwd, which the host cannot tell from a file, its own checks refuse it.
      const link = `link${++i}.pem`;
      symlinkSync(f, join(ws, link));
      const r = await client(h, ["exec", "--ca-file", link, "--allow-net", "127.0.0.1:9", "--", "/bin/sh", "-c", "echo ran"], { cwd: ws }).done;
      expect(r.stdout, f).toBe("");
      expect(r.code, `${f}: ${r.stderr}`).toBe(125);
      expect(r.stderr, f).not.toContain(secret);
      expect(r.stderr, f).toContain("--ca-file");
    }
    const ok = await client(h, ["exec", "--", "/bin/sh", "-c", "echo still"], { cwd: ws }).done;
    expect(ok.stdout).toBe("still\n");
  });

  it("--ca-file naming another client's stdin (a pipe) by the host's /proc/self/fd: refused at once, that client's input stays its own, and the host serves the others meanwhile", async () => {
    const h = await startHost();
    // A's stdin is a pipe (Node's "pipe" is a socketpair, which /proc/self/fd cannot open): cat feeds it.
    const sh = spawn("/bin/sh", ["-c", 'cat | "$@"', "sh", CLIENT, "exec", "--", "/bin/sh", "-c", 'echo ready; read l; echo "got=$l"'], {
      cwd: workspace(), env: baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }), stdio: ["pipe", "pipe", "pipe"],
    });
    let aOut = "";
    sh.stdout!.on("data", (d: Buffer) => (aOut += d.toString()));
    const aDone = new Promise<void>((r) => sh.on("close", () => r()));
    await until("A ready", () => aOut.includes("ready"));
    const pipes = new Set<string>();
    for (const t of readdirSync(`/proc/${sh.pid}/task`))
      for (const kid of readFileSync(`/proc/${sh.pid}/task/${t}/children`, "utf8").trim().split(/\s+/).filter(Boolean)) {
        const link = readlinkSync(`/proc/${kid}/fd/0`);
        if (link.startsWith("pipe:")) pipes.add(link);
      }
    const fd = [...hostFds(h)].find(([, what]) => pipes.has(what))?.[0];
    expect(fd, `the host holds A's stdin (${[...pipes].join(", ")})`).toBeDefined();
    // By a link in B's cwd: named directly, /proc/self goes back to the client to run in-process.
    const wsB = workspace();
    symlinkSync(`/proc/self/fd/${fd}`, join(wsB, "ca.pem"));
    const b = client(h, ["exec", "--ca-file", "ca.pem", "--allow-net", "127.0.0.1:9", "--", "/bin/true"], { cwd: wsB });
    await sleep(500);
    // While B's request is in the host, another client is served.
    const c = client(h, ["exec", "--", "/bin/sh", "-c", "echo served"], { cwd: workspace() });
    const rc = await within(c, 8000);
    const rb = await within(b, 1000);
    sh.stdin!.end("line-for-a\n");
    await aDone;
    await c.done;
    await b.done;
    expect(aOut, "the host read A's input for B").toBe("ready\ngot=line-for-a\n");
    expect(rc?.stdout, "the host stalled while B's --ca-file was read").toBe("served\n");
    expect(rb?.code, "B's request was still in the host").toBe(125);
  });

  it("--ca-file naming a FIFO with no writer: refused at once, not waited on, and the host serves the others meanwhile", async () => {
    const h = await startHost();
    const ws = workspace();
    const fifo = join(ws, "ca.pem");
    execFileSync("mkfifo", [fifo]);
    const b = client(h, ["exec", "--ca-file", "ca.pem", "--allow-net", "127.0.0.1:9", "--", "/bin/true"], { cwd: ws });
    await sleep(500);
    const c = client(h, ["exec", "--", "/bin/sh", "-c", "echo served"], { cwd: workspace() });
    const rc = await within(c, 8000);
    const rb = await within(b, 1000);
    // A host stuck in open(2) is let go: a writer that closes at once.
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // no reader: the host is not stuck on it
    }
    await c.done;
    await b.done;
    expect(rc?.stdout, "the host stalled opening B's --ca-file").toBe("served\n");
    expect(rb?.code, "B's request was still in the host").toBe(125);
    expect(rb?.stderr).toContain("ca.pem");
  });

  it("--ca-file naming a FIFO that never ends: the host does not read it without bound", async () => {
    const h = await startHost();
    const ws = workspace();
    const fifo = join(ws, "ca.pem");
    execFileSync("mkfifo", [fifo]);
    // The test holds both ends: the host's open(2) never waits, and its reads see no end while the test writes.
    const fd = openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK);
    const b = client(h, ["exec", "--ca-file", "ca.pem", "--allow-net", "127.0.0.1:9", "--", "/bin/true"], { cwd: ws });
    const chunk = Buffer.alloc(64 * 1024, "A");
    const LIMIT = 32 * 1024 * 1024;
    let written = 0;
    const end = Date.now() + 4000;
    try {
      while (written < LIMIT && Date.now() < end) {
        try {
          written += writeSync(fd, chunk);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "EAGAIN") throw e;
          await sleep(5);
        }
      }
    } finally {
      closeSync(fd);
    }
    const rb = await b.done;
    // What fits in the pipe is all that could have been written without a reader.
    expect(written, "the host kept reading a --ca-file with no end").toBeLessThan(1024 * 1024);
    expect(rb.code).toBe(125);
  });

  it("a relative NODE_EXTRA_CA_CERTS in the client's environment is the client's cwd's file, as in-process, never one in the host's cwd", async () => {
    const ca = await testCa();
    const wrong = await testCa("Not the upstream's CA");
    const up = await httpsUpstream(ca, ["127.0.0.1"]);
    try {
      const hostCwd = workspace();
      copyFileSync(wrong.file, join(hostCwd, "extra.pem"));
      const h = await startHost({}, hostCwd);
      const ws = workspace();
      copyFileSync(ca.file, join(ws, "extra.pem"));
      const args = ["exec", "--allow-net", `read:127.0.0.1:${up.port}`, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", `https://127.0.0.1:${up.port}/extra`];
      // In-process (the control): Node-like, the variable's relative path is the cwd's.
      const inProcess = await client(h, args, { cwd: ws, env: { NODE_EXTRA_CA_CERTS: "extra.pem", VAK_RESIDENT: "off" } }).done;
      expect(inProcess.stdout, inProcess.stderr).toBe("200");
      const served = await client(h, args, { cwd: ws, env: { NODE_EXTRA_CA_CERTS: "extra.pem" } }).done;
      expect(served.stdout, served.stderr).toBe("200");
      expect(served.code, served.stderr).toBe(0);
    } finally {
      await up.close();
    }
  });

  it("a cmd: secret that takes its time does not stall the host's other clients", async () => {
    const tag = `${process.pid}${++n}`;
    const cfg = join(base, `cfg${tag}`);
    mkdirSync(join(cfg, "vak"), { recursive: true });
    writeFileSync(join(cfg, "vak", "config.toml"), `[secret_commands]\nslow${tag} = ["/bin/sh", "-c", "sleep 4; echo slow-value"]\n`);
    const h = await startHost({ XDG_CONFIG_HOME: cfg });
    const a = client(h, ["exec", "--allow-net", "127.0.0.1:9", "--secret", `T=cmd:slow${tag}@127.0.0.1`, "--", "/bin/true"], { cwd: workspace(), env: { XDG_CONFIG_HOME: cfg } });
    await sleep(500);
    const c = client(h, ["exec", "--", "/bin/sh", "-c", "echo served"], { cwd: workspace(), env: { XDG_CONFIG_HOME: cfg } });
    const rc = await c.done;
    const ra = await a.done;
    expect(ra.code, ra.stderr).toBe(0);
    expect(rc.stdout).toBe("served\n");
    expect(rc.ms, "another client's secret command held the host").toBeLessThan(2500);
  });
  it("a client gone while its cmd: secret is still being resolved: its command never runs, and its record is closed", async () => {
    const tag = `${process.pid}${++n}`;
    const cfg = join(base, `cfg${tag}`);
    mkdirSync(join(cfg, "vak"), { recursive: true });
    writeFileSync(join(cfg, "vak", "config.toml"), `[secret_commands]\nslow${tag} = ["/bin/sh", "-c", "sleep 2; echo slow-value"]\n`);
    const h = await startHost({ XDG_CONFIG_HOME: cfg });
    const ws = workspace();
    const a = client(h, ["exec", "--allow-net", "127.0.0.1:9", "--secret", `T=cmd:slow${tag}@127.0.0.1`, "--", "/bin/sh", "-c", `: gone-${tag}; touch ran`], { cwd: ws, env: { XDG_CONFIG_HOME: cfg } });
    await sleep(500);
    a.child.kill("SIGKILL");
    await a.done;
    await sleep(3500);
    expect(existsSync(join(ws, "ran")), "the command of a client that had gone ran").toBe(false);
    // If it was recorded as started, it is recorded as ended.
    for (const s of journaled(`gone-${tag}`)) expect(s.ended).not.toBeNull();
    const ok = await client(h, ["exec", "--", "/bin/sh", "-c", "echo still"], { cwd: workspace(), env: { XDG_CONFIG_HOME: cfg } }).done;
    expect(ok.stdout).toBe("still\n");
  });

  it.skipIf(process.getuid?.() !== 0)("a client holding fewer capabilities than the host (an empty bounding set) cannot have the host run its cmd: secret's command, found on its own PATH, with the host's: a file only CAP_DAC_OVERRIDE reads stays unread", async () => {
    const tag = `${process.pid}${++n}`;
    const cfg = join(base, `cfg${tag}`);
    mkdirSync(join(cfg, "vak"), { recursive: true });
    // The user's config names a password manager by name, as usual: the client's PATH says which one runs.
    writeFileSync(join(cfg, "vak", "config.toml"), `[secret_commands]
token${tag} = ["pass", "show", "token"]
`);
    const locked = join(base, `locked${tag}`);
    writeFileSync(locked, `dac-only-${tag}\n`, { mode: 0o600 });
    execFileSync("chown", ["65534", locked]);
    const evil = join(base, `bin${tag}`);
    mkdirSync(evil);
    writeFileSync(join(evil, "pass"), `#!/bin/sh\ncat ${locked}\n`, { mode: 0o755 });
    const h = await startHost({ XDG_CONFIG_HOME: cfg });
    const ws = workspace();
    const r = await client(h, ["exec", "--secret", `T=cmd:token${tag}`, "--", "/bin/sh", "-c", `echo "got=$T"`], {
      cwd: ws, env: { XDG_CONFIG_HOME: cfg, PATH: `${evil}:${process.env.PATH ?? "/usr/bin:/bin"}` }, wrapper: ["setpriv", "--bounding-set=-all", "--inh-caps=-all"],
    }).done;
    expect(r.stdout + r.stderr).not.toContain(`dac-only-${tag}`);
    // Not served: the client runs it in-process, with its own capabilities (VAK_RESIDENT=only: not at all).
    expect(r.stderr).toContain("no resident host served this");
    expect(r.stderr).toContain("capabilities");
    expect(r.code).toBe(125);
  });
});
