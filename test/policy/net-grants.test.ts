import { describe, expect, it } from "vitest";
import { canonicalHost } from "../../src/policy/address.js";
import { decideDestination, parseNetGrants, parseNetRule } from "../../src/policy/net-grants.js";

const decide = (allow: string[], deny: string[], host: string, port: number, method = "GET") =>
  decideDestination(parseNetGrants(allow, deny), canonicalHost(host), port, method);

describe("network grants", () => {
  it.each([
    // [allow, deny, host, port, method, allowed]
    [[], [], "example.com", 443, "GET", false],
    [["example.com"], [], "example.com", 443, "GET", true],
    [["example.com"], [], "example.com", 80, "POST", true],
    [["example.com"], [], "example.com", 8443, "GET", false],
    [["example.com:8443"], [], "example.com", 8443, "GET", true],
    [["example.com:8443"], [], "example.com", 443, "GET", false],
    [["example.com:*"], [], "example.com", 22, "GET", true],
    [["EXAMPLE.com."], [], "example.com", 443, "GET", true],
    [["example.com"], [], "www.example.com", 443, "GET", false],
    [["*.example.com"], [], "api.example.com", 443, "GET", true],
    [["*.example.com"], [], "a.b.example.com", 443, "GET", true],
    [["*.example.com"], [], "example.com", 443, "GET", false],
    [["*.example.com"], [], "evilexample.com", 443, "GET", false],
    [["*.example.com"], ["secret.example.com"], "secret.example.com", 443, "GET", false],
    [["example.com"], ["example.com:80"], "example.com", 80, "GET", false],
    [["example.com"], ["example.com:80"], "example.com", 443, "GET", true],
    [["127.0.0.1:8080"], [], "127.1", 8080, "GET", true],
    [["127.0.0.1:8080"], [], "2130706433", 8080, "GET", true],
    [["127.0.0.1:8080"], [], "[::ffff:127.0.0.1]", 8080, "GET", true],
    [["127.0.0.1:8080"], [], "localhost", 8080, "GET", false],
    [["read:example.com"], [], "example.com", 80, "GET", true],
    [["read:example.com"], [], "example.com", 80, "HEAD", true],
    [["read:example.com"], [], "example.com", 80, "OPTIONS", true],
    [["read:example.com"], [], "example.com", 80, "POST", false],
    [["read:example.com"], [], "example.com", 80, "DELETE", false],
    // A tunnel under a read-only grant is allowed only to be terminated (inspect, below): each request inside is decided again.
    [["read:example.com"], [], "example.com", 443, "CONNECT", true],
    [["read:example.com", "example.com"], [], "example.com", 443, "CONNECT", true],
    // A deny rule without a port covers every port, not just the web ports.
    [["example.com:*"], ["example.com"], "example.com", 8080, "GET", false],
    [["example.com:*"], ["example.com"], "example.com", 22, "CONNECT", false],
    [["198.51.99.7:*"], ["198.51.99.7"], "198.51.99.7", 9000, "GET", false],
    // The unspecified addresses are loopback: a deny of 127.0.0.1 (or ::1) covers them in every spelling.
    [["0.0.0.0:8080"], ["127.0.0.1"], "0.0.0.0", 8080, "GET", false],
    [["0:8080"], ["127.0.0.1"], "0", 8080, "GET", false],
    [["0x0:8080"], ["127.1"], "0.0", 8080, "GET", false],
    [["[::]:8080"], ["[::1]"], "[::]", 8080, "GET", false],
    [["[::ffff:0.0.0.0]:8080"], ["127.0.0.1"], "[::ffff:0:0]", 8080, "GET", false],
    [["127.0.0.1:8080"], ["0.0.0.0"], "127.0.0.1", 8080, "GET", false],
    [["0.0.0.0:8080"], [], "127.0.0.1", 8080, "GET", true],
    [["127.0.0.1:8080"], [], "0.0.0.0", 8080, "GET", true],
    [["[::1]:8080"], [], "[::]", 8080, "GET", true],
  ] as const)("allow %j deny %j: %s %s:%d → %s", (allow, deny, host, port, method, allowed) => {
    expect(decide([...allow], [...deny], host, port, method).allowed).toBe(allowed);
  });

  it("says which rule refused and how to grant", () => {
    const d = decide(["example.com"], [], "evil.example.net", 443);
    expect(d.allowed).toBe(false);
    if (!d.allowed) expect(d.reason).toBe("no grant names evil.example.net:443; grant it with --allow-net evil.example.net");
    const w = decide(["read:example.com"], [], "example.com", 80, "PUT");
    if (!w.allowed) expect(w.reason).toContain("PUT is a write");
  });

  it("a CONNECT is terminated (inspect) where a grant is read-only or names a path, and spliced where one covers every method and path", () => {
    expect(decide(["read:example.com"], [], "example.com", 443, "CONNECT")).toMatchObject({ allowed: true, inspect: true });
    expect(decide(["example.com/repos/acme/*"], [], "example.com", 443, "CONNECT")).toMatchObject({ allowed: true, inspect: true });
    expect(decide(["read:example.com", "example.com"], [], "example.com", 443, "CONNECT")).not.toHaveProperty("inspect");
  });

  it.each([
    // [allow, path, method, allowed]
    [["example.com/repos/acme/*"], "/repos/acme", "GET", true],
    [["example.com/repos/acme/*"], "/repos/acme/x/y", "POST", true],
    [["example.com/repos/acme"], "/repos/acme/x", "GET", true],
    [["example.com/repos/acme/*"], "/repos/acmeevil", "GET", false],
    [["example.com/repos/acme/*"], "/repos", "GET", false],
    [["example.com/repos/acme/*"], undefined, "GET", false],
    [["read:example.com/docs/*"], "/docs/a", "GET", true],
    [["read:example.com/docs/*"], "/docs/a", "POST", false],
    [["read:example.com/docs/*", "example.com/api/*"], "/api/x", "POST", true],
    [["read:example.com/docs/*", "example.com/api/*"], "/docs/x", "POST", false],
  ] as const)("path grants %j: %s %s → %s", (allow, path, method, allowed) => {
    expect(decideDestination(parseNetGrants([...allow]), canonicalHost("example.com"), 443, method, path).allowed).toBe(allowed);
  });

  it.each([
    ["*", /every host/],
    ["example.com/a*b", /final/],
    ["example.com/a?x=1", /query/],
    ["example.com/a%2Fb", /encoded slash/],
    ["*.com", /top-level domain/],
    ["*.127.0.0.1", /cannot cover IP/],
    ["exa*mple.com", /leading/],
    ["example.com:99999", /bad port/],
    ["user@example.com", /userinfo/],
    ["::1", /brackets/],
  ])("refuses the grant %s", (text, message) => {
    expect(() => parseNetRule(text)).toThrow(message);
  });

  it("refuses a path in a deny rule, which covers a whole host", () => {
    expect(() => parseNetGrants([], ["example.com/x"])).toThrow(/whole host/);
  });
});
