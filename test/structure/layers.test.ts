import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../support/paths.js";

// The layer check (.dependency-cruiser.cjs, run by `npm test` before anything
// else) on copies of src/: as it is, it must pass; with bad imports added, each
// must fail the check under its own rule. The copies live inside the
// repository so that node_modules resolves as it does for src/.

/** Each probe: a file added to the copy, and the one rule it must break. */
const PROBES: [what: string, file: string, text: string, rule: string][] = [
  ["an upward import (policy importing the agent)", "src/policy/upward.ts", `import type { RunResult } from "../agent/agent.js";\nexport type X = RunResult;\n`, "layer-policy-imports-down"],
  ["an import between peers of one rank (net importing the sandbox)", "src/net/sideways.ts", `export { launch } from "../sandbox/launcher.js";\n`, "layer-net-imports-down"],
  ["a type-only upward import (approvals importing the broker, the cycle the layers broke)", "src/approvals/back.ts", `import type { Broker } from "../broker/broker.js";\nexport type B = Broker;\n`, "layer-approvals-imports-down"],
  ["the worker importing the journal", "src/worker/leak-journal.ts", `export * from "../journal/journal.js";\n`, "worker-holds-no-authority"],
  ["the worker importing secrets", "src/worker/leak-secrets.ts", `export * from "../secrets/store.js";\n`, "worker-holds-no-authority"],
  ["the worker importing the broker", "src/worker/leak-broker.ts", `export * from "../broker/broker.js";\n`, "worker-holds-no-authority"],
  ["the worker importing approvals", "src/worker/leak-approvals.ts", `export * from "../approvals/approval-gate.js";\n`, "worker-holds-no-authority"],
  ["the worker importing the egress gate", "src/worker/leak-gate.ts", `export * from "../net/egress-gate.js";\n`, "worker-holds-no-authority"],
  ["the worker importing a model client", "src/worker/leak-model.ts", `export * from "../model/openai.js";\n`, "worker-holds-no-authority"],
  ["the worker importing policy", "src/worker/leak-policy.ts", `export * from "../policy/plan.js";\n`, "worker-holds-no-authority"],
  ["the worker importing an npm package other than zod", "src/worker/leak-npm.ts", `export { Command } from "commander";\n`, "worker-imports-only-node-and-zod"],
  ["the fetch preload importing Vak's own code", "src/net/preload/leak.ts", `export { VakError } from "../../policy/errors.js";\n`, "preload-holds-no-authority"],
  ["an import cycle inside one layer", "src/policy/cycle-a.ts", `import { b } from "./cycle-b.js";\nexport const a = () => b;\n`, "no-cycles"],
  ["a folder that has no place in the layers", "src/newroom/thing.ts", `export { VakError } from "../policy/errors.js";\n`, "every-folder-has-a-layer"],
  ["a placed folder importing one that has no place", "src/cli/unplaced.ts", `export { thing } from "../elsewhere/thing.js";\n`, "imports-only-placed-folders"],
  ["a lone module in a folder that has no place", "src/lonely/alone.ts", `export const alone = 1;\n`, "no-unplaced-orphans"],
  ["a host module importing the worker bundle", "src/cli/reach.ts", `export { handle } from "../worker/main.js";\n`, "nothing-imports-the-worker"],
  ["the server importing the CLI", "src/server/upward.ts", `export { fmt } from "../cli/output.js";\n`, "layer-server-imports-down"],
  ["the web client importing the journal", "src/server/web/leak-journal.ts", `export * from "../../journal/journal.js";\n`, "web-client-imports-only-itself"],
  ["the web client importing the server's code (not its wire types)", "src/server/web/leak-server.ts", `export * from "../auth.js";\n`, "web-client-imports-only-itself"],
  ["the web client importing an npm package other than preact and xterm", "src/server/web/leak-npm.ts", `export { z } from "zod";\n`, "web-client-imports-only-preact-and-xterm"],
  ["a host module importing the web client", "src/server/reach-web.ts", `export { get } from "./web/api.js";\n`, "nothing-imports-the-web-client"],
];
const CYCLE_PARTNER = {
  "src/policy/cycle-b.ts": `import { a } from "./cycle-a.js";\nexport const b = () => a;\n`,
  "src/elsewhere/thing.ts": `export const thing = 1;\n`,
};

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

describe("the layer check", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(ROOT, ".layers-probe-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function copyWith(name: string, extra: Record<string, string>): string {
    const copy = join(dir, name);
    cpSync(join(ROOT, "src"), join(copy, "src"), { recursive: true });
    cpSync(join(ROOT, "tsconfig.json"), join(copy, "tsconfig.json"));
    for (const [file, text] of Object.entries(extra)) {
      mkdirSync(join(copy, file, ".."), { recursive: true });
      writeFileSync(join(copy, file), text);
    }
    return copy;
  }

  const depcruise = (cwd: string, ...args: string[]) =>
    spawnSync(join(ROOT, "node_modules/.bin/depcruise"), ["src", "--config", join(ROOT, ".dependency-cruiser.cjs"), ...args], { cwd, encoding: "utf8" });

  it("passes on src/ as it is, exactly as npm test runs it", () => {
    const r = depcruise(copyWith("clean", {}));
    expect(r.stdout).toContain("no dependency violations found");
    expect(r.status).toBe(0);
  });

  describe("with bad imports added", () => {
    let violations: Violation[];
    let status: number | null;
    beforeAll(() => {
      const copy = copyWith("bad", { ...Object.fromEntries(PROBES.map(([, file, text]) => [file, text])), ...CYCLE_PARTNER });
      violations = (JSON.parse(depcruise(copy, "--output-type", "json").stdout) as { summary: { violations: Violation[] } }).summary.violations;
      status = depcruise(copy).status;
    });

    it("fails the way npm test runs it", () => {
      expect(status).not.toBe(0);
    });

    it.each(PROBES)("fails on %s", (_what, file, _text, rule) => {
      expect([...new Set(violations.filter((v) => v.from === file).map((v) => v.rule.name))]).toEqual([rule]);
    });

    it("finds nothing else: every violation comes from a probe", () => {
      const probes = new Set([...PROBES.map(([, file]) => file), ...Object.keys(CYCLE_PARTNER)]);
      expect(violations.filter((v) => !probes.has(v.from))).toEqual([]);
    });
  });
});
