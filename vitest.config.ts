import { defineConfig } from "vitest/config";

/**
 * The attack tests that run a second time on the container backend
 * (`--sandbox container`, test/support/container-setup.ts, as an unprivileged
 * user): every file whose attacks go through `vak exec`'s file system, process
 * and network boundaries. Left out, because their fixtures need root on the
 * host: setuid.test.ts (it gives a host file capabilities, which needs
 * CAP_SETFCAP) and egress.test.ts (its servers live in network namespaces it
 * creates). The egress gate is the same code on both backends; network.test.ts
 * checks the container's way to it. ARCHITECTURE.md ("The container backend")
 * lists what else does not apply, and why.
 */
export const CONTAINER_ATTACKS = [
  "filesystem-read", "filesystem-write", "protected-paths", "leaks", "metadata", "guard",
  "processes", "process-tree", "limits", "kernel-surface", "seccomp", "network", "container",
].map((f) => `test/attacks/${f}.test.ts`);

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    reporters: ["default", "./test/support/summary-reporter.ts"],
    projects: [
      // test/attacks/container.test.ts tries the container's own wall: only the container project runs it.
      { extends: true, test: { name: "namespaces", include: ["test/**/*.test.ts"], exclude: ["test/attacks/container.test.ts"], globalSetup: ["test/support/global-setup.ts"] } },
      {
        extends: true,
        test: {
          name: "container",
          include: CONTAINER_ATTACKS,
          globalSetup: ["test/support/global-setup.ts", "test/support/container-global.ts"],
          setupFiles: ["test/support/container-setup.ts"],
        },
      },
    ],
  },
});
