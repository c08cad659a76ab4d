import { chmodSync, chownSync } from "node:fs";
import { inject } from "vitest";
import { CONTAINER_TEST_UID } from "./container-global.js";

/*
 * Runs in each worker of the "container" project before its test files load.
 * The container backend runs the sandbox as the caller's own unprivileged
 * uid, and refuses root (Linux does not let a process without capabilities
 * map uid 0 into the launcher's user namespace). So when the run is root's
 * (CI), this worker becomes nobody first: every file the tests make, and every
 * vak they start, is that user's, as for a developer running vak as themselves.
 */
const problem = inject("containerProblem");
if (problem) throw new Error(`the container backend's tests could not run: ${problem} (to run only the other tests: npx vitest run --project namespaces)`);
process.env.VAK_TEST_SANDBOX = "container";
process.env.XDG_CACHE_HOME = inject("containerCache");
if (process.getuid?.() === 0) {
  const home = inject("containerHome");
  chownSync(home, CONTAINER_TEST_UID, CONTAINER_TEST_UID);
  chmodSync(home, 0o700);
  process.env.HOME = home;
  process.setgroups?.([]);
  process.setgid?.(CONTAINER_TEST_UID);
  process.setuid?.(CONTAINER_TEST_UID);
}
