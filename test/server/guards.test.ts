import { describe, expect, it } from "vitest";
import { cookieValues, isLocalPeer, ServerAuth } from "../../src/server/auth.js";
import { checkExposure, checkTrustedHost, isLoopbackAddress } from "../../src/server/exposure.js";
import { applySecurityHeaders, CSP } from "../../src/server/headers.js";
import { checkHost, hostPolicy } from "../../src/server/host-check.js";
import { fetchSiteRefusal, originRefusal, ownOrigins } from "../../src/server/origin.js";
import { FailureLimiter } from "../../src/server/rate-limit.js";
import { UserConfigSchema } from "../../src/policy/config.js";

// Each guard of `vak serve`'s exposure policy alone, as a table; the whole
// server is tried in test/attacks/serve.test.ts.

const cfg = (server: Record<string, unknown>) => UserConfigSchema.parse({ server }).server;

describe("exposure (startup)", () => {
  it("binds loopback by default, with nothing trusted and no TLS", () => {
    expect(checkExposure(cfg({}))).toMatchObject({ bindHost: "127.0.0.1", loopback: true, trustedHosts: [], tls: "none", terminal: false, port: 0 });
  });
  it.each([
    [{ host: "0.0.0.0", tls_terminated_by_proxy: true }, "trusted_hosts is empty"],
    [{ host: "::", trusted_hosts: ["a.example"] }, "tls_cert"],
    [{ host: "192.168.1.5", trusted_hosts: ["a.example"] }, "tls_cert"],
    [{ host: "localhost" }, "IP address"],
    [{ host: "127.1" }, "IP address"],
    [{ trusted_hosts: ["*.example.com"] }, "wildcard"],
    [{ trusted_hosts: ["*"] }, "wildcard"],
    [{ trusted_hosts: ["http://a.example"] }, "URL"],
    [{ trusted_hosts: [".example.com"] }, "dot"],
    [{ trusted_hosts: ["a.example."] }, "dot"],
    [{ trusted_hosts: ["a b"] }, "not a host name"],
    [{ trusted_hosts: ["a.example:99999"] }, "port"],
    [{ tls_cert: "/c.pem" }, "both"],
  ])("%j is a startup error", (server, says) => {
    expect(() => checkExposure(cfg(server))).toThrow(says);
  });
  it("an exposed bind with names and a TLS statement starts; names are lower-cased", () => {
    const e = checkExposure(cfg({ host: "0.0.0.0", trusted_hosts: ["Vak.Example.com", "vak.example.com:8443"], tls_terminated_by_proxy: true }));
    expect(e).toMatchObject({ loopback: false, trustedHosts: ["vak.example.com", "vak.example.com:8443"], tls: "proxy" });
    expect(checkExposure(cfg({ host: "10.0.0.1", trusted_hosts: ["x.example"], tls_cert: "/c", tls_key: "/k" })).tls).toBe("self");
  });
  it("--port overrides the config's port", () => {
    expect(checkExposure(cfg({ port: 8080 }), 9090).port).toBe(9090);
  });
  it.each([["127.0.0.1", true], ["127.9.9.9", true], ["::1", true], ["::ffff:127.0.0.1", true], ["0.0.0.0", false], ["::", false], ["10.0.0.1", false], ["not an ip", false]])("%s loopback: %s", (a, yes) => {
    expect(isLoopbackAddress(a)).toBe(yes);
  });
  it("trusted host entries are exact names", () => {
    expect(checkTrustedHost("[::1]:8080")).toBe("[::1]:8080");
    expect(checkTrustedHost("192.168.1.5:8443")).toBe("192.168.1.5:8443");
  });
});

describe("the Host check", () => {
  const p = hostPolicy(4321, ["vak.example.com"], "http");
  const raw = (...hosts: string[]) => hosts.flatMap((h) => ["Host", h]);
  it.each([
    ["127.0.0.1:4321", true], ["localhost:4321", true], ["[::1]:4321", true], ["LocalHost:4321", true], ["vak.example.com", true],
    ["127.0.0.1", false], ["localhost:4322", false], ["127.1:4321", false], ["localhost.:4321", false], ["vak.example.com:4321", false],
    ["x.vak.example.com", false], ["vak.example.com.evil", false], ["", false], ["127.0.0.1:4321, evil", false],
  ])("Host %j answered: %s", (h, ok) => {
    expect(checkHost(p, raw(h), "/").ok).toBe(ok);
  });
  it("a loopback name is told apart from a trusted one", () => {
    expect(checkHost(p, raw("localhost:4321"), "/")).toMatchObject({ ok: true, loopbackName: true });
    expect(checkHost(p, raw("vak.example.com"), "/")).toMatchObject({ ok: true, loopbackName: false });
  });
  it("duplicate Host headers and none are refused, in any case of the name", () => {
    expect(checkHost(p, raw("127.0.0.1:4321", "127.0.0.1:4321"), "/").ok).toBe(false);
    expect(checkHost(p, ["host", "127.0.0.1:4321", "HOST", "evil"], "/").ok).toBe(false);
    expect(checkHost(p, [], "/").ok).toBe(false);
  });
  it.each(["http://evil/", "//evil/x", "evil.example:443", "*", "", undefined])("request target %j is refused", (t) => {
    expect(checkHost(p, raw("127.0.0.1:4321"), t)).toMatchObject({ ok: false, status: 400 });
  });
  it("a loopback bind of its own (127.0.0.2) answers to that address too, as a loopback name", () => {
    const q = hostPolicy(4321, [], "http", ["127.0.0.2"]);
    expect(checkHost(q, raw("127.0.0.2:4321"), "/")).toMatchObject({ ok: true, loopbackName: true });
    expect(checkHost(q, raw("127.0.0.3:4321"), "/").ok).toBe(false);
  });
  it("on the scheme's default port a browser's port-less Host is a loopback name", () => {
    expect(checkHost(hostPolicy(443, [], "https"), raw("localhost"), "/").ok).toBe(true);
    expect(checkHost(hostPolicy(80, [], "http"), raw("127.0.0.1"), "/").ok).toBe(true);
  });
});

describe("fetch metadata and Origin", () => {
  const own = ownOrigins(4321, ["vak.example.com"], "https", "http");
  it("our origins are the loopback names with our port, and each trusted host in the scheme the browser sees", () => {
    expect([...own].sort()).toEqual(["http://127.0.0.1:4321", "http://[::1]:4321", "http://localhost:4321", "https://vak.example.com"]);
  });
  it.each([["cross-site", true], ["same-site", true], ["Cross-Site", true], ["same-origin", false], ["none", false], [undefined, false]])("Sec-Fetch-Site %s refused: %s", (v, refused) => {
    expect(fetchSiteRefusal(v) !== undefined).toBe(refused);
  });
  it.each([
    ["POST", "http://attacker.example", "cookie", true],
    ["POST", undefined, "cookie", true],
    ["POST", "null", "cookie", true],
    ["POST", "http://127.0.0.1:4322", "cookie", true],
    ["POST", "https://127.0.0.1:4321", "cookie", true],
    ["POST", "http://127.0.0.1:4321", "cookie", false],
    ["POST", "https://vak.example.com", "cookie", false],
    ["POST", "http://vak.example.com", "cookie", true],
    ["POST", undefined, "bearer", false],
    ["POST", "http://attacker.example", "bearer", true],
    ["GET", undefined, "cookie", false],
    ["GET", "http://attacker.example", "cookie", true],
    ["HEAD", undefined, "cookie", false],
  ] as const)("%s with Origin %s by %s refused: %s", (method, origin, via, refused) => {
    expect(originRefusal(method, origin, via, own) !== undefined).toBe(refused);
  });
});

describe("authentication", () => {
  const auth = (now = () => 0) => new ServerAuth({ port: 4321, secure: false, token: "the-right-token", now, limiter: new FailureLimiter({ failures: 3, windowMs: 1000 }, now) });
  it("the bearer must match in full; any other Authorization is refused", () => {
    const a = auth();
    expect(a.authenticate({ authorization: "Bearer the-right-token", peer: "p" })).toEqual({ ok: true, via: "bearer" });
    for (const h of ["Bearer the-right-tokenx", "Bearer the-right-toke", "Basic dGhlLXJpZ2h0LXRva2Vu", "the-right-token", "Bearer ", "Bearer the-right-token extra"])
      expect(auth().authenticate({ authorization: h, peer: "p" }).ok, h).toBe(false);
  });
  it("a bad bearer with a good cookie is still refused: the bearer is the credential when there is one", () => {
    const a = auth();
    const c = a.newSession().split(";")[0]!;
    expect(a.authenticate({ cookie: c, peer: "p" }).ok).toBe(true);
    expect(a.authenticate({ authorization: "Bearer nope", cookie: c, peer: "p" }).ok).toBe(false);
  });
  it("tokens of any length are compared without throwing (both sides are hashed first)", () => {
    const a = auth();
    for (const t of ["", "x", "the-right-token", "y".repeat(10_000)]) expect(a.tokenMatches(t)).toBe(t === "the-right-token");
  });
  it("the cookie is HttpOnly, SameSite=Strict, per port, and Secure with __Host- under TLS", () => {
    expect(auth().newSession()).toMatch(/^vak_4321_[0-9a-f]{16}=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict$/);
    expect(new ServerAuth({ port: 443, secure: true }).newSession()).toMatch(/^__Host-vak_443_[0-9a-f]{16}=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Secure$/);
  });
  it("a session cookie ends at logout and after a day idle", () => {
    let t = 0;
    const a = auth(() => t);
    const c = a.newSession().split(";")[0]!;
    expect(a.authenticate({ cookie: c, peer: "p" }).ok).toBe(true);
    t += 25 * 3_600_000;
    expect(a.authenticate({ cookie: c, peer: "p" }).ok).toBe(false);
    const d = a.newSession().split(";")[0]!;
    a.endSession(d);
    expect(a.authenticate({ cookie: d, peer: "p" }).ok).toBe(false);
  });
  it("failures lock out that kind of credential from that peer only, the right one too, until the window passes", () => {
    let t = 0;
    const a = auth(() => t);
    for (let i = 0; i < 3; i++) expect(a.authenticate({ authorization: "Bearer bad", peer: "p" })).toMatchObject({ ok: false, status: 401 });
    expect(a.authenticate({ authorization: "Bearer the-right-token", peer: "p" })).toMatchObject({ ok: false, status: 429 });
    expect(a.authenticate({ authorization: "Bearer the-right-token", peer: "q" }).ok).toBe(true);
    const c = a.newSession().split(";")[0]!;
    expect(a.authenticate({ cookie: c, peer: "p" }).ok).toBe(true);
    t += 1001;
    expect(a.authenticate({ authorization: "Bearer the-right-token", peer: "p" }).ok).toBe(true);
  });
  it("the local peers are this machine's loopback sources only", () => {
    for (const [a, yes] of [["127.0.0.1", true], ["::1", true], ["::ffff:127.0.0.1", true], ["127.0.0.2", false], ["10.0.0.1", false], [undefined, false]] as const) expect(isLocalPeer(a)).toBe(yes);
  });
  it("every value of the cookie's name is read (a sibling may have set one under another path)", () => {
    expect(cookieValues("a=1; vak_1=x; vak_1=y; vak_10=z", "vak_1")).toEqual(["x", "y"]);
    expect(cookieValues(undefined, "vak_1")).toEqual([]);
  });
});

describe("security headers", () => {
  it("set every one, and take away any CORS header a route set", () => {
    const h = new Map<string, string>([["access-control-allow-origin", "*"], ["access-control-allow-credentials", "true"]]);
    applySecurityHeaders((k, v) => h.set(k.toLowerCase(), v), (k) => h.delete(k.toLowerCase()));
    expect(h.get("content-security-policy")).toBe(CSP);
    expect(h.get("x-content-type-options")).toBe("nosniff");
    expect(h.has("access-control-allow-origin")).toBe(false);
    expect(h.has("access-control-allow-credentials")).toBe(false);
    expect(CSP).toContain("frame-ancestors 'none'");
    expect(CSP).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
  });
});
