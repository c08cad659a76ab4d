import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_RECIPES, execArgs } from "../../src/net/agent-recipes.js";
import { testInternet, type TestInternet } from "../support/netns.js";
import { ROOT } from "../support/paths.js";
import { testCa, type TestCa } from "../support/tls.js";

// Each recipe inside `vak exec`, both ways (terminated TLS, and an endpoint),
// against a server in a test network namespace that speaks the provider's
// wire shape under the provider's own host name, signed by the test's CA. The
// clients are scripted with the providers' own SDKs (Anthropic, OpenAI) and, for
// Gemini, the request its SDK sends; they read the same variables the CLIs do.
describe("agent CLI recipes with host-held keys", () => {
  let net: TestInternet;
  let ca: TestCa;
  const KEY = "host-held-provider-key-9876543210";
  const hostNames = Object.values(AGENT_RECIPES).flatMap((r) => r.hosts);

  beforeAll(async () => {
    ca = await testCa();
    const cert = await ca.issue(hostNames);
    net = await testInternet(Object.fromEntries(hostNames.map((h) => [h, "11.0.0.2"])), [80], [], [{ port: 443, ...cert }]);
    mkdirSync(join(net.dir, "ws"));
  }, 60_000);
  afterAll(() => net?.close());

  const CLIENTS: Record<keyof typeof AGENT_RECIPES, string> = {
    claude: `const A = require("${ROOT}node_modules/@anthropic-ai/sdk"); const c = new (A.default ?? A.Anthropic)();
      c.messages.create({ model: "claude-test", max_tokens: 16, messages: [{ role: "user", content: "ping" }] }).then((m) => console.log("reply:", m.content[0].text), (e) => console.log("failed:", e.message));`,
    codex: `const O = require("${ROOT}node_modules/openai"); const c = new (O.default ?? O.OpenAI)({ apiKey: process.env.CODEX_API_KEY });
      c.responses.create({ model: "gpt-test", input: "ping" }).then((r) => console.log("reply:", r.output_text), (e) => console.log("failed:", e.message));`,
    gemini: `const base = process.env.GOOGLE_GEMINI_BASE_URL || "https://generativelanguage.googleapis.com";
      fetch(base + "/v1beta/models/gemini-test:generateContent", { method: "POST", headers: { "content-type": "application/json", "x-goog-api-key": process.env.GEMINI_API_KEY }, body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "ping" }] }] }) })
        .then((r) => r.json()).then((j) => console.log("reply:", j.candidates[0].content.parts[0].text), (e) => console.log("failed:", e.cause?.message ?? e.message));`,
  };

  for (const [name, recipe] of Object.entries(AGENT_RECIPES) as [keyof typeof AGENT_RECIPES, (typeof AGENT_RECIPES)[keyof typeof AGENT_RECIPES]][])
    for (const endpoint of [false, true])
      it(`${name}: ${endpoint ? "through an endpoint (no CA inside)" : "over terminated TLS"}, the key held by the gate and a placeholder inside`, async () => {
        const before = net.log().length;
        const r = await net.vak(
          ["exec", "--ca-file", ca.file, "--allow-read", `${ROOT}node_modules`, ...execArgs(recipe, "env:PROVIDER_KEY", { endpoint }), "--", "/bin/sh", "-c",
            `echo "inside: $${recipe.keyEnv}"; node -e '${CLIENTS[name].replace(/'/g, "'\\''")}'`],
          { PROVIDER_KEY: KEY },
        );
        expect(r.stdout).toMatch(new RegExp(`inside: vak-placeholder-[0-9a-f]{24}`));
        expect(r.stdout).toContain("reply: pong from the test provider");
        expect(r.stdout + r.stderr).not.toContain(KEY);
        const seen = net.log().slice(before).join("\n");
        expect(seen).toContain(`host=${recipe.hosts[0]} sni=${recipe.hosts[0]}`);
        // The gate replaces the placeholder in whichever header the client put it (the Anthropic SDK sends it as a bearer token).
        expect(seen).toMatch(new RegExp(`(auth=Bearer |key=)${KEY} `));
      });
});
