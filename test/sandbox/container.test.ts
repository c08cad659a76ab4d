import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { VakError } from "../../src/policy/errors.js";
import { decide, type HostFacts } from "../../src/policy/plan.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import { containerArgs, containerBinds, type ContainerImage, type ContainerRun } from "../../src/sandbox/container-args.js";
import { dependencyClosure, parseInstalled, withAncestors } from "../../src/sandbox/container-files.js";
import { containerProfile, LAUNCHER_CALLS, syscallNames, type SeccompTable } from "../../src/sandbox/container-seccomp.js";
import { launcherArgs } from "../../src/sandbox/launcher-args.js";
import { scratch } from "../support/fs.js";
import { LAUNCHER } from "../support/paths.js";
import { runVak } from "../support/vak.js";

// The container backend's decisions, as pure functions: the engine's command line, which host paths it
// binds, its seccomp profile made from the launcher's table, and the image's package set. The backend
// running for real is test/attacks/container.test.ts and every attack file of the "container" project.

const image: ContainerImage = {
  engine: "docker", engineBin: "/usr/bin/docker", image: "vak-sandbox:0123456789abcdef", launcher: LAUNCHER,
  launcherSha256: "00", profiles: { none: "/state/seccomp-none.json", net: "/state/seccomp-net.json" },
};
const run: ContainerRun = { hostDir: "/state/run/container-x", uid: 1000, gid: 1000, stdin: true, cpus: 1, memory: 2 ** 30, runId: "r" };

function plan(extra: { net?: string[]; maxProcs?: number; maxMemory?: number; write?: string[] } = {}) {
  const s = scratch();
  const host: HostFacts = { home: "/nonexistent-home", uid: 1000, gid: 1000, user: "u", shell: "/bin/sh", env: { PATH: "/usr/bin:/bin" }, stateDirs: ["/nonexistent-state/vak"], nodePrefix: "/usr" };
  const p = decide({
    mode: "workspace-write", sandbox: "container", workspace: s.ws, command: ["/bin/true"],
    grants: { read: [s.outside], write: extra.write ?? [], denyRead: [], denyWrite: [], noLinks: [], env: [] },
    limits: { ...(extra.maxProcs ? { maxProcs: extra.maxProcs } : {}), ...(extra.maxMemory ? { maxMemoryBytes: extra.maxMemory } : {}) },
    net: extra.net ? parseNetGrants(extra.net, []) : undefined,
  }, host);
  return { p, s };
}

const flag = (a: string[], f: string) => a[a.indexOf(f) + 1];

describe("the container backend's engine command line", () => {
  it("holds every wall: no network, read-only root, no capability, no_new_privs, the table's profile, the caller's uid, ceilings", () => {
    const { p, s } = plan();
    const a = containerArgs(p, image, run, launcherArgs(p, { hostDir: run.hostDir }));
    expect(flag(a, "--network")).toBe("none");
    expect(a).toContain("--read-only");
    expect(flag(a, "--cap-drop")).toBe("ALL");
    expect(a).toContain("no-new-privileges");
    expect(a).toContain("seccomp=/state/seccomp-none.json");
    expect(flag(a, "--user")).toBe("1000:1000");
    expect(flag(a, "--pids-limit")).toBe(String(1024 + 8));
    expect(Number(flag(a, "--memory"))).toBe(2 ** 30 + (64 << 20));
    expect(flag(a, "--memory-swap")).toBe(flag(a, "--memory"));
    expect(flag(a, "--cpus")).toBe("1");
    expect(flag(a, "--pull")).toBe("never"); // no registry, ever
    expect(a).not.toContain("--privileged");
    expect(a.join(" ")).not.toMatch(/--network[= ](host|bridge)|--cap-add|--net=|--ipc|--pid=/);
    // The same launcher with the same plan, behind the image.
    const i = a.indexOf(image.image);
    expect(a.slice(i + 1, i + 3)).toEqual([LAUNCHER, "--host-dir"]);
    expect(a.slice(i + 2)).toEqual(launcherArgs(p, { hostDir: run.hostDir }));
    s.cleanup();
  });

  it("a network grant still has no network: the gate's socket directory is bound, and the profile allows inet for the relay", () => {
    const { p, s } = plan({ net: ["api.example.com"] });
    const a = containerArgs(p, image, { ...run, gateDir: "/state/run/gate-1" }, launcherArgs(p, { hostDir: run.hostDir }, { dir: "/state/run/gate-1", token: "x".repeat(32) }));
    expect(flag(a, "--network")).toBe("none");
    expect(a).toContain("seccomp=/state/seccomp-net.json");
    expect(a).toContain("type=bind,source=/state/run/gate-1,target=/state/run/gate-1,readonly");
    // The token travels through the host directory, never argv.
    expect(a.join(" ")).not.toContain("x".repeat(32));
    expect(a).not.toContain("--net-token-fd");
    s.cleanup();
  });

  it("binds the plan's grants at their own paths, writable only where the plan writes, and never the runtime set", () => {
    const { p, s } = plan();
    const binds = containerBinds(p, run);
    expect(binds).toContainEqual({ path: s.ws, readonly: false });
    expect(binds).toContainEqual({ path: s.outside, readonly: true });
    expect(binds).toContainEqual({ path: run.hostDir, readonly: false });
    expect(binds.map((b) => b.path)).not.toContain("/usr");
    expect(binds.some((b) => b.path.startsWith("/etc"))).toBe(false);
    s.cleanup();
  });

  it("ceilings follow the plan's limits", () => {
    const { p, s } = plan({ maxProcs: 20, maxMemory: 100 << 20 });
    const a = containerArgs(p, image, run, []);
    expect(flag(a, "--pids-limit")).toBe("28");
    expect(Number(flag(a, "--memory"))).toBe((100 << 20) + (64 << 20));
    s.cleanup();
  });

  it("refuses root, and a path the engine's --mount would split", () => {
    const { p, s } = plan();
    expect(() => containerArgs(p, image, { ...run, uid: 0 }, [])).toThrow(/running as root/);
    expect(() => containerArgs({ ...p, mounts: [...p.mounts, { kind: "ro", path: "/tmp/a,source=/etc", why: "grant" }] }, image, run, [])).toThrow(VakError);
    s.cleanup();
  });

  it("podman gets its own spelling of the same walls", () => {
    const { p, s } = plan();
    const a = containerArgs(p, { ...image, engine: "podman" }, run, []);
    expect(a).toContain("unmask=ALL");
    expect(a).toContain("--read-only-tmpfs=false");
    s.cleanup();
  });
});

describe("the engine's seccomp profile, made from the launcher's table", () => {
  const table = JSON.parse(execFileSync(LAUNCHER, ["--seccomp-table"], { encoding: "utf8" })) as SeccompTable;
  const names = syscallNames(readFileSync("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "utf8"));
  const denied = (p: ReturnType<typeof containerProfile>) => new Map(p.syscalls.filter((r) => r.action === "SCMP_ACT_ERRNO").map((r) => [r.names[0]!, r.errnoRet]));
  const allowed = (p: ReturnType<typeof containerProfile>) => new Set(p.syscalls.filter((r) => r.action === "SCMP_ACT_ALLOW" && !r.args).flatMap((r) => r.names));

  it("refuses what the table refuses to every role, with the table's errno", () => {
    const d = denied(containerProfile(table, names, false));
    for (const n of ["ptrace", "bpf", "perf_event_open", "keyctl", "add_key", "kexec_load", "init_module", "setns", "chroot", "open_by_handle_at", "fsopen", "process_vm_writev"]) expect(d.get(n), n).toBe(1);
    for (const n of ["io_uring_setup", "io_uring_enter", "clone3"]) expect(d.get(n), n).toBe(38);
  });

  it("allows the launcher's own setup calls, and what only some role of the sandbox may call", () => {
    const a = allowed(containerProfile(table, names, false));
    for (const n of Object.keys(LAUNCHER_CALLS)) expect(a.has(n), n).toBe(true);
    for (const n of ["openat2", "process_vm_readv", "pidfd_getfd", "landlock_create_ruleset", "read", "execve"]) expect(a.has(n), n).toBe(true);
  });

  // Datagram sockets (inet and inet6) are the launcher table's since the sandbox's own resolver: inside its
  // private network namespace they have no route out (test/attacks/dns.test.ts), in a container even less.
  it("sockets: unix streams always, inet streams to the launcher's guard (which refuses them without a grant), datagram sockets for the resolver and the loopback setup", () => {
    const socket = (net: boolean) => containerProfile(table, names, net).syscalls.filter((r) => r.names[0] === "socket").map((r) => r.args!.map((x) => x.valueTwo).join("/"));
    // Inet streams without a grant pass out here too: the launcher's filter hands them to its guard, which
    // refuses them with a line naming the grant (test/attacks/network.test.ts, run in the container too).
    expect(socket(false).sort()).toEqual(["1/1", "1/5", "10/1", "10/2", "2/1", "2/2", "2/2"]);
    expect(socket(true).sort()).toEqual(["1/1", "1/5", "10/1", "10/1", "10/2", "2/1", "2/1", "2/2", "2/2"]);
    expect(allowed(containerProfile(table, names, true)).has("socket")).toBe(false);
  });

  it("only x86-64, and nothing numbered past what the table reviewed", () => {
    const p = containerProfile(table, names, true);
    expect(p.architectures).toEqual(["SCMP_ARCH_X86_64"]);
    expect(p.defaultAction).toBe("SCMP_ACT_ERRNO");
    expect(p.defaultErrnoRet).toBe(38);
    const all = new Set(p.syscalls.flatMap((r) => r.names));
    for (const [nr, n] of names) if (nr >= table.first_unknown) expect(all.has(n), n).toBe(false);
  });
});

describe("the image's packages", () => {
  const db = [
    "git\tii \tlibc6 (>= 2.34), libcurl3-gnutls | libcurl4, perl\t\tgit-core",
    "libc6\tii \tlibgcc-s1\t\t",
    "libgcc-s1\tii \t\t\t",
    "libcurl4\tii \tlibc6\t\t",
    "perl\tii \tperl-base (= 5.36)\tdpkg (>= 1.17)\tperl5",
    "perl-base\tii \t\t\t",
    "dpkg\tii \t\t\t",
    "python3\tii \tpython3-minimal\t\t",
    "python3-minimal\trc \t\t\t",
  ].join("\n");

  it("takes what the wanted packages depend on, the first installed alternative, and says what is missing", () => {
    const { packages, missing } = dependencyClosure(["git", "ripgrep", "perl5"], parseInstalled(db));
    expect(packages).toEqual(["dpkg", "git", "libc6", "libcurl4", "libgcc-s1", "perl", "perl-base"]);
    expect(missing).toEqual(["ripgrep"]);
  });

  it("a package removed but not purged (rc) is not installed", () => {
    expect(dependencyClosure(["python3"], parseInstalled(db)).packages).toEqual(["python3"]);
  });

  it("an archive made without recursion gets every ancestor directory", () => {
    expect(withAncestors(["/usr/bin/git", "/work/v/build/Release/vak-launcher"])).toEqual([
      "/usr", "/usr/bin", "/usr/bin/git", "/work", "/work/v", "/work/v/build", "/work/v/build/Release", "/work/v/build/Release/vak-launcher",
    ]);
  });
});

describe("the container backend refuses before anything runs", () => {
  it.skipIf(process.getuid?.() !== 0)("as root: the sandbox would need a capability the container does not hold", async () => {
    const s = scratch();
    const r = await runVak(["exec", "--sandbox", "container", "--json", "--", "/bin/true"], { cwd: s.ws });
    expect(r.code).toBe(125);
    expect(r.stderr).toMatch(/vak is running as root.*run vak as the user who owns the workspace/);
    s.cleanup();
  });
});
