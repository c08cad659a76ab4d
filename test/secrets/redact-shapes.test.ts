import { describe, expect, it } from "vitest";
import { REDACTED, Redactor } from "../../src/secrets/redact.js";

// The redactor scans for a shape's opening word before it tries the shapes themselves:
// every shape must still be caught, in any case the pattern allows, anywhere in a text.
describe("credential shapes after the quick scan", () => {
  const r = new Redactor();
  const cases: [string, string][] = [
    ["OpenAI", "sk-proj-abcdefghijklmnopqrstuvwxyz012345"],
    ["Anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"],
    ["GitHub", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
    ["GitHub server", "ghs_abcdefghijklmnopqrstuvwxyz0123456789"],
    ["GitHub PAT", `github_pat_${"a1_".repeat(15)}`],
    ["GitLab", "glpat-abcdefghijklmnopqrstuvwxyz"],
    ["Slack", "xoxb-1234567890-abcdef"],
    ["AWS", "AKIAIOSFODNN7EXAMPLE"],
    ["AWS session", "ASIAIOSFODNN7EXAMPLE"],
    ["Google", `AIza${"b".repeat(35)}`],
    ["npm", `npm_${"c".repeat(36)}`],
    ["JWT", "eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJlX18"],
    ["Bearer", "BEARER abcdefghijklmnop"],
    ["Basic", "basic dXNlcjpwYXNzd29yZA=="],
    ["Authorization header", "Authorization: abcdefghijkl"],
    ["x-api-key", '"X-API-KEY": "abcdefghijkl"'],
    ["api_key", "API_KEY=abcdefghijkl"],
    ["proxy-authorization", "Proxy-Authorization=abcdefghijkl"],
    ["password", "PASSWORD=hunter22"],
    ["passwd", '"passwd": "hunter22"'],
    ["secret", "Secret: hunter22"],
    ["token", "token=hunter22"],
    ["URL credentials", "https://user:hunter22@example.test/"],
  ];
  for (const [name, text] of cases)
    it(`${name} is redacted, alone and inside other text`, () => {
      expect(r.text(text)).toContain(REDACTED);
      const inside = r.text(`before ${text} after`);
      expect(inside).toContain(REDACTED);
      expect(inside.startsWith("before ")).toBe(true);
    });

  it("text with no shape's opening word comes back unchanged (the same string)", () => {
    const s = '{"op":"read","path":"/workspace/src/index.ts","digest":"' + "a".repeat(64) + '"}';
    expect(r.text(s)).toBe(s);
  });

  // --print-plan and errors show a secret as NAME=REF: the reference says where the value comes from, and is not it.
  it("a secret's reference after a credential's name is left as it is; a value there is still redacted", () => {
    for (const ref of ["GITHUB_TOKEN=env:GITHUB_TOKEN", "QA_TOKEN=env:QA_HOST_SECRET", "DB_PASSWORD=cmd:db-pass", "API_SECRET=secret:api.prod", "X_TOKEN=env:X_TOKEN@api.example.com", "API_KEY=env:OPENAI_API_KEY", 'token: "env:GH_TOKEN"', "(e.g. GITHUB_TOKEN=secret:github)"])
      expect(r.text(`  ${ref}   --secret`), ref).toBe(`  ${ref}   --secret`);
    for (const value of ["GITHUB_TOKEN=hunter22hunter22", "QA_TOKEN=env:abc/def", "DB_PASSWORD=cmd:x!y-hunter22", "token=envy:hunter22", "API_KEY=secret-hunter22"])
      expect(r.text(value), value).toContain(REDACTED);
  });
});
