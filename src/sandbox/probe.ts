import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { z } from "zod";
import { launcherPath } from "./launcher.js";

/** What the kernel can enforce, as `vak-launcher --probe` measured it. */
export const ProbeSchema = z
  .object({
    kernel: z.string(),
    arch: z.string(),
    uid: z.number(),
    landlock_abi: z.number(),
    user_namespaces: z.boolean(),
    user_namespaces_error: z.string(),
    seccomp_listener: z.boolean(),
    seccomp_addfd_send: z.boolean(),
    seccomp_wait_killable: z.boolean(),
    mount_api: z.boolean(),
    openat2: z.boolean(),
    pidfd_getfd: z.boolean(),
    close_range: z.boolean(),
    procs_limit: z.enum(["none", "pid-namespace", "cgroup", "rlimit"]),
    memory_limit: z.enum(["none", "cgroup", "rlimit-data"]),
    tiocsti_legacy: z.number(),
    max_user_namespaces: z.number(),
  })
  .strict();
export type Probe = z.infer<typeof ProbeSchema>;

export async function probe(): Promise<Probe> {
  const { stdout } = await promisify(execFile)(launcherPath(), ["--probe"], { timeout: 10_000 });
  return ProbeSchema.parse(JSON.parse(stdout));
}

/** A layer the full sandbox needs, whether this kernel has it, and why it matters. */
export interface Layer {
  name: string;
  ok: boolean;
  detail: string;
  required: "namespaces" | "always";
}

export function layers(p: Probe): Layer[] {
  return [
    { name: "architecture", ok: p.arch === "x86_64", detail: p.arch, required: "always" },
    { name: "Landlock", ok: p.landlock_abi >= 1, detail: p.landlock_abi ? `ABI ${p.landlock_abi}` : "not enabled (needs Linux 5.13+ with lsm=landlock)", required: "always" },
    { name: "seccomp user notification", ok: p.seccomp_listener && p.seccomp_addfd_send, detail: p.seccomp_listener ? (p.seccomp_addfd_send ? "listener and atomic fd install" : "needs Linux 5.14+") : "unavailable", required: "always" },
    { name: "pidfd_getfd", ok: p.pidfd_getfd, detail: p.pidfd_getfd ? "present" : "needs Linux 5.6+", required: "always" },
    { name: "openat2", ok: p.openat2, detail: p.openat2 ? "present" : "needs Linux 5.6+", required: "always" },
    { name: "close_range", ok: p.close_range, detail: p.close_range ? "present" : "needs Linux 5.9+", required: "always" },
    { name: "user namespaces", ok: p.user_namespaces, detail: p.user_namespaces ? "available" : `unavailable (${p.user_namespaces_error})`, required: "namespaces" },
    { name: "mount API", ok: p.mount_api, detail: p.mount_api ? "open_tree, move_mount, mount_setattr" : "needs Linux 5.12+", required: "namespaces" },
  ];
}

/** The best sandbox this kernel can build, or why none can be. */
export function bestSandbox(p: Probe): { kind: "namespaces" | "reduced" | "unsupported"; missing: string[] } {
  const ls = layers(p);
  const missingAlways = ls.filter((l) => l.required === "always" && !l.ok).map((l) => `${l.name}: ${l.detail}`);
  if (missingAlways.length) return { kind: "unsupported", missing: missingAlways };
  const missingNs = ls.filter((l) => l.required === "namespaces" && !l.ok).map((l) => `${l.name}: ${l.detail}`);
  return missingNs.length ? { kind: "reduced", missing: missingNs } : { kind: "namespaces", missing: [] };
}
