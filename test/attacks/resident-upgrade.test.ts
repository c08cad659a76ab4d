import { execFileSync } from "node:child_process";
import { appendFileSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT, VAK_BIN } from "../support/paths.js";
import { client, copyInstallation, type Host, hostPid, residentHosts, until } from "../support/resident.js";
import { baseEnv } from "../support/vak.js";

/**
 * The resident host against an upgrade of Vak (src/resident/installed.ts): a
 * host keeps the code it loaded, so once the installation is another (npm
 * installed a new version, a build rewrote dist/, node-gyp relinked the
 * launcher) it must serve nothing more, or a security fix of the new version
 * would not apply to the commands it runs. Every host here runs from a copy of
 * this checkout's installation of its own, which the test then changes. Its
 * clients run with VAK_RESIDENT=only (served, or exit 125 saying why not)
 * unless a test says otherwise.
 */

const resident = residentHosts("vak-upgrade-");
const { base, hosts, workspace } = resident;
let n = 0;

afterAll(() => resident.stopAll());

interface Installed {
  dir: string;
  host: Host;
  clientPath: string;
}

/** A fresh copy of the installation, and a host started from it. */
async function hostOfCopy(env: Record<string, string> = {}): Promise<Installed> {
  const dir = copyInstallation(join(base, `vak${++n}`));
  const host = await resident.start({ bin: join(dir, "bin", "vak.cjs"), env });
  return { dir, host, clientPath: join(dir, "build", "Release", "vak-client") };
}

const run = (i: Installed, args: string[], ws: string, env: Record<string, string> = {}) => client(i.host, ["exec", ...args], { cwd: ws, clientPath: i.clientPath, env }).done;

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** The journal's sessions whose title holds s, with their events (this file's test state's journal). */
function journaled(s: string): { id: string; outcome: string | null; events: { kind: string; payload: Record<string, unknown> }[] }[] {
  const vak = (...args: string[]) => execFileSync(process.execPath, [VAK_BIN, "journal", ...args], { env: baseEnv(), encoding: "utf8" });
  const list = (JSON.parse(vak("list", "--json")) as { id: string; title: string; outcome: string | null }[]).filter((x) => x.title.includes(s));
  return list.map((x) => ({ id: x.id, outcome: x.outcome, events: vak("export", x.id).trim().split("\n").filter(Boolean).map((l) => JSON.parse(l) as { kind: string; payload: Record<string, unknown> }) }));
}

const startChunk = (dir: string) => join(dir, "dist", "bin", readdirSync(join(dir, "dist", "bin")).find((f) => /^start-.*\.cjs$/.test(f))!);

/** Written to a new file and renamed over the old one, as builds and npm write files. */
function replace(path: string, text: string | Buffer): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

describe("a resident host serves only with the installation's current code", () => {
  it("control: an unchanged installation is served, run after run, by the one host", async () => {
    const i = await hostOfCopy();
    const ws = workspace();
    const tag = `same-${process.pid}-${n}`;
    for (const k of [1, 2, 3]) {
      const r = await run(i, ["--", "/bin/echo", `${tag}-${k}`], ws);
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe(`${tag}-${k}\n`);
      expect(r.code).toBe(0);
    }
    expect(alive(i.host.pid)).toBe(true);
    expect(hostPid(join(i.host.rt, "vak", "host.pid"))).toBe(i.host.pid);
    // Each run was the host's: its record names it.
    for (const k of [1, 2, 3]) expect((journaled(`${tag}-${k}`)[0]!.events[0]!.payload.servedBy as { pid: number }).pid).toBe(i.host.pid);
  });

  // Each way a new version's files arrive: what changes, and what the host must notice.
  const changes: { what: string; change: (dir: string) => string }[] = [
    {
      what: "the CLI bundle rebuilt (dist/bin/start-HASH.cjs written anew)",
      change: (dir) => {
        const p = startChunk(dir);
        replace(p, `${readFileSync(p, "utf8")}\n;process.stderr.write("vak: the new build's code\\n");\n`);
        return p;
      },
    },
    {
      what: "the host's own bundle written over in place (dist/resident-host/host.cjs)",
      change: (dir) => {
        const p = join(dir, "dist", "resident-host", "host.cjs");
        appendFileSync(p, "\n// a new build\n");
        return p;
      },
    },
    {
      what: "npm run build:js (dist/ removed, and written again with the same files)",
      change: (dir) => {
        rmSync(join(dir, "dist"), { recursive: true });
        cpSync(join(ROOT, "dist"), join(dir, "dist"), { recursive: true, filter: (src) => src !== join(ROOT, "dist", "web") });
        return join(dir, "dist", "resident-host", "host.cjs");
      },
    },
    {
      what: "the launcher relinked (build/Release/vak-launcher, the same bytes under a new inode)",
      change: (dir) => {
        const p = join(dir, "build", "Release", "vak-launcher");
        copyFileSync(p, `${p}.new`);
        renameSync(`${p}.new`, p);
        return p;
      },
    },
    {
      what: "a new version installed (package.json written anew)",
      change: (dir) => {
        const p = join(dir, "package.json");
        replace(p, readFileSync(p, "utf8").replace(/"version": "[^"]*"/, '"version": "99.0.0"'));
        return p;
      },
    },
  ];

  it.each(changes)("after $what, the old host serves nothing: the request goes back to its client, and the host exits", async ({ change }) => {
    const i = await hostOfCopy();
    const ws = workspace();
    const before = await run(i, ["--", "/bin/echo", "before"], ws);
    expect(before.stdout).toBe("before\n");
    expect(before.code).toBe(0);
    const changed = change(i.dir);
    const after = await run(i, ["--", "/bin/echo", "after"], ws);
    // VAK_RESIDENT=only shows what the host answered: not served, and why.
    expect(after.stdout).toBe("");
    expect(after.stderr).toContain(`no resident host served this (fallback Vak's installation changed since this host started (${changed} `);
    expect(after.code).toBe(125);
    // Its name is gone at once (the next client starts a new host), and it exits.
    expect(existsSync(i.host.sock)).toBe(false);
    await until("the old host to exit", () => !alive(i.host.pid), 10000);
  });

  it("the request it sends back runs in-process with the new code, and the next command starts a new host that serves", async () => {
    const i = await hostOfCopy();
    const ws = workspace();
    const tag = `cycle-${process.pid}-${n}`;
    const first = await run(i, ["--", "/bin/echo", `${tag}-old`], ws);
    expect(first.code).toBe(0);
    expect(first.stderr).toBe("");
    changes[0]!.change(i.dir);
    // As a user runs it: whatever the host does not serve runs in Node, in-process, with the installation's code.
    const back = await run(i, ["--", "/bin/echo", `${tag}-back`], ws, { VAK_RESIDENT: "" });
    expect(back.stdout).toBe(`${tag}-back\n`);
    expect(back.stderr).toBe("vak: the new build's code\n");
    expect(back.code).toBe(0);
    await until("the old host to exit", () => !alive(i.host.pid), 10000);
    // No host now: this command runs in-process too, and starts one for the next, from the new installation.
    const pidFile = join(i.host.rt, "vak", "host.pid");
    const starts = await run(i, ["--", "/bin/echo", `${tag}-starts`], ws, { VAK_RESIDENT: "" });
    expect(starts.stderr).toBe("vak: the new build's code\n");
    expect(starts.code).toBe(0);
    await until("a new host", () => existsSync(pidFile));
    const pid = hostPid(pidFile);
    hosts.push({ ...i.host, pid });
    expect(pid).not.toBe(i.host.pid);
    await until("the new host's socket", () => existsSync(i.host.sock));
    const served = await run(i, ["--", "/bin/echo", `${tag}-new`], ws);
    expect(served.stdout).toBe(`${tag}-new\n`);
    expect(served.code).toBe(0);
    expect((journaled(`${tag}-new`)[0]!.events[0]!.payload.servedBy as { pid: number }).pid).toBe(pid);
    // The runs in-process recorded themselves as such (no host named), the old host's its own.
    expect(journaled(`${tag}-back`)[0]!.events[0]!.payload.servedBy).toBeUndefined();
    expect((journaled(`${tag}-old`)[0]!.events[0]!.payload.servedBy as { pid: number }).pid).toBe(i.host.pid);
  });

  it("a run the old host serves when the installation changes goes on to its end, on the record; the host exits after it", async () => {
    const i = await hostOfCopy();
    const ws = workspace();
    const tag = `long-${process.pid}-${n}`;
    const long = client(i.host, ["exec", "--", "/bin/sh", "-c", `touch started; sleep 2; echo ${tag}-done`], { cwd: ws, clientPath: i.clientPath });
    await until("the long run to start", () => existsSync(join(ws, "started")));
    changes[3]!.change(i.dir);
    const other = await run(i, ["--", "/bin/true"], ws);
    expect(other.code).toBe(125);
    expect(other.stderr).toContain("Vak's installation changed since this host started");
    // Not served, and not stopped: the old host still runs the long one.
    expect(alive(i.host.pid)).toBe(true);
    const r = await long.done;
    expect(r.stdout).toBe(`${tag}-done\n`);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    await until("the old host to exit", () => !alive(i.host.pid), 10000);
    const [s] = journaled(`${tag}-done`);
    expect(s!.outcome).toBe("ok");
    expect(s!.events.map((e) => e.kind)).toEqual(["session.started", "policy.generation", "worker.spawned", "worker.exited", "session.ended"]);
  });

  it("a rebuild in the middle of a run (the chunk the host loads next is gone) says so, ends the run's record, and the host serves nothing more", async () => {
    // A cmd: secret, resolved while the run is planned, after the host's check: it removes the chunk of the host's
    // bundle that the run's egress gate is (dist/resident-host/exec-egress-HASH.cjs), as a rebuild would.
    const cfg = join(base, `cfg${++n}`);
    mkdirSync(join(cfg, "vak"), { recursive: true });
    const i = await hostOfCopy({ XDG_CONFIG_HOME: cfg });
    const chunks = join(i.dir, "dist", "resident-host");
    expect(readdirSync(chunks).some((f) => /^exec-egress-.*\.cjs$/.test(f))).toBe(true);
    writeFileSync(join(cfg, "vak", "config.toml"), `[secret_commands]\nrebuild = ["/bin/sh", "-c", "rm ${chunks}/exec-egress-*.cjs; echo value"]\n`);
    const ws = workspace();
    const tag = `midrun-${process.pid}-${n}`;
    const r = await run(i, ["--secret", "TOKEN=cmd:rebuild", "--allow-net", "127.0.0.1:9", "--", "/bin/echo", tag], ws, { XDG_CONFIG_HOME: cfg });
    expect(r.stdout).toBe("");
    expect(r.stderr).not.toContain("Cannot find module");
    expect(r.stderr).toMatch(/^vak: Vak was upgraded or rebuilt while this ran \(\.\/exec-egress-[\w-]+\.cjs is gone\), and this run could not go on with the old code: run it again\n$/);
    expect(r.code).toBe(125);
    // Its start was on the record: so is its end, the command never having run.
    const [s] = journaled(tag);
    expect(s!.outcome).toBe("exit 125");
    const kinds = s!.events.map((e) => e.kind);
    expect(kinds.slice(-2)).toEqual(["worker.exited", "session.ended"]);
    expect(String(s!.events.at(-2)!.payload.error)).toContain("Vak was upgraded or rebuilt while this ran");
    await until("the old host to exit", () => !alive(i.host.pid), 10000);
  });
});
