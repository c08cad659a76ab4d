import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decide } from "../../src/policy/plan.js";
import { containerArgs } from "../../src/sandbox/container-args.js";
import { imageRecordPath, loadContainerImage } from "../../src/sandbox/container.js";
import { hostFacts } from "../../src/sandbox/host.js";
import { launcherArgs } from "../../src/sandbox/launcher-args.js";
import { testBroker } from "../support/broker.js";
import { processesWith, scratch, type Scratch } from "../support/fs.js";
import { testCa } from "../support/tls.js";
import { baseEnv, runVak, sandboxSh, spawnVak } from "../support/vak.js";

// The container backend's own boundary (run by the "container" project only, as an unprivileged user,
// with the engine .ci/run starts). The sandbox inside is the launcher's, tried by every other attack file
// of that project; these try the wall around it and the ways the backend could fail open.

const engine = () => loadContainerImage();
/** Containers of this backend still running (they carry the label dev.vak.sandbox). */
const running = () => execFileSync(engine().engineBin, ["ps", "-q", "--filter", "label=dev.vak.sandbox"], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
const until = async (cond: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (Date.now() < end && !cond()) await new Promise((r) => setTimeout(r, 100));
  return cond();
};

describe("the container around the sandbox", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  /** Runs a probe in the container vak would start for a plan, in place of the launcher: the wall alone. */
  function wallOnly(script: string): string {
    const img = engine();
    const plan = decide({ mode: "read-only", sandbox: "container", workspace: s.ws, command: ["/bin/true"], grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: {} }, hostFacts());
    const dir = mkdtempSync(join(tmpdir(), "vak-wall-"));
    const a = containerArgs(plan, img, { hostDir: dir, uid: process.getuid!(), gid: process.getgid!(), stdin: false, cpus: 1, memory: 1 << 30, runId: "wall" }, launcherArgs(plan, { hostDir: dir }));
    const argv = [...a.slice(0, a.indexOf(img.image) + 1), "/bin/sh", "-c", script];
    return execFileSync(img.engineBin, argv, { encoding: "utf8", env: { ...process.env } });
  }

  it("without the launcher, the container alone: no capability, no_new_privs, a seccomp filter, not root", () => {
    const out = wallOnly("grep -E '^(Uid|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status");
    expect(out).toMatch(/^Uid:\s+(\d+)/m);
    expect(Number(/^Uid:\s+(\d+)/m.exec(out)![1])).not.toBe(0);
    for (const c of ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]) expect(out).toMatch(new RegExp(`^${c}:\\s+0000000000000000$`, "m"));
    expect(out).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(out).toMatch(/^Seccomp:\s+2$/m);
  });

  it("without the launcher: no network interface but loopback, a read-only root", () => {
    const out = wallOnly("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; touch /planted 2>&1 || echo refused; ls /planted 2>&1 | head -1");
    expect(out.split("\n")[0]).toBe("lo");
    expect(out).toMatch(/Read-only file system/);
    expect(out).toContain("refused");
  });

  it("without the launcher, the engine's profile refuses ptrace, bpf, keyrings, perf and io_uring itself", () => {
    const out = wallOnly(`python3 -c "
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in (('ptrace', 101), ('bpf', 321), ('keyctl', 250), ('perf_event_open', 298), ('setns', 308), ('io_uring_setup', 425), ('init_module', 175)):
    r = libc.syscall(nr, 0, 0, 0, 0, 0)
    print(name, r, ctypes.get_errno())
"`);
    expect(out.trim().split("\n")).toEqual(["ptrace -1 1", "bpf -1 1", "keyctl -1 1", "perf_event_open -1 1", "setns -1 1", "io_uring_setup -1 38", "init_module -1 1"]);
  });

  it("kill -9 of vak leaves no container and no process of the sandbox behind", async () => {
    const marker = `${Math.floor(Math.random() * 1e6) + 1000}.${process.pid % 1000}`;
    const child = spawnVak(["exec", "--", "/bin/sh", "-c", `echo started; sleep ${marker}`], { cwd: s.ws });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    expect(await until(() => out.includes("started") && processesWith(`sleep ${marker}`).length > 0, 30_000)).toBe(true);
    const top = (id: string) => spawnSync(engine().engineBin, ["top", id], { encoding: "utf8" }).stdout;
    const ours = running().find((id) => top(id).includes(marker));
    expect(ours).toBeDefined();
    child.kill("SIGKILL");
    expect(await until(() => processesWith(marker).length === 0, 10_000)).toBe(true);
    // The engine removes the container once its init has gone.
    expect(await until(() => !running().includes(ours!), 15_000)).toBe(true);
  });

  it("a secret is in the command's environment only: not on any command line, not in the engine's container config, and nothing of the engine's is added", async () => {
    const secret = `s3cr3t-${process.pid}-${Date.now()}`;
    const child = spawnVak(["exec", "--secret", "TOKEN=env:VAK_TEST_TOKEN", "--", "/bin/sh", "-c", "env; echo started; sleep 20"], { cwd: s.ws, env: baseEnv({ VAK_TEST_TOKEN: secret }) });
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise((r) => child.on("close", r));
    expect(await until(() => out.includes("started"), 30_000)).toBe(true);
    const cmdlines = readdirSync("/proc").filter((p) => /^\d+$/.test(p)).map((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, "utf8");
      } catch {
        return "";
      }
    });
    expect(cmdlines.some((c) => c.includes(secret))).toBe(false);
    const ids = running();
    const configs = spawnSync(engine().engineBin, ["inspect", ...ids], { encoding: "utf8" }).stdout;
    expect(configs.length).toBeGreaterThan(0);
    expect(configs).not.toContain(secret);
    child.kill("SIGTERM");
    await exited;
    expect(out).toContain(`TOKEN=${secret}`);
    expect(out).not.toMatch(/^(HOSTNAME|container)=/m);
  });

  it("TLS at the gate: the run's trust bundle is bound into the container, and the command cannot change it", async () => {
    // The bundle lives in a directory of vak's on the host (tls-run.ts); inside the container it must be there,
    // at the same path, read-only: a client that finds no bundle fails, and one that can write it trusts anyone.
    const ca = await testCa("Vak container test CA");
    const body = ca.certPem.trim().split("\n").slice(1, -1).join("\n");
    const r = await runVak(["exec", "--allow-net", "granted.test", "--ca-file", ca.file, "--", "/bin/sh", "-c",
      'echo "file=$SSL_CERT_FILE"; cat "$SSL_CERT_FILE"; (echo forged >> "$SSL_CERT_FILE") 2>/dev/null && echo WROTE; exit 0'], { cwd: s.ws });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^file=\/.+\/ca-bundle\.pem$/m);
    expect(r.stdout).toContain(body);
    expect(r.stdout).not.toContain("WROTE");
  });

  it("a broker's workers run on the container backend too", async () => {
    writeFileSync(join(s.ws, "a.txt"), "hello\n");
    const t = await testBroker(s.ws, { sandbox: "container" });
    try {
      expect(await t.broker.run({ kind: "read", path: "a.txt" })).toMatchObject({ ok: true, output: expect.stringContaining("hello") });
      expect(await t.broker.run({ kind: "read", path: "/etc/shadow" })).toMatchObject({ ok: false });
      expect((await t.events()).some((e) => e.kind === "worker.spawned" && (e.payload as { sandbox: string }).sandbox === "container")).toBe(true);
    } finally {
      await t.close();
    }
  });
});

describe("the container backend fails closed", () => {
  let s: Scratch;
  beforeEach(() => {
    s = scratch();
  });
  afterEach(() => s.cleanup());

  /** A cache directory with a copy of the image record, changed. */
  function record(change: (r: Record<string, unknown>) => void): string {
    const cache = mkdtempSync(join(tmpdir(), "vak-test-cache-"));
    const r = JSON.parse(readFileSync(imageRecordPath(), "utf8")) as Record<string, unknown>;
    change(r);
    mkdirSync(join(cache, "vak", "container"), { recursive: true });
    writeFileSync(join(cache, "vak", "container", "image.json"), JSON.stringify(r), { mode: 0o644 });
    return cache;
  }

  it("an engine that is not running: refused, with how to start it, and nothing runs", async () => {
    // Docker's client reads DOCKER_HOST, Podman's CONTAINER_HOST.
    const r = await sandboxSh(s.ws, "echo ran > ran", [], { env: baseEnv({ DOCKER_HOST: "unix:///nonexistent/docker.sock", CONTAINER_HOST: "unix:///nonexistent/podman.sock" }) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/the container engine \((docker|podman)\) did not run the sandbox.*start it/);
    expect(r.stdout).not.toContain("ran");
  });

  it("no image built: refused, with how to build one", async () => {
    const r = await sandboxSh(s.ws, "true", [], { env: baseEnv({ XDG_CACHE_HOME: mkdtempSync(join(tmpdir(), "vak-test-cache-")) }) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/no sandbox image has been built.*vak container build-image/);
  });

  it("an image of another build of the launcher: refused (its argv could mean something else inside)", async () => {
    const r = await sandboxSh(s.ws, "true", [], { env: baseEnv({ XDG_CACHE_HOME: record((x) => (x.launcherSha256 = "0".repeat(64))) }) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/holds another build of Vak's launcher/);
  });

  it("an image the engine no longer has: refused, and no registry is asked for it", async () => {
    const r = await sandboxSh(s.ws, "echo ran", [], { env: baseEnv({ XDG_CACHE_HOME: record((x) => (x.image = "vak-sandbox:0000000000000000")) }) });
    expect(r.code).toBe(125);
    expect(r.stdout).not.toContain("ran");
    expect(r.stderr).toMatch(/No such image|not found|does not exist|image not known/i);
    expect(r.stderr).not.toMatch(/pull(ing)? (access|from)/i);
  });

  it("a missing engine binary: refused, with how to install one", async () => {
    const r = await sandboxSh(s.ws, "true", [], { env: baseEnv({ XDG_CACHE_HOME: record((x) => (x.engineBin = "/nonexistent/docker")) }) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/container engine (docker|podman) is missing.*apt-get install docker\.io/);
  });

  it("a record anyone may write is not trusted", async () => {
    const cache = record(() => {});
    execFileSync("chmod", ["666", join(cache, "vak", "container", "image.json")]);
    const r = await runVak(["exec", "--", "/bin/true"], { cwd: s.ws, env: baseEnv({ XDG_CACHE_HOME: cache }) });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/only its owner can write/);
  });
});
