import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EgressGate, type EgressEvent, type GateWorker } from "../../src/net/egress-gate.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import { listenLoopback, rawGate } from "../support/net.js";

/**
 * A gate-held secret must never be put on the wire in clear text. A host grant (`api.test`) covers port 80,
 * so a tricked command can send its placeholder to http://api.test/; had the gate put the key in, anyone on
 * the path (or anyone who answers for the name) would read it. The "public" address here is never reached:
 * the connector hands every connection to it to a loopback server, so nothing leaves the machine.
 */
describe("a gate-held secret in clear text across a network", () => {
  const PUBLIC = "93.184.216.34";
  const VALUE = "sk-cleartext-0123456789abcdef";
  const PLACEHOLDER = "vak-placeholder-0123456789abcdef01234567";
  const HEADER = "sk-header-secret-fedcba9876543210";
  let server: Server;
  let port = 0;
  const seen: IncomingHttpHeaders[] = [];
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "vak-cleartext-"));
    server = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    });
    port = await listenLoopback(server);
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  /** One plain-HTTP request to host:80 through a fresh gate for this worker; what the server got and what was recorded. */
  async function send(host: string, address: string, worker: Omit<GateWorker, "component" | "generation" | "grants">) {
    const events: EgressEvent[] = [];
    const gate = new EgressGate({
      dir: join(dir, String(Math.random()).slice(2)),
      resolver: async (name) => (name === host ? [address] : Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" }))),
      // Every address goes to the loopback server: a connection meant for PUBLIC:80 never leaves the machine.
      connect: (a: string, p: number): Socket => {
        if (p !== 80 || (a !== PUBLIC && a !== "127.0.0.1")) throw new Error(`test connector: refusing ${a}:${p}`);
        return connect({ host: "127.0.0.1", port, allowHalfOpen: true });
      },
      ownAddresses: new Set(),
      onEvent: (e) => events.push(e),
    });
    await gate.listen();
    try {
      const token = gate.register({ component: "test", generation: 1, grants: parseNetGrants([host]), ...worker });
      const before = seen.length;
      const raw = await rawGate(gate.socketPath, token, `GET http://${host}/ HTTP/1.1\r\nHost: ${host}\r\nX-Api-Key: ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`);
      return { raw, got: seen.slice(before), allowed: events.find((e) => e.decision === "allowed" && e.outcome === undefined) };
    } finally {
      await gate.close();
    }
  }

  const placeholder = (hosts: string[]) => ({ placeholders: [{ ref: "secret:k", placeholder: PLACEHOLDER, value: VALUE, hosts }] });

  it("a placeholder sent over plain HTTP to its own host on a public address goes out as the placeholder, and the record says withheld", async () => {
    const x = await send("api.test", PUBLIC, placeholder(["api.test"]));
    expect(x.raw).toMatch(/^HTTP\/1\.1 200/);
    expect(x.got[0]?.["x-api-key"]).toBe(PLACEHOLDER);
    expect(JSON.stringify(x.got)).not.toContain(VALUE);
    expect(x.allowed?.withheld).toEqual(["secret:k"]);
    expect(x.allowed?.secrets).toBeUndefined();
  });

  it("a header secret is not set on a plain-HTTP request to a public address; the record says withheld", async () => {
    const x = await send("api.test", PUBLIC, { headers: [{ ref: "secret:h", header: "Authorization", value: `Bearer ${HEADER}`, hosts: ["api.test"] }] });
    expect(JSON.stringify(x.got)).not.toContain(HEADER);
    expect(x.allowed?.withheld).toEqual(["secret:h"]);
  });

  it("a secret that names host:port exactly goes there in clear text: the user asked for that port", async () => {
    const x = await send("api.test", PUBLIC, placeholder(["api.test:80"]));
    expect(x.got[0]?.["x-api-key"]).toBe(VALUE);
    expect(x.allowed?.secrets).toEqual(["secret:k"]);
    expect(x.raw).not.toContain(VALUE);
  });

  it("over plain HTTP to a loopback address (nothing crosses a network), the value goes in", async () => {
    const x = await send("127.0.0.1", "127.0.0.1", placeholder(["127.0.0.1"]));
    expect(x.got[0]?.["x-api-key"]).toBe(VALUE);
    expect(x.allowed?.secrets).toEqual(["secret:k"]);
  });
});

/**
 * With an upstream proxy ([egress] upstream_proxy) every upstream connection is a CONNECT to it: a plain-HTTP
 * request to a loopback address then crosses the network to the proxy in clear text, and reaches the proxy's
 * machine's loopback, not this one's. The proxy's address here is never reached: the connector hands every
 * connection to it to a loopback fake proxy that records what passes through it.
 */
describe("a gate-held secret through an upstream proxy on another machine", () => {
  const REMOTE_PROXY = "192.0.2.10";
  const VALUE = "sk-through-proxy-0123456789abcdef";
  const PLACEHOLDER = "vak-placeholder-76543210fedcba9876543210";
  let proxy: NetServer;
  let proxyPort = 0;
  const carried: string[] = [];
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "vak-proxied-"));
    // A CONNECT proxy that tunnels nowhere: it accepts any tunnel and answers the request inside it itself.
    proxy = createNetServer((s) => {
      s.on("error", () => {});
      let buf = "";
      let open = false;
      s.on("data", (d: Buffer) => {
        buf += d.toString("latin1");
        if (!open) {
          const end = buf.indexOf("\r\n\r\n");
          if (end < 0) return;
          open = true;
          buf = buf.slice(end + 4);
          s.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        }
        if (buf.includes("\r\n\r\n")) {
          carried.push(buf);
          s.end("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n");
        }
      });
    });
    proxyPort = await listenLoopback(proxy);
  });
  afterAll(async () => {
    await new Promise((r) => proxy.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  async function send(proxyHost: string) {
    const events: EgressEvent[] = [];
    const gate = new EgressGate({
      dir: join(dir, String(Math.random()).slice(2)),
      resolver: async () => Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" })),
      connect: (a: string, p: number): Socket => {
        if (a !== proxyHost || p !== 3128) throw new Error(`test connector: refusing ${a}:${p}`);
        return connect({ host: "127.0.0.1", port: proxyPort, allowHalfOpen: true });
      },
      upstreamProxy: { host: proxyHost, port: 3128 },
      ownAddresses: new Set(),
      onEvent: (e) => events.push(e),
    });
    await gate.listen();
    try {
      const token = gate.register({
        component: "test", generation: 1, grants: parseNetGrants(["127.0.0.1:8080"]),
        placeholders: [{ ref: "secret:p", placeholder: PLACEHOLDER, value: VALUE, hosts: ["127.0.0.1"] }],
      });
      const before = carried.length;
      const raw = await rawGate(gate.socketPath, token, `GET http://127.0.0.1:8080/ HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-Api-Key: ${PLACEHOLDER}\r\nConnection: close\r\n\r\n`);
      return { raw, got: carried.slice(before).join(""), allowed: events.find((e) => e.decision === "allowed" && e.outcome === undefined) };
    } finally {
      await gate.close();
    }
  }

  it("a placeholder for a loopback host, over plain HTTP through a proxy on another machine, goes out as the placeholder; the record says withheld", async () => {
    const x = await send(REMOTE_PROXY);
    expect(x.raw).toMatch(/^HTTP\/1\.1 200/);
    expect(x.got).toContain(`X-Api-Key: ${PLACEHOLDER}`);
    expect(x.got).not.toContain(VALUE);
    expect(x.allowed?.withheld).toEqual(["secret:p"]);
    expect(x.allowed?.secrets).toBeUndefined();
  });

  it("through a proxy on this machine's loopback, nothing crosses a network: the value goes in", async () => {
    const x = await send("127.0.0.1");
    expect(x.got).toContain(`X-Api-Key: ${VALUE}`);
    expect(x.allowed?.secrets).toEqual(["secret:p"]);
  });
});
