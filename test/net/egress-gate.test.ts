import { createSocket } from "node:dgram";
import { closeSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { connect, createServer as createNetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendClient, socketFd } from "../../src/net/engine.js";
import { EgressGate, type EgressEvent } from "../../src/net/egress-gate.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import { gateClient, loopbackOnly, rawGate, statusOf, testGate, until, upstream, type Upstream } from "../support/net.js";

// The gate in-process, driven over its unix socket exactly as the relay does.
// Names resolve through a table, and the upstream connector refuses anything
// but loopback before a socket opens: no packet can leave this machine.
describe("egress gate", () => {
  let dir: string;
  let gate: EgressGate;
  let up: Upstream;
  let token: string;
  let readToken: string;
  const events: EgressEvent[] = [];
  const hook = loopbackOnly();
  const names: Record<string, string[]> = {
    "granted.test": ["127.0.0.1"],
    "loop.test": ["127.0.0.1"],
    "meta.test": ["169.254.169.254"],
    "private.test": ["10.0.0.7"],
    "mixed.test": ["10.0.0.7", "127.0.0.1"],
    "public.test": ["93.184.216.34"],
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "vak-gate-test-"));
    up = await upstream((req) => (req.url === "/redirect-meta" ? { status: 302, headers: { location: "http://169.254.169.254/latest/meta-data/" } } : undefined));
    gate = new EgressGate({
      dir: join(dir, "s"),
      resolver: async (name) => {
        const a = names[name];
        if (!a) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
        return a;
      },
      connect: hook.fn,
      ownAddresses: new Set(),
      onEvent: (e) => events.push(e),
      limits: { connectionsPerWorker: 4, headerBytes: 4096 },
    });
    await gate.listen();
    const P = up.port;
    token = gate.register({ component: "web", generation: 1, grants: parseNetGrants([`granted.test:${P}`, `127.0.0.1:${P}`, `loop.test:${P}`, `meta.test:*`, `private.test:*`, `mixed.test:*`]) });
    readToken = gate.register({ component: "reader", generation: 1, grants: parseNetGrants([`read:granted.test:${P}`, `read:127.0.0.1:${P}`]) });
  });
  afterAll(async () => {
    await gate.close();
    await up.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = (tok: string | null, url: string, host: string, method = "GET", extra = "") =>
    rawGate(gate.socketPath, tok, `${method} ${url} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n${extra}\r\n`);

  describe("worker identity", () => {
    it("a request without a token gets 407", async () => {
      const r = await get(null, `http://127.0.0.1:${up.port}/`, `127.0.0.1:${up.port}`);
      expect(statusOf(r)).toBe(407);
    });

    it("an unknown token gets 407", async () => {
      const r = await get("0".repeat(32), `http://127.0.0.1:${up.port}/`, `127.0.0.1:${up.port}`);
      expect(statusOf(r)).toBe(407);
    });

    it("a token from another session's gate gets 407", async () => {
      const other = new EgressGate({ dir: join(dir, "other"), onEvent: () => {}, connect: hook.fn });
      await other.listen();
      const foreign = other.register({ component: "x", generation: 1, grants: parseNetGrants([`127.0.0.1:${up.port}`]) });
      try {
        expect(statusOf(await get(foreign, `http://127.0.0.1:${up.port}/`, `127.0.0.1:${up.port}`))).toBe(407);
      } finally {
        await other.close();
      }
    });

    it("a token from an older policy generation is refused, and its open tunnels closed", async () => {
      const g = new EgressGate({ dir: join(dir, "gen"), onEvent: () => {}, connect: hook.fn });
      await g.listen();
      const old = g.register({ component: "x", generation: 1, grants: parseNetGrants([`127.0.0.1:${up.port}`]) });
      const s = await gateClient(g.socketPath, old, { allowHalfOpen: false });
      s.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
      await new Promise((r) => s.once("data", r));
      const closed = new Promise((r) => s.on("close", r));
      g.setGeneration(2);
      await closed;
      expect(statusOf(await rawGate(g.socketPath, old, `GET http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`))).toBe(407);
      await g.close();
    });

    it("a relay message whose fd is not a connected TCP socket is refused, recorded and closed", async () => {
      const file = openSync("/dev/null", "r");
      const listening = createNetServer();
      await new Promise<void>((r) => listening.listen(0, "127.0.0.1", () => r()));
      const unixDir = mkdtempSync(join(tmpdir(), "vak-gate-unix-"));
      const unixServer = createNetServer((c) => c.destroy());
      await new Promise<void>((r) => unixServer.listen(join(unixDir, "s"), () => r()));
      const unix = connect(join(unixDir, "s"));
      await new Promise((r) => unix.once("connect", r));
      const udp = createSocket("udp4");
      await new Promise<void>((r) => udp.bind(0, "127.0.0.1", () => r()));
      const udpFd = (udp as unknown as { _handle: { fd: number } })._handle.fd;
      const cases: [string, number, RegExp][] = [
        ["a file", file, /not a socket/],
        ["a listening socket", socketFd(listening as unknown as Socket), /listening/],
        ["a unix socket", socketFd(unix), /not an inet socket/],
        ["a UDP socket", udpFd, /not a stream socket/],
        ["no fd at all", -1, /exactly one fd/],
      ];
      try {
        for (const [what, fd, reason] of cases) {
          const before = events.length;
          sendClient(gate.socketPath, `VAK-TOKEN ${token}`, fd);
          await until(() => events.length > before, `the refusal of ${what}`);
          expect(events.at(-1), what).toMatchObject({ decision: "denied", code: "relay-message", reason: expect.stringMatching(reason) });
        }
        // And the gate still serves.
        expect(statusOf(await get(token, `http://granted.test:${up.port}/after`, `granted.test:${up.port}`))).toBe(200);
      } finally {
        closeSync(file);
        listening.close();
        unix.destroy();
        unixServer.close();
        udp.close();
        rmSync(unixDir, { recursive: true, force: true });
      }
    });
  });

  describe("destinations", () => {
    it("a granted host is reachable over absolute-form HTTP", async () => {
      const r = await get(token, `http://granted.test:${up.port}/hello`, `granted.test:${up.port}`);
      expect(statusOf(r)).toBe(200);
      expect(r).toContain("ok GET /hello");
    });

    it("a granted host is reachable through CONNECT", async () => {
      const r = await rawGate(gate.socketPath, token, `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\nGET /tunnelled HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nConnection: close\r\n\r\n`);
      expect(r).toMatch(/^HTTP\/1\.1 200 Connection Established/);
      expect(r).toContain("ok GET /tunnelled");
      // Plain HTTP inside is decided request by request: a Host that is not the tunnel's is refused.
      const other = await rawGate(gate.socketPath, token, `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\nGET /tunnelled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(other).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 400/);
    });

    it.each([
      ["another host", "http://other.test/", "other.test", /no grant names other\.test:80/],
      ["another port", "http://granted.test:1/", "granted.test:1", /no grant names granted\.test:1/],
      ["the apex of nothing granted", "http://test/", "test", /no grant names test:80/],
    ])("%s is refused with 403 naming the rule, before any connection", async (_t, url, host, reason) => {
      const before = hook.calls.length;
      const r = await get(token, url, host);
      expect(statusOf(r)).toBe(403);
      expect(r).toMatch(reason);
      expect(hook.calls.length).toBe(before);
    });

    it("a write method under a read-only grant is refused; reads pass", async () => {
      expect(statusOf(await get(readToken, `http://granted.test:${up.port}/r`, `granted.test:${up.port}`))).toBe(200);
      const r = await get(readToken, `http://granted.test:${up.port}/w`, `granted.test:${up.port}`, "POST", "Content-Length: 0\r\n");
      expect(statusOf(r)).toBe(403);
      expect(r).toContain("POST is a write");
      const t = await rawGate(gate.socketPath, readToken, `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
      expect(statusOf(t)).toBe(403);
      // Held inside HTTPS only by terminating TLS; a gate without a CA refuses rather than opening an opaque tunnel.
      expect(t).toContain("needs TLS at the gate, and this gate has none");
    });

    it("a second request smuggled after the first on the same connection is checked on its own", async () => {
      const P = up.port;
      const r = await rawGate(gate.socketPath, readToken, `GET http://granted.test:${P}/one HTTP/1.1\r\nHost: granted.test:${P}\r\n\r\nDELETE http://granted.test:${P}/two HTTP/1.1\r\nHost: granted.test:${P}\r\nConnection: close\r\n\r\n`);
      expect(r).toContain("ok GET /one");
      expect(r).toContain("DELETE is a write");
      expect(up.requests.some((q) => q.url === "/two")).toBe(false);
    });

    it.each(["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]", "127.0.0.1."])(
      "the loopback spelling %s reaches only what a literal grant names",
      async (spelling) => {
        const ok = await get(token, `http://${spelling}:${up.port}/spelled`, `${spelling}:${up.port}`);
        expect(statusOf(ok)).toBe(200);
        const other = await get(token, `http://${spelling}:1/`, `${spelling}:1`);
        expect(statusOf(other)).toBe(403);
      },
    );

    it.each([
      ["169.254.169.254", "http://169.254.169.254/latest/meta-data/"],
      ["its decimal spelling", "http://2852039166/latest/meta-data/"],
      ["its hex spelling", "http://0xa9fea9fe/"],
      ["its IPv6 spelling", "http://[fd00:ec2::254]/"],
      ["its IPv4-mapped IPv6 spelling", "http://[::ffff:169.254.169.254]/"],
      ["a granted name that resolves to it", "http://meta.test/"],
    ])("cloud metadata by %s is refused before any socket opens", async (_t, url) => {
      const before = hook.calls.length;
      const host = /^http:\/\/([^/]*)/.exec(url)![1]!;
      const r = await get(token, url, host);
      expect(statusOf(r)).toBe(403);
      expect(hook.calls.length).toBe(before);
    });

    it("a granted name that resolves to a private or loopback address is refused unless the literal is granted", async () => {
      expect(statusOf(await get(token, "http://private.test/", "private.test"))).toBe(403);
      // loop.test resolves to 127.0.0.1, and 127.0.0.1:P is granted literally: reachable.
      expect(statusOf(await get(token, `http://loop.test:${up.port}/`, `loop.test:${up.port}`))).toBe(200);
      // mixed.test: the private address is skipped, the granted loopback literal is not on port 80.
      expect(statusOf(await get(token, "http://mixed.test/", "mixed.test"))).toBe(403);
    });

    it("DNS failure denies", async () => {
      const r = await rawGate(gate.socketPath, token, `CONNECT nowhere.test:443 HTTP/1.1\r\n\r\n`);
      expect(statusOf(r)).toBe(403);
    });

    it("a redirect to the metadata address is just another request, and is refused", async () => {
      const first = await get(token, `http://granted.test:${up.port}/redirect-meta`, `granted.test:${up.port}`);
      expect(statusOf(first)).toBe(302);
      const location = /location: (\S+)/i.exec(first)![1]!;
      expect(statusOf(await get(token, location, "169.254.169.254"))).toBe(403);
    });
  });

  describe("malformed requests", () => {
    it.each([
      ["a Host header that disagrees with the URL", 400, `GET http://granted.test:PORT/ HTTP/1.1\r\nHost: evil.test\r\n\r\n`],
      ["a CONNECT target that disagrees with its Host header", 400, `CONNECT granted.test:PORT HTTP/1.1\r\nHost: evil.test:443\r\n\r\n`],
      ["userinfo in the URL", 400, `GET http://user@granted.test:PORT/ HTTP/1.1\r\nHost: granted.test:PORT\r\n\r\n`],
      ["a zone id", 400, `GET http://[fe80::1%25eth0]:PORT/ HTTP/1.1\r\nHost: [fe80::1%25eth0]:PORT\r\n\r\n`],
      ["an origin-form request (not a proxy request)", 400, `GET / HTTP/1.1\r\nHost: granted.test\r\n\r\n`],
      ["an https:// URL outside CONNECT", 400, `GET https://granted.test:PORT/ HTTP/1.1\r\nHost: granted.test:PORT\r\n\r\n`],
      ["headers bigger than the limit", 431, `GET http://granted.test:PORT/ HTTP/1.1\r\nHost: granted.test:PORT\r\nX-Big: ${"a".repeat(8000)}\r\n\r\n`],
      ["a NUL in the request line", 400, `GET http://gran\0ted.test:PORT/ HTTP/1.1\r\nHost: granted.test:PORT\r\n\r\n`],
    ])("%s gets %d", async (_t, status, raw) => {
      const before = hook.calls.length;
      const r = await rawGate(gate.socketPath, token, raw.replaceAll("PORT", String(up.port)));
      expect(statusOf(r)).toBe(status);
      expect(hook.calls.length).toBe(before);
    });
  });

  describe("hostile clients", () => {
    it("slow clients do not stop others from being served", async () => {
      const slow = await Promise.all(
        Array.from({ length: 3 }, async () => {
          const s = await gateClient(gate.socketPath, token);
          s.write(`GET http://granted.test:${up.port}/ HTTP/1.1\r\n`);
          return s;
        }),
      );
      const r = await get(token, `http://granted.test:${up.port}/fast`, `granted.test:${up.port}`);
      expect(statusOf(r)).toBe(200);
      for (const s of slow) s.destroy();
    });

    it("more connections than a worker may hold are refused", async () => {
      const held = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const s = await gateClient(gate.socketPath, token);
          s.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\n\r\n`);
          await new Promise((r) => s.once("data", r));
          return s;
        }),
      );
      const r = await get(token, `http://granted.test:${up.port}/`, `granted.test:${up.port}`);
      expect(statusOf(r)).toBe(503);
      for (const s of held) s.destroy();
    });
  });

  describe("names and addresses", () => {
    it("a deny rule on an IP literal also refuses a granted name that resolves to it", async () => {
      const t = await testGate([`granted.test:${up.port}`, `127.0.0.1:${up.port}`], { deny: ["127.0.0.1:*"], names: { "granted.test": ["127.0.0.1"] } });
      try {
        const r = await rawGate(t.gate.socketPath, t.token, `GET http://granted.test:${up.port}/ HTTP/1.1\r\nHost: granted.test:${up.port}\r\nConnection: close\r\n\r\n`);
        expect(statusOf(r)).toBe(403);
        expect(r).toContain("127.0.0.1 (denied by --deny-net 127.0.0.1:*)");
        expect(t.hook.calls).toEqual([]);
      } finally {
        await t.close();
      }
    });

    it("a read-only grant of an address does not open a tunnel to a name that resolves to it", async () => {
      const t = await testGate([`read:127.0.0.1:${up.port}`, `loop.test:${up.port}`], { names: { "loop.test": ["127.0.0.1"] } });
      try {
        const r = await rawGate(t.gate.socketPath, t.token, `CONNECT loop.test:${up.port} HTTP/1.1\r\n\r\n`);
        expect(statusOf(r)).toBe(403);
        expect(r).toContain("127.0.0.1 (loopback)");
        // A read through the name is what the read grant allows.
        const read = await rawGate(t.gate.socketPath, t.token, `GET http://loop.test:${up.port}/ HTTP/1.1\r\nHost: loop.test:${up.port}\r\nConnection: close\r\n\r\n`);
        expect(statusOf(read)).toBe(200);
      } finally {
        await t.close();
      }
    });

    it("a lookup that never answers is refused at the lookup deadline", async () => {
      const t = await testGate(["stuck.test:*"], { resolver: () => new Promise(() => {}), limits: { lookupMs: 200 } });
      try {
        const r = await rawGate(t.gate.socketPath, t.token, `CONNECT stuck.test:443 HTTP/1.1\r\n\r\n`);
        expect(statusOf(r)).toBe(403);
        expect(r).toContain("DNS lookup of stuck.test timed out");
      } finally {
        await t.close();
      }
    });

    it("more lookups at once than a worker may run are refused, not queued", async () => {
      let started = 0;
      const t = await testGate(["*.stuck.test:*"], { resolver: () => ((started += 1), new Promise(() => {})), limits: { lookupsPerWorker: 2, lookupMs: 60_000 } });
      try {
        for (const i of [1, 2]) void rawGate(t.gate.socketPath, t.token, `CONNECT a${i}.stuck.test:443 HTTP/1.1\r\n\r\n`, { waitMs: 60_000 }).catch(() => "");
        await until(() => started === 2, "two lookups started");
        const r = await rawGate(t.gate.socketPath, t.token, `CONNECT a3.stuck.test:443 HTTP/1.1\r\n\r\n`);
        expect(statusOf(r)).toBe(503);
        expect(r).toContain("more than 2 DNS lookups at once");
      } finally {
        await t.close();
      }
    });
  });

  describe("the record under a flood", () => {
    it("thousands of refused requests with 15 KB URLs leave a bounded record that still counts them all", async () => {
      const t = await testGate([]);
      try {
        const one = `GET http://notgranted.test/${"a".repeat(15_000)} HTTP/1.1\r\nHost: notgranted.test\r\n\r\n`;
        // 20 pipelined on each connection, as the red team sent them; each refusal closes its connection.
        for (let c = 0; c < 100; c++) await rawGate(t.gate.socketPath, t.token, one.repeat(20));
        await t.gate.close();
        const refused = t.events.filter((e) => e.decision === "denied");
        expect(refused.reduce((n, e) => n + (e.count ?? 1), 0)).toBe(100);
        expect(refused.length).toBeLessThan(60);
        for (const e of refused) expect(JSON.stringify(e).length).toBeLessThan(2000);
        expect(refused.at(-1)).toMatchObject({ code: "no-grant", count: 50 });
      } finally {
        await t.close();
      }
    });
  });

  it("every attempt is an event with component, destination as asked, canonical destination and reason", () => {
    const spelled = events.find((e) => e.asked === "http://2852039166/latest/meta-data/");
    expect(spelled).toMatchObject({ component: "web", generation: 1, decision: "denied", canonical: "169.254.169.254:80" });
    const resolved = events.find((e) => e.asked === "http://meta.test/");
    expect(resolved).toMatchObject({ decision: "denied", canonical: "meta.test:80", resolved: ["169.254.169.254"] });
    expect(resolved?.reason).toContain("169.254.169.254 (metadata)");
    // An allowed request is recorded twice: when it is allowed, before anything connects, and when it ends.
    const [allowed, ended] = events.filter((e) => e.decision === "allowed" && e.asked.endsWith("/hello"));
    expect(allowed).toMatchObject({ canonical: `granted.test:${up.port}`, address: "127.0.0.1", reason: `granted by granted.test:${up.port}` });
    expect(allowed).not.toHaveProperty("outcome");
    expect(ended).toMatchObject({ canonical: `granted.test:${up.port}`, address: "127.0.0.1", status: 200, outcome: "completed" });
  });
});
