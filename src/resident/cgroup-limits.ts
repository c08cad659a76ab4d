import { readFileSync } from "node:fs";

/**
 * Whether a client's cgroups limit it where the host's do not. A command the
 * host runs is the host's child, in the host's cgroups: a client in a cgroup
 * with a memory, pids, CPU, I/O, cpuset or device limit (a CI job's, a
 * `systemd-run -p MemoryMax=` unit's) would leave that limit behind. Such a
 * client runs in-process instead, inside its own limits. A client in the
 * host's cgroup, or in an ancestor of it (whose limits bound the host too), or
 * in cgroups that set no limit on the way down from what they share with the
 * host (another terminal's systemd scope), is served.
 */

/** Hierarchy key ("0:" for cgroup v2, "4:memory" for a v1 controller) to the process's path in it. */
export function cgroupsOf(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (m) out.set(`${m[1]}:${m[2]}`, m[3]!);
  }
  return out;
}

/** Where each hierarchy is mounted, from mountinfo: its mount point and the cgroup path at that point. */
function mountOf(mountinfo: string, key: string): { at: string; root: string } | undefined {
  const controllers = key.slice(key.indexOf(":") + 1).split(",").filter(Boolean);
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const f = left.split(" ");
    const [type, , options = ""] = right.split(" ");
    const opts = options.split(",");
    if (key.startsWith("0:") ? type === "cgroup2" : type === "cgroup" && controllers.length > 0 && controllers.every((c) => opts.includes(c)))
      return { at: unescape(f[4]!), root: unescape(f[3]!) };
  }
  return undefined;
}

const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));

/** v1's "no memory limit": the page counter's maximum, in bytes, is above this on every page size. */
const V1_UNLIMITED = 2n ** 62n;

/** Each file that limits a cgroup's processes, and whether its value is a limit (dir is the cgroup's directory). */
const LIMITS: Array<[string, (value: string, dir: string) => boolean]> = [
  ["memory.max", (v) => v !== "max"],
  ["memory.high", (v) => v !== "max"],
  ["memory.swap.max", (v) => v !== "max"],
  ["pids.max", (v) => v !== "max"],
  ["cpu.max", (v) => v.split(" ")[0] !== "max"],
  ["io.max", (v) => v !== ""],
  ["memory.limit_in_bytes", (v) => BigInt(v) < V1_UNLIMITED],
  ["memory.memsw.limit_in_bytes", (v) => BigInt(v) < V1_UNLIMITED],
  ["cpu.cfs_quota_us", (v) => v !== "-1"],
  ["blkio.throttle.read_bps_device", (v) => v !== ""],
  ["blkio.throttle.write_bps_device", (v) => v !== ""],
  ["blkio.throttle.read_iops_device", (v) => v !== ""],
  ["blkio.throttle.write_iops_device", (v) => v !== ""],
  ["devices.list", (v) => v !== "a *:* rwm"],
  // A cpuset narrower than its parent's (v1 always fills it in; v2 leaves it empty when it sets none).
  ["cpuset.cpus", (v, dir) => v !== "" && v !== read(`${dir}/../cpuset.cpus`)],
  ["cpuset.mems", (v, dir) => v !== "" && v !== read(`${dir}/../cpuset.mems`)],
];

function read(path: string): string | undefined {
  try {
    return readFileSync(path, "latin1").trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** Why the host must not serve this client for its cgroups, or undefined. Anything unreadable is a reason. */
export function cgroupEscape(pid: number): string | undefined {
  let mine: Map<string, string>;
  let theirs: Map<string, string>;
  let mountinfo: string;
  try {
    mine = cgroupsOf(readFileSync("/proc/self/cgroup", "latin1"));
    theirs = cgroupsOf(readFileSync(`/proc/${pid}/cgroup`, "latin1"));
    mountinfo = readFileSync("/proc/self/mountinfo", "latin1");
  } catch (e) {
    return `the client's cgroups cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`;
  }
  for (const [key, path] of theirs) {
    const host = mine.get(key);
    if (host === undefined) return `the client is in a cgroup hierarchy (${key}) the host is not in`;
    const hostParts = host.split("/").filter(Boolean);
    const parts = path.split("/").filter(Boolean);
    let common = 0;
    while (common < parts.length && common < hostParts.length && parts[common] === hostParts[common]) common++;
    // The client's cgroup is the host's or holds it: its limits bound the host's children too.
    if (common === parts.length) continue;
    const mount = mountOf(mountinfo, key);
    const rootParts = mount?.root.split("/").filter(Boolean) ?? [];
    if (!mount || common < rootParts.length || rootParts.some((p, i) => parts[i] !== p)) return `the client's cgroup ${path} (${key}) cannot be found to compare its limits`;
    for (let depth = common + 1; depth <= parts.length; depth++) {
      const dir = [mount.at, ...parts.slice(rootParts.length, depth)].join("/");
      for (const [file, limits] of LIMITS) {
        let value: string | undefined;
        try {
          value = read(`${dir}/${file}`);
          if (value !== undefined && limits(value, dir)) return `the client's cgroup ${parts.slice(0, depth).join("/")} sets ${file} (${value.slice(0, 80)}), which the host's does not`;
        } catch (e) {
          return `the client's cgroup ${parts.slice(0, depth).join("/")} cannot be read (${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
        }
      }
    }
  }
  return undefined;
}
