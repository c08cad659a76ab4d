import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_RECIPES, type AgentRecipe, cliArgs, execArgs } from "../../src/net/agent-recipes.js";
import { endpointUrl, parseEndpoint } from "../../src/net/endpoint.js";
import { AGENT_CLIS, AGENT_CLIS_REAL, agentCliInstalled, requireAgentClis } from "../support/agent-clis.js";
import { testInternet, type TestInternet } from "../support/netns.js";
import { testCa, type TestCa } from "../support/tls.js";

// The real agent CLIs, from npm at the versions the recipes name, inside
// `vak exec` with only their API host granted and their key held by the gate,
// against a server in a test network namespace that speaks each provider's
// wire shape (streamed) under the provider's own host name. .ci/run installs
// them (npm, about 600 MB) into .cache/agent-clis; elsewhere, where they are
// not installed, these tests are skipped and say so (under .ci/run, which sets
// VAK_AGENT_CLIS_REQUIRED, a missing one fails instead).
const WHERE = AGENT_CLIS;
const installed = Object.values(AGENT_RECIPES).every((r) => agentCliInstalled(r.cli));
// The grant is canonical: the sandbox sees the directory at its real path.
const CLIS = AGENT_CLIS_REAL;
requireAgentClis(Object.values(AGENT_RECIPES).map((r) => r.cli));

describe.skipIf(!installed)(`the real agent CLIs (installed in ${WHERE})`, () => {
  let net: TestInternet;
  let ca: TestCa;
  const KEY = "host-held-cli-key-5647382910";
  const hostNames = Object.values(AGENT_RECIPES).flatMap((r) => r.hosts);

  beforeAll(async () => {
    ca = await testCa();
    net = await testInternet(Object.fromEntries(hostNames.map((h) => [h, "11.0.0.2"])), [80], [], [{ port: 443, ...(await ca.issue(hostNames)) }]);
    mkdirSync(join(net.dir, "ws"));
  }, 60_000);
  afterAll(() => net?.close());

  const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const script = (r: AgentRecipe, endpoint: boolean) => {
    const url = endpoint ? endpointUrl(parseEndpoint(`${r.baseUrlEnv}=${r.baseUrl}`)) : undefined;
    const files = Object.entries(r.homeFiles ?? {}).map(([f, c]) => `mkdir -p "$HOME/$(dirname ${q(f)})" && printf %s ${q(c)} > "$HOME/"${q(f)}`);
    const quiet = Object.entries(r.quietEnv ?? {}).map(([k, v]) => `export ${k}=${q(v)}`);
    return [...files, ...quiet, `timeout 90 ${q(join(CLIS, "node_modules/.bin", r.cli))} ${cliArgs(r, "ping", { endpointUrl: url }).map(q).join(" ")} < /dev/null`, `echo "exit $?"`, `echo "inside: $${r.keyEnv}"`].join("\n");
  };

  for (const [name, recipe] of Object.entries(AGENT_RECIPES))
    for (const endpoint of [true, false])
      it(`${name} ${recipe.tested}: ${endpoint ? "through an endpoint" : "over terminated TLS"}, the key held by the gate`, async () => {
        const before = net.log().length;
        const r = await net.vak(["exec", "--ca-file", ca.file, "--allow-read", CLIS, ...execArgs(recipe, "env:PROVIDER_KEY", { endpoint }), "--", "/bin/sh", "-c", script(recipe, endpoint)], { PROVIDER_KEY: KEY });
        if (process.env.TLS_DEBUG) console.log(r.stdout.slice(-3000), r.stderr.slice(-3000));
        expect(r.stdout).toContain("pong from the test provider");
        expect(r.stdout).toMatch(/inside: vak-placeholder-[0-9a-f]{24}/);
        expect(r.stdout + r.stderr).not.toContain(KEY);
        const seen = net.log().slice(before).join("\n");
        expect(seen).toContain(`host=${recipe.hosts[0]} sni=${recipe.hosts[0]}`);
        expect(seen).toMatch(new RegExp(`(auth=Bearer |key=)${KEY} `));
      }, 150_000);
});
