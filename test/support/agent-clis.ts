import { existsSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { it } from "vitest";
import { ROOT } from "./paths.js";

/**
 * Where the real agent CLIs are for the tests that run them: .ci/run installs
 * them (npm, about 600 MB) into .cache/agent-clis, or VAK_AGENT_CLIS names a
 * folder. Nothing else installs there (bench/resident.js has a folder of its
 * own), so a folder with some CLIs missing is a broken install, not a choice.
 */
export const AGENT_CLIS = process.env.VAK_AGENT_CLIS ?? join(ROOT, ".cache/agent-clis");
/** The folder at its real path (the grant is canonical: the sandbox sees it there). */
export const AGENT_CLIS_REAL = existsSync(AGENT_CLIS) ? realpathSync(AGENT_CLIS) : AGENT_CLIS;
export const agentCliInstalled = (cli: string): boolean => existsSync(join(AGENT_CLIS, "node_modules/.bin", cli));

/**
 * Tests that need these CLIs are skipped where they are not installed, and
 * say so; where VAK_AGENT_CLIS_REQUIRED is set (.ci/run sets it), a missing
 * one is a failing test instead, so that CI never passes without running them.
 */
export function requireAgentClis(clis: readonly string[]): void {
  const missing = clis.filter((c) => !agentCliInstalled(c));
  if (missing.length && process.env.VAK_AGENT_CLIS_REQUIRED)
    it(`the agent CLIs this file runs are installed (${clis.join(", ")})`, () => {
      throw new Error(`not installed in ${AGENT_CLIS}: ${missing.join(", ")}; VAK_AGENT_CLIS_REQUIRED is set, so these tests may not be skipped (.ci/run installs them)`);
    });
}
