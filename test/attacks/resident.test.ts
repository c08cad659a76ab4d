import { execFileSync, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, VAK_BIN } from "../support/paths.js";
import { httpsUpstream, testCa } from "../support/tls.js";
import { CLIENT, client, hostPid, residentHosts, sleep, until } from "../support/resident.js";
import { baseEnv, TEST_STATE } from "../support/vak.js";

/**
 * The resident host (src/resident/) and its native client (native/client.c):
 * who may use the socket, what a lying client gets, and what dies with whom.
 * Every client here runs with VAK_RESIDENT=only, so that nothing it asks for
 * quietly runs in-process instead: the host serves it or it exits 125.
 */

const resident = residentHosts("vak-resident-");
const { base, hosts, workspace } = resident;
const startHost = (idle = 120, env: Record<string, string> = {}) => resident.start({ idle, env });
let liar = "";
let n = 0;

/**
 * Processes anywhere on the machine whose command line holds marker (a number
 * no other process uses) as a word of its own, other than the client asking for it.
 */
function running(marker: string): number[] {
  const out: number[] = [];
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readlinkSync(`/proc/${p}/exe`) === CLIENT) continue;
    } catch {
      // another user's, or gone
    }
    try {
      if (readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").includes(marker)) out.push(Number(p));
    } catch {
      // gone
    }
  }
  return out;
}

const marker = () => `${1000 + Math.floor(Math.random() * 8000)}.${Math.floor(Math.random() * 1e6)}`;

/** The spool files (the journal's, before ingest) whose text holds s. */
function spooled(s: string): string[] {
  const dir = join(TEST_STATE, "vak", "spool");
  if (!existsSync(dir)) return [];
  return readdirSync(dir).map((f) => join(dir, f)).filter((f) => readFileSync(f, "utf8").includes(s));
}

interface Exported {
  kind: string;
  payload: Record<string, unknown>;
}

/** The journal's sessions whose title holds s (the test state's journal, which every host here holds open). */
function journaled(s: string): { id: string; title: string; ended: string | null; outcome: string | null }[] {
  const list = JSON.parse(execFileSync(process.execPath, [VAK_BIN, "journal", "list", "--json"], { env: baseEnv(), encoding: "utf8" })) as { id: string; title: string; ended: string | null; outcome: string | null }[];
  return list.filter((x) => x.title.includes(s));
}

/** One session's events, as `vak journal export` gives them. */
function exported(id: string): Exported[] {
  const text = execFileSync(process.execPath, [VAK_BIN, "journal", "export", id], { env: baseEnv(), encoding: "utf8" }).trim();
  return text ? text.split("\n").map((l) => JSON.parse(l) as Exported) : [];
}

beforeAll(() => {
  liar = join(base, "liar");
  execFileSync("cc", ["-O2", "-Wall", "-o", liar, join(ROOT, "test/support/resident-liar.c")]);
});

afterAll(() => resident.stopAll());

describe("the resident host serves its own user's vak exec", () => {
  it("runs the command sandboxed with the client's cwd, stdio and exit status, on the record", async () => {
    const h = await startHost();
    const ws = workspace();
    const tag = marker();
    const r = await client(h, ["exec", "--", "/bin/sh", "-c", `echo out-${tag}; pwd; echo err >&2; cat; echo pid $$; exit 7`], { cwd: ws, input: "from-stdin\n" }).done;
    expect(r.stderr).toContain("err");
    expect(r.stdout).toContain(`out-${tag}\n${ws}\nfrom-stdin\n`);
    // Its own pid namespace: the launcher's sandbox, not a bare spawn by the host.
    expect(Number(/pid (\d+)/.exec(r.stdout)?.[1])).toBeLessThan(10);
    expect(r.code).toBe(7);
    // Recorded straight into the journal the host holds open: no spool file, nothing to take in later.
    expect(spooled(`out-${tag}`)).toEqual([]);
    const [session, ...more] = journaled(`out-${tag}`);
    expect(more).toEqual([]);
    expect(session!.outcome).toBe("exit 7");
    const events = exported(session!.id);
    expect(events.map((e) => e.kind)).toEqual(["session.started", "policy.generation", "worker.spawned", "worker.exited", "session.ended"]);
    expect(events[3]!.payload.code).toBe(7);
  });

  it("a plain network grant runs through the host's egress gate, each request on the record before it is sent", async () => {
    const h = await startHost();
    const ws = workspace();
    const tag = marker();
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(req.url ?? "");
      res.end(`hello ${req.url}\n`);
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    try {
      // curl keeps one connection to the gate for all of them: the repeats of one decision, each on the record.
      const paths = Array.from({ length: 12 }, (_, i) => `p${i}-${tag}`);
      const r = await client(h, ["exec", "--allow-net", `127.0.0.1:${port}`, "--", "curl", "-s", "-S", ...paths.map((x) => `http://127.0.0.1:${port}/${x}`)], { cwd: ws }).done;
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe(paths.map((x) => `hello /${x}\n`).join(""));
      expect(r.code).toBe(0);
      expect(seen).toEqual(paths.map((x) => `/${x}`));
      expect(spooled(tag)).toEqual([]);
      const [session] = journaled(tag);
      const egress = exported(session!.id).filter((e) => e.kind === "egress").map((e) => [e.payload.decision, String(e.payload.asked).replace(/.*\//, ""), e.payload.outcome ?? null]);
      expect(egress).toEqual(paths.flatMap((x) => [["allowed", x, null], ["allowed", x, "completed"]]));
      // A refused destination is refused there, as in-process.
      const other = await client(h, ["exec", "--allow-net", `127.0.0.1:${port}`, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", `http://127.0.0.1:${port + 1}/`], { cwd: ws }).done;
      expect(other.stdout).toBe("403");
    } finally {
      server.close();
    }
  });

  it("paths the client gave relative to its cwd are its cwd's, not the host's: --workspace sub, and grants relative to it", async () => {
    const h = await startHost();
    const ws = workspace();
    mkdirSync(join(ws, "sub", "data"), { recursive: true });
    const r = await client(h, ["exec", "--workspace", "sub", "--allow-read", "data", "--", "/bin/sh", "-c", "pwd; touch made; ls -d data"], { cwd: ws }).done;
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(`${join(ws, "sub")}\ndata\n`);
    expect(r.code).toBe(0);
    expect(existsSync(join(ws, "sub", "made"))).toBe(true);
  });

  it("--secret through the host: env: and cmd: references are the client's (its environment and cwd), never the host's, and the value is not on the record", async () => {
    const tag = `${process.pid}${++n}`;
    const cfg = join(base, `cfg${tag}`);
    mkdirSync(join(cfg, "vak"), { recursive: true });
    writeFileSync(join(cfg, "vak", "config.toml"), `[secret_commands]\nwhere${tag} = ["/bin/sh", "-c", "echo cwd=$(pwd)-$CLIENT_ONLY"]\n`);
    const name = `MY_TOKEN_${tag}`;
    const h = await startHost(120, { XDG_CONFIG_HOME: cfg, [name]: `host-value-${tag}` });
    const ws = workspace();
    const r = await client(h, ["exec", "--secret", `TOK=env:${name}`, "--secret", `WHERE=cmd:where${tag}`, "--", "/bin/sh", "-c", 'echo "tok=$TOK"; echo "where=$WHERE"'], {
      cwd: ws, env: { XDG_CONFIG_HOME: cfg, [name]: `client-value-${tag}`, CLIENT_ONLY: "from-client" },
    }).done;
    expect(r.stdout).toBe(`tok=client-value-${tag}\nwhere=cwd=${ws}-from-client\n`);
    expect(r.code, r.stderr).toBe(0);
    // On the record by reference only.
    expect(spooled(`env:${name}`)).toEqual([]);
    const ran = journaled('echo "tok=$TOK"');
    expect(ran.length).toBe(1);
    const all = JSON.stringify(exported(ran[0]!.id));
    expect(all).toContain(`env:${name}`);
    expect(all).not.toContain(`client-value-${tag}`);
  });

  it("a secret the egress gate holds, and grants it terminates TLS for, run in the host's gate: a placeholder inside, the value in the header for its host only, --ca-file from the client's cwd, read: refusing a POST", async () => {
    const ca = await testCa();
    const up = await httpsUpstream(ca, ["127.0.0.1"], (req, _body, res) => {
      res.end(`auth=${req.headers.authorization ?? "-"}\n`);
      return true;
    });
    try {
      const h = await startHost();
      const ws = workspace();
      copyFileSync(ca.file, join(ws, "upstream-ca.pem"));
      const tag = `${process.pid}${++n}`;
      const name = `KEY_${tag}`;
      const value = `sk-host-held-${tag}-value`;
      const url = `https://127.0.0.1:${up.port}`;
      const script = `: ran-${tag}; echo "inside=$TOKEN"; curl -s -S -H "Authorization: Bearer $TOKEN" ${url}/keyed; grep -c ${value} /proc/self/environ || true`;
      const r = await client(h, ["exec", "--ca-file", "upstream-ca.pem", "--allow-net", `127.0.0.1:${up.port}`, "--secret", `TOKEN=env:${name}@127.0.0.1`, "--", "/bin/sh", "-c", script], { cwd: ws, env: { [name]: value } }).done;
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^inside=vak-placeholder-[0-9a-f]{24}\n/);
      // The server got the value; its echo of it came back to the sandbox as the placeholder (src/net/reflected.ts).
      expect(up.requests.map((q) => [q.url, q.headers.authorization])).toEqual([["/keyed", `Bearer ${value}`]]);
      expect(r.stdout).toMatch(/auth=Bearer vak-placeholder-[0-9a-f]{24}\n0\n$/);
      expect(r.stdout).not.toContain(value);
      // Served by the host: nothing went through the spool (in-process runs record there), and the value is on no record.
      expect(spooled(name)).toEqual([]);
      const [ran] = journaled(`ran-${tag}`);
      const events = exported(ran!.id);
      expect(JSON.stringify(events)).not.toContain(value);
      expect(events.filter((e) => e.kind === "secret.used").length).toBeGreaterThan(0);
      // A read: grant is a terminated tunnel in the host's gate too: a POST is refused before the server sees it.
      const post = await client(h, ["exec", "--ca-file", join(ws, "upstream-ca.pem"), "--allow-net", `read:127.0.0.1:${up.port}`, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "x", `${url}/posted`], { cwd: ws }).done;
      expect(post.code, post.stderr).toBe(0);
      expect(post.stdout).toBe("403");
      expect(up.requests.some((q) => q.url === "/posted")).toBe(false);
    } finally {
      await up.close();
    }
  });

  it("a request the host does not serve goes back to the client (never run weaker): a terminal not read interactively, --full-access, other settings", async () => {
    const h = await startHost();
    const ws = workspace();
    const full = await client(h, ["exec", "--full-access", "--", "/bin/true"], { cwd: ws }).done;
    expect(full.code).toBe(125);
    expect(full.stderr).toContain("no resident host served this (fallback --full-access)");
    const other = await client(h, ["exec", "--", "/bin/true"], { cwd: ws, env: { XDG_STATE_HOME: join(base, "elsewhere") } }).done;
    expect(other.code).toBe(125);
    expect(other.stderr).toContain("XDG_STATE_HOME differs");
    // script(1) gives the client a terminal; with stdin elsewhere it is only written to, and the user's shell does job control on vak.
    const tty = spawnSync("script", ["-qec", `${CLIENT} exec -- /bin/true </dev/null`, "/dev/null"], { cwd: ws, env: baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }), encoding: "utf8" });
    expect(tty.stdout).toContain("a terminal not read interactively in the foreground");
    expect(tty.status).toBe(125);
    // At an interactive terminal the host serves it (test/attacks/terminal.test.ts runs every terminal test both ways).
    const served = spawnSync("script", ["-qec", `${CLIENT} exec -- /bin/sh -c 'test -t 0 && test -t 1 && echo on-a-tty'`, "/dev/null"], { cwd: ws, env: baseEnv({ XDG_RUNTIME_DIR: h.rt, VAK_RESIDENT: "only" }), encoding: "utf8" });
    expect(served.stdout).toContain("on-a-tty");
    expect(served.status).toBe(0);
    // Without VAK_RESIDENT=only, what the host sends back runs in Node in-process, exactly as without a host.
    const back = await client(h, ["exec", "--full-access", "--", "/bin/sh", "-c", "echo full"], { cwd: ws, env: { VAK_RESIDENT: "" } }).done;
    expect(back.stdout).toBe("full\n");
    expect(back.stderr).toContain("running WITHOUT a sandbox, by your explicit decision");
    expect(back.code).toBe(0);
  });

  it("starts on demand from bin/vak (this command in-process), serves the next, and exits when idle", async () => {
    const rt = resident.runtimeDir();
    const ws = workspace();
    const env = baseEnv({ XDG_RUNTIME_DIR: rt, VAK_HOST_IDLE_SECONDS: "3" });
    const first = spawnSync(join(ROOT, "bin/vak"), ["exec", "--", "/bin/sh", "-c", "echo first"], { cwd: ws, env, encoding: "utf8", input: "" });
    expect(first.stdout).toBe("first\n");
    expect(first.status).toBe(0);
    const pidFile = join(rt, "vak", "host.pid");
    await until("the host started by the client", () => existsSync(pidFile));
    const pid = hostPid(pidFile);
    hosts.push({ child: undefined as unknown as ChildProcess, rt, sock: "", pid });
    const second = spawnSync(CLIENT, ["exec", "--", "/bin/sh", "-c", "echo second"], { cwd: ws, env: { ...env, VAK_RESIDENT: "only" }, encoding: "utf8", input: "" });
    expect(second.stdout).toBe("second\n");
    expect(second.status).toBe(0);
    expect(statMode(join(rt, "vak"))).toBe(0o700);
    await until("the idle host to exit", () => !existsSync(`/proc/${pid}`), 20000);
    expect(existsSync(join(rt, "vak", "host.sock"))).toBe(false);
  });
});

function statMode(p: string): number {
  return Number(execFileSync("stat", ["-c", "%a", p], { encoding: "utf8" }).trim()) && parseInt(execFileSync("stat", ["-c", "%a", p], { encoding: "utf8" }).trim(), 8);
}

describe("attacks on the resident host", () => {
  it("another uid (nobody) cannot reach the socket: the host's directory is 0700", async () => {
    const h = await startHost();
    const ws = workspace();
    chmodSync(ws, 0o777);
    chmodSync(base, 0o755);
    // Everything above the host's own directory open, as a state directory's parents often are.
    chmodSync(h.rt, 0o755);
    try {
      const r = await client(h, ["exec", "--", "/bin/sh", "-c", "touch nobody-was-here"], { cwd: ws, wrapper: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] }).done;
      expect(r.stderr).toContain("Permission denied");
      expect(r.code).toBe(125);
      expect(existsSync(join(ws, "nobody-was-here"))).toBe(false);
    } finally {
      chmodSync(base, 0o700);
    }
  });

  it("another uid that reaches the socket anyway (the directory opened up) is refused by its peer credentials, and that is recorded", async () => {
    const h = await startHost();
    const ws = workspace();
    chmodSync(ws, 0o777);
    chmodSync(base, 0o755);
    chmodSync(h.rt, 0o755);
    chmodSync(join(h.rt, "vak"), 0o755);
    chmodSync(h.sock, 0o777);
    try {
      const r = await client(h, ["exec", "--", "/bin/sh", "-c", "touch nobody-was-here"], { cwd: ws, wrapper: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] }).done;
      expect(r.stderr).toContain(`the resident host refused: this host serves uid ${process.getuid!()} only`);
      expect(r.code).toBe(125);
      expect(existsSync(join(ws, "nobody-was-here"))).toBe(false);
      await until("the refusal in the journal", () => journaled("refused a connection from uid 65534").length > 0, 10000);
      const text = JSON.stringify(exported(journaled("refused a connection from uid 65534")[0]!.id));
      expect(text).toContain('"allowed":false');
      expect(text).toContain("is not this host's uid");
    } finally {
      chmodSync(base, 0o700);
    }
  });

  it("a sandboxed command cannot reach the host's socket to ask for a wider run, even with a read grant of the runtime directory", async () => {
    const h = await startHost();
    const ws = workspace();
    // Vak's runtime directory is masked (at most an empty directory shows): neither the socket nor its pid file is there.
    const script = `for p in ${h.sock} ${h.rt}/vak/host.pid; do if test -e $p; then echo visible $p; else echo hidden; fi; done; ls -A ${h.rt}/vak 2>/dev/null | grep -c host; ${CLIENT} exec -- /bin/true; echo inner $?`;
    for (const flags of [[], ["--allow-read", h.rt], ["--allow-write", h.rt]]) {
      const r = await client(h, ["exec", ...flags, "--", "/bin/sh", "-c", script], { cwd: ws }).done;
      if (r.code === 125) {
        // A grant that names Vak's own directories is refused outright: nothing ran.
        expect(r.stderr).toMatch(/vak/i);
        continue;
      }
      expect(r.stdout).not.toContain("visible");
      expect(r.stdout).toContain("hidden\nhidden\n0\n");
      // A client inside (if it can run there at all) finds no host, and VAK_RESIDENT=only runs nothing in-process.
      expect(r.stdout).toMatch(/inner (125|126|127)\n/);
    }
  });

  const confinements: [string, string[], string][] = [
    ["a mount namespace of its own", ["unshare", "-m", "--propagation", "private"], "a mnt namespace other than the host's"],
    ["a network namespace of its own", ["unshare", "-n"], "a net namespace other than the host's"],
    ["a pid namespace of its own", ["unshare", "-p", "-f"], "a pid namespace other than the host's"],
    ["a user namespace of its own", ["unshare", "-U", "-r"], "a user namespace other than the host's"],
    ["no_new_privs (as Landlock and seccomp sandboxes set)", ["setpriv", "--no-new-privs"], "no_new_privs"],
  ];
  it.each(confinements)("a client inside a sandbox of its own (%s) is not served: through the host its command would run outside it", async (_what, wrapper, why) => {
    const h = hosts[0] ?? (await startHost());
    const ws = workspace();
    const r = await client(h, ["exec", "--", "/bin/sh", "-c", "touch ran"], { cwd: ws, wrapper }).done;
    expect(r.stderr).toContain(`no resident host served this (fallback the client`);
    expect(r.stderr).toContain(why);
    expect(r.code).toBe(125);
    expect(existsSync(join(ws, "ran"))).toBe(false);
  });

  /**
   * A cgroup of the test's own beside this process's, in the hierarchy that holds the controller (v1's
   * /sys/fs/cgroup/CONTROLLER, or v2's), with `file` set to `value`; undefined where it cannot be made.
   */
  function cgroupWith(controller: string, file: string | undefined, value: string, name = ""): string | undefined {
    const lines = readFileSync("/proc/self/cgroup", "utf8").trim().split("\n");
    const v1 = lines.find((l) => l.split(":")[1]!.split(",").includes(controller));
    const v2 = lines.find((l) => l.startsWith("0::"));
    const parent = v1 ? `/sys/fs/cgroup/${controller}${v1.split(":")[2]}` : v2 ? `/sys/fs/cgroup${v2.slice(3)}` : undefined;
    if (!parent || !existsSync(parent)) return undefined;
    const dir = join(parent, `vak-test-${process.pid}-${++n}${name}`);
    try {
      mkdirSync(dir);
    } catch {
      return undefined;
    }
    try {
      if (file) writeFileSync(join(dir, file), value);
      return dir;
    } catch {
      // This hierarchy has no such file (v1 against v2): not this machine's kind.
      rmdirSync(dir);
      return undefined;
    }
  }
  const limited: [string, string, string, string][] = [
    ["a memory limit (v1)", "memory", "memory.limit_in_bytes", "536870912"],
    ["a memory limit (v2)", "memory", "memory.max", "536870912"],
    ["a pids limit", "pids", "pids.max", "200"],
    ["a CPU quota (v1)", "cpu", "cpu.cfs_quota_us", "50000"],
  ];
  const made = limited.map(([, controller, file, value]) => [controller, file, cgroupWith(controller, file, value)] as const);
  it.each(limited.map((l, i) => [...l, made[i]![2]] as const).filter((l) => l[4] !== undefined))(
    "a client in a cgroup of its own with %s is not served: through the host its command would leave the limit behind",
    async (_what, _controller, file, _value, dir) => {
      const h = hosts[0] ?? (await startHost());
      const ws = workspace();
      const r = await client(h, ["exec", "--", "/bin/sh", "-c", "touch ran"], { cwd: ws, wrapper: ["/bin/sh", "-c", `echo $$ > ${dir}/cgroup.procs && exec "$@"`, "sh"] }).done;
      expect(r.stderr).toContain(`no resident host served this (fallback the client`);
      expect(r.stderr).toContain(`sets ${file}`);
      expect(r.code).toBe(125);
      expect(existsSync(join(ws, "ran"))).toBe(false);
    },
  );
  it("at least one limited cgroup could be made here (else the tests above did not run)", () => {
    expect(made.filter((m) => m[2] !== undefined).map((m) => m[1]).length, "no cgroup with a limit could be made on this machine").toBeGreaterThan(0);
  });
  it("the reason a client is not served reaches its terminal neutralised: a cgroup named with an OSC 52 escape (the kernel refuses a newline in a name)", async () => {
    const dir = cgroupWith("pids", "pids.max", "200", "-\u001b]52;c;cHduZWQ=\u0007");
    expect(dir, "no cgroup with a limit could be made on this machine").toBeDefined();
    try {
      const h = hosts[0] ?? (await startHost());
      const ws = workspace();
      const r = await client(h, ["exec", "--", "/bin/true"], { cwd: ws, wrapper: ["/bin/sh", "-c", `echo $$ > "$0"/cgroup.procs && exec "$@"`, dir!] }).done;
      expect(r.code).toBe(125);
      expect(r.stderr).toContain("sets pids.max");
      expect(r.stderr).not.toContain("\u001b");
      expect(r.stderr).toContain("\\u{1b}]52");
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
    } finally {
      rmdirSync(dir!);
    }
  });

  it("a client in a cgroup of its own that sets no limit (another terminal's scope) is served", async () => {
    const dir = cgroupWith("memory", undefined, "") ?? cgroupWith("pids", undefined, "");
    expect(dir, "no cgroup could be made on this machine").toBeDefined();
    const h = hosts[0] ?? (await startHost());
    const ws = workspace();
    const r = await client(h, ["exec", "--", "/bin/sh", "-c", "touch ran"], { cwd: ws, wrapper: ["/bin/sh", "-c", `echo $$ > ${dir}/cgroup.procs && exec "$@"`, "sh"] }).done;
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(existsSync(join(ws, "ran"))).toBe(true);
    rmdirSync(dir!);
  });
  afterAll(() => {
    for (const [, , dir] of made) if (dir) rmdirSync(dir);
  });

  const lies: [string, string][] = [
    ["argc", "request-argv"], // more arguments declared than sent
    ["envc", "request-argv"], // fewer environment entries declared than sent
    ["size-huge", "request-too-large"],
    ["size-long", "request-short"], // declares more bytes than it sends, then hangs up
    ["size-short", "request-argv"], // declares fewer: the body is cut mid-string
    ["magic", "request-version"],
    ["fds3", "request-fds"],
    ["fds6", "request-fds"],
    ["no-fds", "request-fds"],
    ["cwd", "request-cwd"], // names /etc, sends its real directory
    ["cwd-file", "request-cwd"], // the cwd descriptor is a file
  ];
  it.each(lies)("a client lying about its request (%s) gets a clear refusal (%s) and nothing runs", async (lie, code) => {
    const h = hosts[0] ?? (await startHost());
    const ws = workspace();
    const m = join(ws, `ran-${lie}`);
    const r = spawnSync(liar, [h.sock, lie, m], { cwd: ws, env: baseEnv({ XDG_RUNTIME_DIR: h.rt }), encoding: "utf8", input: "", timeout: 10000 });
    expect(r.stdout).toMatch(/^refused /);
    expect(r.stdout).toContain(`(${code})`);
    await sleep(100);
    expect(existsSync(m)).toBe(false);
  });

  it("the same request told the truth runs (the liar's baseline)", async () => {
    const h = hosts[0] ?? (await startHost());
    const ws = workspace();
    const m = join(ws, "ran-none");
    const r = spawnSync(liar, [h.sock, "none", m], { cwd: ws, env: baseEnv({ XDG_RUNTIME_DIR: h.rt }), encoding: "utf8", input: "", timeout: 10000 });
    expect(r.stdout.trim()).toBe("exit 0");
    expect(existsSync(m)).toBe(true);
  });

  it("a killed client (kill -9) leaves nothing running", async () => {
    const h = await startHost();
    const ws = workspace();
    const tag = marker();
    const c = client(h, ["exec", "--", "/bin/sleep", tag], { cwd: ws });
    await until("the command to run", () => running(tag).length > 0);
    c.child.kill("SIGKILL");
    await c.done;
    await until("the sandbox to be gone", () => running(tag).length === 0, 5000);
    expect(running(tag)).toEqual([]);
    // The host lives on and serves the next client.
    expect((await client(h, ["exec", "--", "/bin/true"], { cwd: ws }).done).code).toBe(0);
  });

  it("a stop signal to the client stops the command (forwarded, as vak exec does in-process)", async () => {
    const h = await startHost();
    const ws = workspace();
    const tag = marker();
    const c = client(h, ["exec", "--", "/bin/sleep", tag], { cwd: ws });
    await until("the command to run", () => running(tag).length > 0);
    c.child.kill("SIGTERM");
    const r = await c.done;
    // With its stderr: this failed once under load with 125, and the line would have said why.
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 143, stderr: expect.any(String) });
    expect(running(tag)).toEqual([]);
  });

  it("the host's death (kill -9) mid-command kills the sandbox, the client exits 125, and the journal keeps every event (0 lost)", async () => {
    const h = await startHost();
    const ws = workspace();
    const tag = marker();
    const c = client(h, ["exec", "--", "/bin/sleep", tag], { cwd: ws });
    await until("the command to run", () => running(tag).length > 0);
    // The run's start was committed to the journal before the command started: it is there while it runs.
    const [session] = journaled(tag);
    expect(session).toBeDefined();
    const written = exported(session!.id);
    expect(written.map((e) => e.kind)).toEqual(["session.started", "policy.generation", "worker.spawned"]);
    const reaped = new Promise((r) => h.child.once("exit", r));
    process.kill(h.pid, "SIGKILL");
    const r = await c.done;
    await reaped;
    expect(r.code).toBe(125);
    expect(r.stderr).toContain("the resident host went away while the command ran; the sandbox was stopped with it");
    await until("the sandbox to be gone", () => running(tag).length === 0, 5000);
    expect(spooled(tag)).toEqual([]);
    const after = exported(session!.id);
    expect(after.map((e) => [e.kind, e.payload])).toEqual(written.map((e) => [e.kind, e.payload]));
    // The next host to start ends the run it could not, as interrupted; what was written stays as it was.
    await startHost();
    await until("the next host to close the run", () => journaled(tag)[0]?.ended != null, 15000);
    const closed = exported(session!.id);
    expect(closed.slice(0, written.length).map((e) => [e.kind, e.payload])).toEqual(written.map((e) => [e.kind, e.payload]));
    expect(closed.slice(written.length).map((e) => [e.kind, e.payload.outcome])).toEqual([["session.ended", "interrupted: the resident host stopped before the run ended"]]);
    expect(spawnSync(process.execPath, [VAK_BIN, "journal", "verify"], { env: baseEnv() }).status).toBe(0);
  });

  it("across host restarts and kill -9 at random points of many concurrent runs, every acknowledged event is in the journal (0 lost) and it verifies", async () => {
    const ws = workspace();
    // What a client was told, and when: a command that ran had its start durable first; an "exit" came after its end was.
    const ran: { tag: string; code: number | null }[] = [];
    for (let round = 0; round < 3; round++) {
      const h = await startHost();
      const runs = Array.from({ length: 6 }, (_, i) => {
        const tag = marker();
        // Some end at once, some run until the host dies.
        const c = client(h, ["exec", "--", "/bin/sh", "-c", `echo ${tag} > /dev/null; ${i % 2 ? "sleep 30" : "true"}`], { cwd: ws });
        return { tag, c };
      });
      // The first round kills only once a quick run has been served (on a loaded machine none may be in 300 ms).
      if (round === 0) await Promise.race(runs.filter((_, i) => i % 2 === 0).map((r) => r.c.done));
      await sleep(300 + Math.floor(Math.random() * 700));
      const reaped = new Promise((r) => h.child.once("exit", r));
      if (round < 2) process.kill(h.pid, "SIGKILL");
      else process.kill(h.pid, "SIGTERM"); // the last one stopped as `kill` does: it dies with its runs too
      await reaped;
      for (const { tag, c } of runs) ran.push({ tag, code: (await c.done).code });
    }
    // A host started after them ends the runs the dead ones could not, as interrupted.
    await startHost();
    const ours = () => journaled("echo ").filter((x) => ran.some((r) => x.title.includes(r.tag)));
    await until("every run to be ended", () => ours().every((x) => x.ended !== null), 20000);
    const sessions = new Map(ours().map((x) => [x.title, x]));
    let served = 0;
    for (const { tag, code } of ran) {
      const s = [...sessions.values()].find((x) => x.title.includes(tag));
      if (code === 125 && !s) continue; // never started: the client was told the host went away, and nothing ran
      expect(s, `the run ${tag} (exit ${code})`).toBeDefined();
      const kinds = exported(s!.id).map((e) => e.kind);
      expect(kinds.slice(0, 3)).toEqual(["session.started", "policy.generation", "worker.spawned"]);
      if (code === 0) {
        // The client heard "exit 0" only once the run's end was committed.
        expect(kinds).toEqual(["session.started", "policy.generation", "worker.spawned", "worker.exited", "session.ended"]);
        served += 1;
      } else expect(s!.outcome).toMatch(/^(interrupted: the resident host stopped before the run ended|exit \d+)$/);
    }
    expect(served).toBeGreaterThan(0);
    expect(spawnSync(process.execPath, [VAK_BIN, "journal", "verify"], { env: baseEnv() }).status).toBe(0);
  }, 60000);

  it("fail closed: a journal that cannot take a run's start (its disk full) runs nothing, says so, and the host stops serving", () => {
    // A state directory on a 2 MiB tmpfs of a mount namespace of its own; the host and its clients share it.
    const state = join(base, `full${++n}`);
    const rt = resident.runtimeDir();
    const ws = workspace();
    mkdirSync(state);
    const script = [
      `mount -t tmpfs -o size=2m tmpfs ${state}`,
      `${process.execPath} ${VAK_BIN} host --idle-seconds 60 & hp=$!`,
      `until [ -e ${rt}/vak/host.pid ]; do sleep 0.05; done`,
      `${CLIENT} exec -- /bin/sh -c 'touch before'; echo before=$?`,
      `head -c 4m /dev/zero > ${state}/fill 2>/dev/null; true`,
      `${CLIENT} exec -- /bin/sh -c 'touch after'; echo after=$?`,
      `sleep 0.5; if [ -e ${rt}/vak/host.sock ]; then echo socket=kept; else echo socket=gone; fi`,
      `kill $hp; wait $hp; echo host-exited`,
    ].join("\n");
    const r = spawnSync("unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", script], {
      cwd: ws, env: baseEnv({ XDG_STATE_HOME: state, XDG_RUNTIME_DIR: rt, VAK_RESIDENT: "only" }), encoding: "utf8", timeout: 60000,
    });
    expect(r.stdout).toContain("before=0");
    expect(existsSync(join(ws, "before"))).toBe(true);
    expect(r.stdout).toContain("after=125");
    expect(r.stderr).toMatch(/journal .*could not take this run's record.*nothing runs unrecorded/);
    expect(existsSync(join(ws, "after"))).toBe(false);
    expect(r.stdout).toContain("socket=gone");
    expect(r.stdout).toContain("host-exited");
  }, 60000);

  it("two clients cannot see or stop each other's sessions", async () => {
    const h = await startHost();
    const ws = workspace();
    const tagA = marker();
    const tagA2 = marker();
    const tagB = marker();
    const a = client(h, ["exec", "--", "/bin/sh", "-c", `sleep 2; /bin/sleep ${tagA} & wait; echo A-done`], { cwd: ws, input: "" });
    const a2 = client(h, ["exec", "--", "/bin/sh", "-c", `/bin/sleep ${tagA2} & sleep 3; echo A2-done`], { cwd: ws });
    const b = client(h, ["exec", "--", "/bin/sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; exec /bin/sleep ${tagB}`], { cwd: ws });
    await until("both commands to run", () => running(tagB).length > 0 && running(tagA2).length > 0);
    // B's sandbox sees its own processes only, never A's.
    b.child.kill("SIGKILL");
    const rb = await b.done;
    expect(rb.stdout).toContain(`/bin/sleep ${tagB}`);
    expect(rb.stdout).not.toContain(tagA);
    expect(rb.stdout).not.toContain(tagA2);
    // Killing B's client stopped B's sandbox and nothing of A's.
    await until("B's sandbox to be gone", () => running(tagB).length === 0, 5000);
    expect(running(tagA2).length).toBeGreaterThan(0);
    const ra2 = await a2.done;
    expect(ra2.stdout).toBe("A2-done\n");
    expect(ra2.code).toBe(0);
    a.child.kill("SIGKILL");
    await a.done;
  }, 30000);
});
