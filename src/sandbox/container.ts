/**
 * The container backend (`--sandbox container`): the plan's launcher runs
 * inside a Docker or Podman container instead of directly on the host.
 *
 * vak cannot hand file descriptors to a process the engine starts, so the
 * launcher gets a private directory of vak's instead (`--host-dir`, see
 * native/hostdir.c): the report, the gate token and the command's environment
 * by name, and a lifeline socket whose close kills the launcher, so that the
 * container dies with vak even after `kill -9` (the engine's CLI would not: a
 * container outlives its attached client). Nothing here falls back to another
 * backend: a missing image, engine or launcher build refuses with what to do.
 */
import type { StdioOptions } from "node:child_process";
import { closeSync, existsSync, lstatSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { Socket } from "node:net";
import { availableParallelism, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import type { LaunchPlan } from "../policy/plan.js";
import { vakDirs } from "../policy/state.js";
import { containerArgs, DEFAULT_CONTAINER_MEMORY, engineEnv, refuseRoot, type ContainerImage } from "./container-args.js";
import { launcherArgs, type GateLink, type OutputOptions } from "./launcher-args.js";
import { privateTmp, readReport, resultOf, type RunningSandbox, type StdioSlot } from "./launch-result.js";

/** node:crypto loads only for a container run: this module is on every `vak exec`'s path, and loading it costs ~5 ms there (`npm run bench`). */
const crypto = () => process.getBuiltinModule("node:crypto");

/** Where `vak container build-image` records the image it built: Vak's cache, which no sandbox reaches. */
export function imageRecordPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).cache, "container", "image.json");
}

const BUILD_HINT = "run `vak container build-image` (it needs Docker or Podman, running)";

/** A file Vak trusts to say how to wall the sandbox: the caller's or root's, and nobody else may write it. */
function trustedFile(path: string, what: string): void {
  const st = lstatSync(path);
  const uid = process.getuid?.() ?? 0;
  if (!st.isFile() || (st.uid !== uid && st.uid !== 0) || (st.mode & 0o022) !== 0)
    throw new VakError("unsupported", `--sandbox container: ${what} ${path} is not a regular file of yours (or root's) that only its owner can write; remove it and ${BUILD_HINT}`);
}

/** The image to run, from its record; refuses with what to do when it is missing or stale. */
export function loadContainerImage(env: NodeJS.ProcessEnv = process.env): ContainerImage {
  const path = imageRecordPath(env);
  if (!existsSync(path)) throw new VakError("unsupported", `--sandbox container: no sandbox image has been built for this user; ${BUILD_HINT}`);
  trustedFile(path, "the image record");
  let rec: ContainerImage;
  try {
    rec = JSON.parse(readFileSync(path, "utf8")) as ContainerImage;
  } catch (e) {
    throw new VakError("unsupported", `--sandbox container: the image record ${path} does not parse (${(e as Error).message}); ${BUILD_HINT}`);
  }
  const str = (v: unknown) => typeof v === "string" && v.length > 0;
  if (!rec || (rec.engine !== "docker" && rec.engine !== "podman") || !str(rec.engineBin) || !str(rec.image) || !str(rec.launcher) ||
      !str(rec.launcherSha256) || !rec.profiles || !str(rec.profiles.none) || !str(rec.profiles.net))
    throw new VakError("unsupported", `--sandbox container: the image record ${path} is incomplete; ${BUILD_HINT}`);
  if (!existsSync(rec.engineBin))
    throw new VakError("unsupported", `--sandbox container: the container engine ${rec.engine} is missing (${rec.engineBin}); install it (Debian: \`apt-get install docker.io\` or \`apt-get install podman\`), start it, and ${BUILD_HINT}`);
  const launcher = installation().launcher;
  if (rec.launcher !== launcher || sha256File(launcher) !== rec.launcherSha256)
    throw new VakError("unsupported", `--sandbox container: the image ${rec.image} holds another build of Vak's launcher than ${launcher}; ${BUILD_HINT}`);
  for (const p of [rec.profiles.none, rec.profiles.net]) trustedFile(p, "the seccomp profile");
  return rec;
}

export function sha256File(path: string): string {
  return crypto().createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** A fresh private directory for one run; short enough for the lifeline's socket path (sun_path is 108 bytes). */
function runDir(): string {
  let base = privateTmp();
  if ((base + "/container-xxxxxx/lifeline").length >= 100) base = mkdtempSync(join(tmpdir(), "vak-c-"));
  return mkdtempSync(join(base, "container-"));
}

/** The command's environment as the launcher reads it: NAME=VALUE, each ending in NUL. */
function envFile(env: Record<string, string>): string {
  let out = "";
  for (const [k, v] of Object.entries(env)) {
    if (k.includes("=") || k.includes("\0") || v.includes("\0")) throw new VakError("bad-input", `the environment variable ${k} cannot be passed (a NUL or = in its name)`);
    out += `${k}=${v}\0`;
  }
  return out;
}

/** What `--sandbox container` needs before anything is recorded or started: not root, and a current image. */
export function containerPreflight(env: NodeJS.ProcessEnv = process.env): ContainerImage {
  refuseRoot(process.getuid?.() ?? 0);
  return loadContainerImage(env);
}

/** Starts the plan's launcher in a container; the same contract as launch(). */
export function launchInContainer(
  plan: LaunchPlan,
  stdio: [StdioSlot, StdioSlot, StdioSlot],
  gate: GateLink | undefined,
  opts: { detached?: boolean } & OutputOptions,
): RunningSandbox {
  const image = containerPreflight();
  const dir = runDir();
  // net and child_process load only for a container run: the CLI's start-up (vak exec) does without them.
  const { createServer } = process.getBuiltinModule("node:net");
  const { spawn } = process.getBuiltinModule("node:child_process");
  const lifelines: Socket[] = [];
  const server = createServer((s) => {
    s.on("error", () => {});
    lifelines.push(s);
  });
  let child;
  try {
    writeFileSync(join(dir, "report"), "", { mode: 0o600, flag: "wx" });
    writeFileSync(join(dir, "env"), envFile(plan.env), { mode: 0o600, flag: "wx" });
    if (plan.network.kind === "gate" && gate) writeFileSync(join(dir, "token"), gate.token, { mode: 0o600, flag: "wx" });
    // listen() binds at once: the socket file exists before the container can look for it.
    server.listen(join(dir, "lifeline"));
    server.unref();
    const argv = containerArgs(plan, image, {
      hostDir: dir, gateDir: plan.network.kind === "gate" ? gate?.dir : undefined,
      uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, stdin: stdio[0] !== "ignore",
      cpus: Math.max(1, Math.ceil(availableParallelism() / 2)), memory: Math.min(DEFAULT_CONTAINER_MEMORY, Math.floor(totalmem() / 2)),
      runId: crypto().randomBytes(8).toString("hex"),
    }, launcherArgs(plan, { hostDir: dir }, gate, { maxOutput: opts.maxOutput, explain: opts.explain }));
    child = spawn(image.engineBin, argv, { stdio: stdio as StdioOptions, env: engineEnv(process.env), cwd: "/", detached: opts.detached ?? false });
  } catch (e) {
    server.close();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  // Closing vak's end of the lifeline kills the launcher's monitor, and the sandbox with it.
  const cutLifeline = () => {
    for (const s of lifelines) s.destroy();
    server.close();
  };
  const result = new Promise<ReturnType<typeof resultOf>>((resolve, reject) => {
    child.on("error", (e) => {
      cutLifeline();
      rmSync(dir, { recursive: true, force: true });
      reject(new VakError("sandbox-setup", `cannot start the container engine ${image.engineBin}: ${e.message}`));
    });
    child.on("close", (code, signal) => {
      cutLifeline();
      let reports: ReturnType<typeof readReport> = { reports: [], malformed: [] };
      try {
        const fd = openSync(join(dir, "report"), "r");
        try {
          if (statSync(join(dir, "report")).isFile()) reports = readReport(fd);
        } finally {
          closeSync(fd);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const status = code ?? (signal ? 137 : 125);
      const r = resultOf(status, reports.reports, reports.malformed);
      // The launcher always reports how it ended; without a line it never ran, and the engine's own message is on stderr.
      if (reports.reports.length === 0 && reports.malformed.length === 0 && !r.setupError)
        r.setupError = {
          step: "container",
          message: `the container engine (${image.engine}) did not run the sandbox (exit ${status}; its message is above): ` +
            `check that it is running (\`${image.engine} info\`; start it with \`sudo systemctl start ${image.engine}\`, or \`sudo dockerd &\`) ` +
            `and that the image ${image.image} exists (\`vak container build-image\`)`,
        };
      resolve(r);
    });
  });
  let cancelled = false;
  const hardKill = () => {
    cutLifeline();
    child.kill("SIGKILL");
  };
  return {
    pid: child.pid ?? -1,
    result,
    kill: (s) => {
      // The engine's CLI passes signals on to the launcher; SIGKILL it cannot, and its death alone would leave the container running.
      if (s === "SIGKILL") hardKill();
      else child.kill(s);
    },
    cancel: () => {
      if (cancelled) return;
      cancelled = true;
      child.kill("SIGUSR1");
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) hardKill();
      }, 200).unref();
    },
    stdout: child.stdout,
    stderr: child.stderr,
    stdin: child.stdin,
  };
}
