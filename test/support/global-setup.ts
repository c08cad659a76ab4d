import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { ROOT } from "./paths.js";

/** Checks that the product is built and compiles the C test helpers once per run. */
export default function setup(project: TestProject): void {
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
}

declare module "vitest" {
  export interface ProvidedContext {
    noUserns: string;
    seccompTable: string;
    syscallProbe: string;
  }
}
