import { dirname, join } from "node:path";
import { homedir, userInfo } from "node:os";
import type { HostFacts } from "../policy/plan.js";
import { vakStateDirs } from "../policy/state.js";
import { packageRoot } from "./launcher.js";

/** Facts about this host that the policy core needs, read once. */
export function hostFacts(env: NodeJS.ProcessEnv = process.env): HostFacts {
  const info = userInfo();
  const home = homedir();
  return {
    home,
    uid: info.uid,
    gid: info.gid,
    user: info.username,
    shell: info.shell && info.shell.startsWith("/") ? info.shell : "/bin/sh",
    env,
    stateDirs: vakStateDirs(env, home),
    nodePrefix: dirname(dirname(process.execPath)),
    preloadDir: join(packageRoot(), "dist", "preload"),
  };
}
