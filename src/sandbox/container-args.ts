/**
 * The container backend's engine command line, as a pure function of the
 * launch plan, the image and this run's directories.
 *
 * The container is only the outer wall: inside it the same launcher runs the
 * same plan (namespaces, the mount view, Landlock, the write guard, seccomp),
 * so every guarantee of the namespace backend holds and the container adds its
 * own. The container has no network (`--network none`, never a bridge or the
 * host's), a read-only root, no capability in any set, no_new_privs, the
 * seccomp profile made from the launcher's table, the caller's own unprivileged
 * uid, and ceilings on processes, memory and CPU. The host paths the plan names
 * are bound at the same paths (read-only unless the plan writes them); the
 * runtime set comes from the image, built from this host's own files.
 */
import { VakError } from "../policy/errors.js";
import { NODE_RUNTIME_WHY, RUNTIME_WHY, type LaunchPlan } from "../policy/plan.js";

/** A container image built by `vak container build-image`, as its record says. */
export interface ContainerImage {
  engine: "docker" | "podman";
  /** The engine's CLI, an absolute path. */
  engineBin: string;
  /** The image's tag, derived from its content: vak-sandbox:<sha256 of the tarball, 16 hex>. */
  image: string;
  /** The launcher inside the image: the same path as on the host. */
  launcher: string;
  /** The SHA-256 of that launcher: it must be the host's, or the argv could mean something else inside. */
  launcherSha256: string;
  /** The engine's seccomp profiles (files), without and with a network grant. */
  profiles: { none: string; net: string };
}

/** What one run adds: its private directories, who runs it, and its ceilings. */
export interface ContainerRun {
  /** The launcher's --host-dir: report, token, environment, lifeline. */
  hostDir: string;
  /** The egress gate's directory, when the plan has a network grant. */
  gateDir?: string | undefined;
  uid: number;
  gid: number;
  /** Attach stdin (the caller writes to the sandbox, or passes its own). */
  stdin: boolean;
  cpus: number;
  /** The memory ceiling without --max-memory, bytes. */
  memory: number;
  /** A label value naming this run, for finding what a killed vak left. */
  runId: string;
}

/** Processes of the launcher's own in the container (tini, monitor, lifeline watcher, init, guard, relay), over the plan's limit. */
export const CONTAINER_OWN_PROCS = 8;
/** The container's memory ceiling without --max-memory (half the host's memory, at most this): the plan's tmpfs mounts live in it too. */
export const DEFAULT_CONTAINER_MEMORY = 8 * 2 ** 30;
/** Memory the launcher's own processes may use over --max-memory. */
const OWN_MEMORY = 64 << 20;

/** A host path as the engine's --mount takes it: its CSV parser splits on commas and quotes. */
function mountPath(p: string): string {
  if (/[,"\n\r\0]/.test(p))
    throw new VakError("unsupported", `--sandbox container cannot bind ${JSON.stringify(p)}: the engine's --mount syntax splits on commas and quotes; rename it or use --sandbox namespaces`);
  return p;
}

/**
 * The host paths the container must see at the same path: every grant and
 * Vak file the plan binds, except the runtime set, which is the image's.
 * Read-only unless the plan makes the path writable.
 */
export function containerBinds(plan: LaunchPlan, run: Pick<ContainerRun, "hostDir" | "gateDir">): { path: string; readonly: boolean }[] {
  const binds = new Map<string, boolean>();
  for (const m of plan.mounts) {
    if (m.kind !== "ro" && m.kind !== "rw") continue;
    if (m.why === RUNTIME_WHY || m.why === NODE_RUNTIME_WHY) continue;
    binds.set(m.path, (binds.get(m.path) ?? true) && m.kind === "ro");
  }
  binds.set(run.hostDir, false);
  if (run.gateDir) binds.set(run.gateDir, true); // connect() to a socket needs no write to its file system
  return [...binds].map(([path, readonly]) => ({ path, readonly }));
}

/** The container runs the sandbox as the caller's own uid, never root's. */
export function refuseRoot(uid: number): void {
  if (uid === 0)
    throw new VakError("unsupported",
      "--sandbox container: vak is running as root, and the container runs the sandbox as an unprivileged user with no capability, " +
      "where Linux refuses to map uid 0 into the launcher's user namespace (that needs CAP_SETFCAP); run vak as the user who owns the workspace");
}

/** `ENGINE run …` for the plan, ending with the launcher's argv. */
export function containerArgs(plan: LaunchPlan, image: ContainerImage, run: ContainerRun, launcherArgv: readonly string[]): string[] {
  refuseRoot(run.uid);
  const procs = (plan.limits.maxProcs ?? plan.defaultMaxProcs) + CONTAINER_OWN_PROCS;
  const memory = (plan.limits.maxMemoryBytes ?? run.memory) + OWN_MEMORY;
  const a = [
    "run", "--rm", "--init", "--pull", "never",
    "--label", `dev.vak.sandbox=${run.runId}`,
    "--network", "none",
    "--read-only",
    "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges",
    "--security-opt", `seccomp=${plan.network.kind === "gate" ? image.profiles.net : image.profiles.none}`,
    // The launcher mounts a fresh /proc for its own pid namespace, which the kernel allows only where a /proc
    // is fully visible: the engine's masks over /proc/kcore and friends would refuse it. The command sees only
    // the launcher's /proc (its own processes), never the container's.
    "--security-opt", image.engine === "docker" ? "systempaths=unconfined" : "unmask=ALL",
    "--user", `${run.uid}:${run.gid}`,
    "--pids-limit", String(procs),
    "--memory", String(memory), "--memory-swap", String(memory),
    "--cpus", String(run.cpus),
    "--hostname", "vak",
    "--log-driver", "none",
  ];
  if (image.engine === "podman") a.push("--read-only-tmpfs=false");
  if (run.stdin) a.push("--interactive");
  for (const b of containerBinds(plan, run))
    a.push("--mount", `type=bind,source=${mountPath(b.path)},target=${b.path}${b.readonly ? ",readonly" : ""}`);
  a.push(image.image, image.launcher, ...launcherArgv);
  return a;
}

/** The engine CLI's own environment: how to reach the engine, nothing of the sandbox's (that goes through --host-dir). */
export function engineEnv(host: NodeJS.ProcessEnv): Record<string, string> {
  const keep = ["PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "CONTAINER_HOST", "CONTAINERS_CONF", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME"];
  const env: Record<string, string> = {};
  for (const k of keep) if (host[k] !== undefined) env[k] = host[k]!;
  return env;
}
