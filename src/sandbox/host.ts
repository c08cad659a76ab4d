import { realpathSync } from "node:fs";
import { homedir, userInfo } from "node:os";
import { credentialPaths } from "../policy/host-credentials.js";
import type { HostFacts } from "../policy/plan.js";
import { vakStateDirs } from "../policy/state.js";
import { installation } from "../policy/install.js";

/** Facts about this host that the policy core needs, read once. */
export function hostFacts(env: NodeJS.ProcessEnv = process.env): HostFacts {
  const info = userInfo();
  const install = installation();
  const home = homedir();
  return {
    home,
    uid: info.uid,
    gid: info.gid,
    user: info.username,
    shell: info.shell && info.shell.startsWith("/") ? info.shell : "/bin/sh",
    env,
    stateDirs: vakStateDirs(env, home),
    credentials: credentialPaths(home, env),
    nodePrefix: install.nodePrefix,
    preloadDir: install.preloadDir,
    install: { packageRoot: realpathSync.native(install.root), execPath: install.node, script: process.argv[1], nodePrefix: install.nodePrefix },
  };
}
