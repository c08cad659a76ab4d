import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { ROOT } from "./paths.js";

/**
 * Checks that the product is built, compiles the C test helpers once per run,
 * and finds the PostgreSQL the journal's tests run against: VAK_TEST_PG (a
 * superuser's URL on a throwaway server; .ci/run starts one and sets it), or,
 * when it is not set, a server started here for this run. If neither can be
 * had, every PostgreSQL test fails, saying why: none is skipped.
 */
export default function setup(project: TestProject): () => void {
  for (const f of ["build/Release/vak-launcher", "dist/cli/main.js"])
    if (!existsSync(join(ROOT, f))) throw new Error(`${f} is missing: run \`npm ci\` (it builds the launcher and the CLI)`);
  const out = mkdtempSync(join(tmpdir(), "vak-test-helpers-"));
  chmodSync(out, 0o755); // the container project's tests run as an unprivileged user (container-setup.ts)
  const noUserns = join(out, "no-userns");
  execFileSync("cc", ["-O2", "-Wall", "-Werror", "-o", noUserns, join(ROOT, "test/support/no-userns.c")]);
  project.provide("noUserns", noUserns);
  // The seccomp table and its compiler, linked from the launcher's own sources.
  const seccompTable = join(out, "seccomp-table");
  execFileSync("cc", ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-I", join(ROOT, "native"), "-o", seccompTable,
    ...["test/support/seccomp-table.c", "native/seccomp.c", "native/bpf.c", "native/report.c"].map((f) => join(ROOT, f))]);
  project.provide("seccompTable", seccompTable);
  const syscallProbe = join(out, "syscall-probe");
  execFileSync("cc", ["-O2", "-Wall", "-Werror", "-o", syscallProbe, join(ROOT, "test/support/syscall-probe.c")]);
  project.provide("syscallProbe", syscallProbe);

  let pg = process.env.VAK_TEST_PG ?? "";
  let problem = "";
  let cluster: string | undefined;
  if (!pg) {
    // Directly in /tmp: when we are root the server runs as postgres, which must reach the directory.
    cluster = join(tmpdir(), `vak-test-pg-${process.pid}-${Date.now().toString(36)}`);
    try {
      pg = execFileSync("bash", [join(ROOT, "test/support/pg-cluster.sh"), "start", cluster], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
    } catch (e) {
      problem = `VAK_TEST_PG is not set and no PostgreSQL server could be started here (${String((e as { stderr?: string }).stderr ?? e).trim().split("\n").slice(-3).join(" ")}); install postgresql or set VAK_TEST_PG to a superuser's URL on a throwaway server`;
      cluster = undefined;
    }
  }
  project.provide("pgAdmin", pg);
  project.provide("pgProblem", problem);
  return () => {
    if (cluster) execFileSync("bash", [join(ROOT, "test/support/pg-cluster.sh"), "stop", cluster], { stdio: "ignore" });
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    noUserns: string;
    seccompTable: string;
    syscallProbe: string;
    /** A PostgreSQL superuser's URL, or "" when there is none (then pgProblem says why). */
    pgAdmin: string;
    pgProblem: string;
  }
}
