import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webFetch, WebFetchError } from "../../src/net/fetch.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import { loopbackOnly, upstream, type Upstream } from "../support/net.js";

describe("webFetch: the host's own fetches under the gate's rules", () => {
  let up: Upstream;
  let hang: Server;
  let hangPort = 0;
  const names: Record<string, string[]> = { "site.test": ["127.0.0.1"], "meta.test": ["169.254.169.254"] };
  const resolver = async (n: string) => names[n] ?? Promise.reject(Object.assign(new Error("nx"), { code: "ENOTFOUND" }));
  beforeAll(async () => {
    up = await upstream((req) => {
      if (req.url === "/to-meta") return { status: 302, headers: { location: "http://meta.test/latest/" } };
      if (req.url === "/to-ip-meta") return { status: 301, headers: { location: "http://169.254.169.254/" } };
      if (req.url === "/to-site") return { status: 307, headers: { location: `http://site.test:${up.port}/landed` } };
      if (req.url === "/big") return { status: 200, body: "x".repeat(100_000) };
      if (req.url === "/echo-auth") return { status: 200, body: String(req.headers.authorization ?? "none") };
      if (req.url === "/echo-headers") return { status: 200, body: JSON.stringify(req.headers) };
      if (req.url === "/cross-headers") return { status: 302, headers: { location: `http://127.0.0.1:${up.port}/echo-headers` } };
      if (req.url === "/cross") return { status: 302, headers: { location: `http://127.0.0.1:${up.port}/echo-auth` } };
      return undefined;
    });
    hang = createServer(() => {});
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", () => r()));
    hangPort = (hang.address() as { port: number }).port;
  });
  afterAll(async () => {
    await up.close();
    hang.closeAllConnections();
    hang.close();
  });

  const policy = () => parseNetGrants([`site.test:${up.port}`, `127.0.0.1:${up.port}`, `127.0.0.1:${hangPort}`, "meta.test"]);

  it("fetches a granted URL from the address that was checked", async () => {
    const hook = loopbackOnly();
    const r = await webFetch(`http://site.test:${up.port}/page`, { grants: policy(), resolver, connect: hook.fn, ownAddresses: new Set() });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("ok GET /page\n");
    expect(hook.calls).toEqual([`127.0.0.1:${up.port}`]);
  });

  it("re-checks every redirect hop: a hop to the metadata service is refused before it connects", async () => {
    for (const path of ["/to-meta", "/to-ip-meta"]) {
      const hook = loopbackOnly();
      const err = await webFetch(`http://site.test:${up.port}${path}`, { grants: policy(), resolver, connect: hook.fn, ownAddresses: new Set() }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WebFetchError);
      expect((err as WebFetchError).hops).toHaveLength(2);
      expect(hook.calls).toEqual([`127.0.0.1:${up.port}`]);
    }
  });

  it("follows a redirect to a granted place", async () => {
    const r = await webFetch(`http://127.0.0.1:${up.port}/to-site`, { grants: policy(), resolver, connect: loopbackOnly().fn, ownAddresses: new Set() });
    expect(r.body.toString()).toBe("ok GET /landed\n");
    expect(r.hops).toHaveLength(2);
  });

  it("drops credentials when a redirect changes origin", async () => {
    const r = await webFetch(`http://site.test:${up.port}/cross`, { grants: policy(), resolver, connect: loopbackOnly().fn, ownAddresses: new Set(), headers: { Authorization: "Bearer keep-me-home" } });
    expect(r.body.toString()).toBe("none");
  });

  it("sends only plainly safe headers across origins: every credential name (X-Api-Key, Private-Token, ...) stays home", async () => {
    const headers = { Authorization: "Bearer a", "X-Api-Key": "SECRET-KEY", "Private-Token": "GL-TOKEN", "X-Custom-Auth": "c", Accept: "text/plain", "User-Agent": "vak-test" };
    const r = await webFetch(`http://site.test:${up.port}/cross-headers`, { grants: policy(), resolver, connect: loopbackOnly().fn, ownAddresses: new Set(), headers });
    const got = JSON.parse(r.body.toString()) as Record<string, string>;
    expect(got).toMatchObject({ accept: "text/plain", "user-agent": "vak-test" });
    for (const h of ["authorization", "x-api-key", "private-token", "x-custom-auth"]) expect(got).not.toHaveProperty(h);
  });

  it("bounds the body", async () => {
    const r = await webFetch(`http://site.test:${up.port}/big`, { grants: policy(), resolver, connect: loopbackOnly().fn, ownAddresses: new Set(), maxBytes: 1000 });
    expect(r.body.length).toBe(1000);
    expect(r.truncated).toBe(true);
  });

  it("bounds the time", async () => {
    const started = Date.now();
    const err = await webFetch(`http://127.0.0.1:${hangPort}/`, { grants: policy(), resolver, connect: loopbackOnly().fn, ownAddresses: new Set(), timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WebFetchError);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("separates reads from writes", async () => {
    const hook = loopbackOnly();
    const read = parseNetGrants([`read:site.test:${up.port}`, `read:127.0.0.1:${up.port}`]);
    expect((await webFetch(`http://site.test:${up.port}/r`, { grants: read, resolver, connect: hook.fn, ownAddresses: new Set() })).status).toBe(200);
    const err = await webFetch(`http://site.test:${up.port}/w`, { grants: read, resolver, connect: hook.fn, ownAddresses: new Set(), method: "POST", body: "x" }).catch((e: unknown) => e);
    expect(String(err)).toContain("POST is a write");
    const withBody = await webFetch(`http://site.test:${up.port}/g`, { grants: read, resolver, connect: hook.fn, ownAddresses: new Set(), method: "GET", body: "data" }).catch((e: unknown) => e);
    expect(String(withBody)).toContain("a request body is a write, whatever its method; the grant read:site.test");
    // An override header asks many servers for a write: decided as the gate decides it (intentRefusal).
    const override = await webFetch(`http://site.test:${up.port}/o`, { grants: read, resolver, connect: hook.fn, ownAddresses: new Set(), headers: { "X_HTTP_Method_Override": "DELETE" } }).catch((e: unknown) => e);
    expect(String(override)).toContain("X_HTTP_Method_Override: DELETE asks the server for DELETE, a write");
    expect(hook.calls).toHaveLength(1);
  });

  it.each(["file:///etc/passwd", "http://user@site.test/", "http://site.test\\@evil.test/", "gopher://site.test/"])("refuses %s", async (url) => {
    const hook = loopbackOnly();
    await expect(webFetch(url, { grants: policy(), resolver, connect: hook.fn, ownAddresses: new Set() })).rejects.toBeInstanceOf(WebFetchError);
    expect(hook.calls).toEqual([]);
  });
});
