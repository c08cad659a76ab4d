import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testInternet, type TestInternet } from "../support/netns.js";
import { testCa, type TestCa } from "../support/tls.js";

// The agent CLI presets pass no provider key by name: --profile codex or gemini
// with the key given as --secret NAME=REF@HOST shows the sandbox a placeholder
// (in its environment and /proc/self/environ), and the gate puts the key in
// the request to the provider's host only. The provider is a server in a test
// network namespace under its own host name, signed by the test's CA; the
// clients send the header the CLIs send (Codex: a bearer token, Gemini CLI:
// x-goog-api-key).
describe("agent CLI presets and provider keys", () => {
  let net: TestInternet;
  let ca: TestCa;
  let home: string;
  const KEY = "host-held-preset-key-1029384756";
  const HOSTS = ["api.openai.com", "generativelanguage.googleapis.com"];
  beforeAll(async () => {
    ca = await testCa();
    net = await testInternet(Object.fromEntries(HOSTS.map((h) => [h, "11.0.0.2"])), [80], [], [{ port: 443, ...(await ca.issue(HOSTS)) }]);
    mkdirSync(join(net.dir, "ws"));
    // A home of the test's own: the presets create the CLIs' state directories in it.
    home = mkdtempSync(join(tmpdir(), "vak-agent-keys-"));
  }, 60_000);
  afterAll(() => {
    net?.close();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const CASES = [
    { profile: "codex", name: "CODEX_API_KEY", host: "api.openai.com", request: `fetch("https://api.openai.com/v1/responses", { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer " + process.env.CODEX_API_KEY }, body: JSON.stringify({ model: "gpt-test", input: "ping" }) })` },
    { profile: "gemini", name: "GEMINI_API_KEY", host: "generativelanguage.googleapis.com", request: `fetch("https://generativelanguage.googleapis.com/v1beta/models/gemini-test:generateContent", { method: "POST", headers: { "content-type": "application/json", "x-goog-api-key": process.env.GEMINI_API_KEY }, body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "ping" }] }] }) })` },
  ];

  for (const c of CASES)
    it(`${c.profile}: the key given with --secret ${c.name}=env:X@${c.host} is a placeholder inside, in env and /proc/self/environ, and reaches only the provider`, async () => {
      const before = net.log().length;
      const r = await net.vak(
        ["exec", "--profile", c.profile, "--ca-file", ca.file, "--secret", `${c.name}=env:PROVIDER_KEY@${c.host}`, "--", "/bin/sh", "-c",
          `echo "env: $${c.name}"; cat /proc/self/environ | tr '\\0' '\\n' | grep '^${c.name}='; node -e '${c.request}.then((r) => console.log("status", r.status), (e) => console.log("failed", e.message))'`],
        { PROVIDER_KEY: KEY, HOME: home },
      );
      expect(r.stdout, r.stderr).toMatch(/env: vak-placeholder-[0-9a-f]{24}\n/);
      expect(r.stdout).toMatch(new RegExp(`^${c.name}=vak-placeholder-[0-9a-f]{24}$`, "m"));
      expect(r.stdout).toContain("status 200");
      expect(r.stdout + r.stderr).not.toContain(KEY);
      const seen = net.log().slice(before).join("\n");
      expect(seen).toContain(`host=${c.host} sni=${c.host}`);
      expect(seen).toMatch(new RegExp(`(auth=Bearer |key=)${KEY} `));
    }, 60_000);

  it("codex and gemini: the key in the host's environment is not passed by the preset, and --allow-env of it is refused", async () => {
    for (const c of CASES) {
      const r = await net.vak(["exec", "--profile", c.profile, "--", "/bin/sh", "-c", `echo "env: [$${c.name}]"`], { [c.name]: KEY, HOME: home });
      expect(r.stdout, r.stderr).toContain("env: []");
      const refused = await net.vak(["exec", "--profile", c.profile, "--allow-env", c.name, "--", "true"], { [c.name]: KEY, HOME: home });
      expect(refused.code).toBe(125);
      expect(refused.stderr).toContain(`--allow-env ${c.name} is refused, since ${c.name} is the environment variable of a model provider's key`);
      expect(refused.stdout + refused.stderr).not.toContain(KEY);
    }
  }, 60_000);
});
