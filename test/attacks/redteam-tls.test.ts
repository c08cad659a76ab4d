import type { Socket } from "node:net";
import { Duplex } from "node:stream";
import { createServer as createTlsServer, connect as tlsConnect, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GateOptions } from "../../src/net/egress-gate.js";
import { createRunCa, type RunCa } from "../../src/net/tls-ca.js";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { type LenientRequest, listenLoopback, readLeniently, testGate } from "../support/net.js";
import { connectThrough } from "../support/tls-client.js";
import { testCa, type TestCa } from "../support/tls.js";

// Red team of the gate's TLS termination, by class: what the TLS layer could let a client skip (the SNI check on a
// resumed session, a handshake held past its deadline), what an upstream's certificate must be, and where a
// placeholder may become its value. The servers are on loopback, signed by the test's own CA; names resolve through
// the test's table (testGate's names), so no lookup leaves the machine.

describe("TLS termination, red team", () => {
  let ca: TestCa;
  let run: RunCa;
  let T = 0;
  const seen: LenientRequest[] = [];
  let closeUp: () => void;
  let tlsOpts: GateOptions["tls"];
  const names = { "api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"] };

  beforeAll(async () => {
    ca = await testCa();
    run = await createRunCa();
    const { key, cert } = await ca.issue(["api.test", "other.test", "127.0.0.1"]);
    const server = createTlsServer({ key, cert, ALPNProtocols: ["http/1.1"] }, (s) => {
      s.on("error", () => {});
      readLeniently(s, 0, (r) => {
        seen.push(r);
        const text = `seen ${r.line.split(" ")[1]} ${Object.entries(r.headers).map(([n, v]) => `${n}=${v}`).join(" ")}`;
        s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
      });
    });
    T = await listenLoopback(server as unknown as import("node:net").Server);
    closeUp = () => server.close();
    tlsOpts = { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) };
  }, 60_000);
  afterAll(() => closeUp?.());

  /** CONNECT target, then a TLS handshake with the gate as Node's client: the socket, or why it failed. */
  const handshake = async (socketPath: string, token: string, target: string, opts: { servername?: string; session?: Buffer; minVersion?: "TLSv1.2" | "TLSv1.3"; maxVersion?: "TLSv1.2" | "TLSv1.3" }) => {
    const { socket, answer } = await connectThrough(socketPath, token, target);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    return new Promise<{ tls?: TLSSocket; error?: Error; session?: Buffer }>((resolve) => {
      const t = tlsConnect({
        socket, ca: run.certPem, servername: opts.servername, ALPNProtocols: ["http/1.1"],
        ...(opts.session ? { session: opts.session } : {}),
        ...(opts.minVersion ? { minVersion: opts.minVersion } : {}),
        ...(opts.maxVersion ? { maxVersion: opts.maxVersion } : {}),
        // The client's own name check is off: what is tried is whether the gate lets a name through.
        checkServerIdentity: () => undefined,
      });
      let session: Buffer | undefined;
      t.on("session", (s: Buffer) => (session = s));
      t.once("secureConnect", () => {
        // TLS 1.3 tickets come after the handshake: a moment to take one.
        setTimeout(() => resolve({ tls: t, session: session ?? t.getSession() }), 100);
      });
      t.once("error", (error) => resolve({ error }));
    });
  };

  it("a session resumed with another SNI is refused, as a full handshake with it is (TLS 1.3 tickets and TLS 1.2)", async () => {
    const g = await testGate([`read:api.test:${T}`, `read:other.test:${T}`, `127.0.0.1:${T}`], { names, tls: tlsOpts });
    try {
      for (const v of ["TLSv1.3", "TLSv1.2"] as const) {
        const first = await handshake(g.gate.socketPath, g.token, `api.test:${T}`, { servername: "api.test", minVersion: v, maxVersion: v });
        expect(first.error).toBeUndefined();
        expect(first.session).toBeDefined();
        first.tls!.destroy();
        // The same tunnel's target, its session, and another name in the SNI.
        const again = await handshake(g.gate.socketPath, g.token, `api.test:${T}`, { servername: "other.test", session: first.session!, minVersion: v, maxVersion: v });
        const resumed = again.tls?.isSessionReused();
        again.tls?.destroy();
        expect({ v, refused: again.error !== undefined, resumed }).toEqual({ v, refused: true, resumed: undefined });
      }
      expect(g.events.filter((e) => e.code === "sni-mismatch").length).toBe(2);
    } finally {
      await g.close();
    }
  });

  /**
   * A client's side of a socket whose first write (the ClientHello) goes out late and in pieces: its first 3 bytes
   * after firstMs, the rest in `pieces` parts gapMs apart; later writes at once.
   */
  function paced(raw: Socket, firstMs: number, pieces: number, gapMs: number): Duplex {
    let first = true;
    const d = new Duplex({
      read() {},
      write(chunk: Buffer, _enc, cb) {
        if (!first) return void raw.write(chunk, cb);
        first = false;
        const parts = [chunk.subarray(0, 3)];
        const size = Math.ceil((chunk.length - 3) / pieces);
        for (let i = 3; i < chunk.length; i += size) parts.push(chunk.subarray(i, i + size));
        parts.forEach((p, i) => setTimeout(() => !raw.destroyed && raw.write(p), firstMs + i * gapMs));
        cb();
      },
      final(cb) {
        raw.end();
        cb();
      },
      destroy(e, cb) {
        raw.destroy();
        cb(e);
      },
    });
    raw.on("data", (b: Buffer) => d.push(b));
    raw.on("end", () => d.push(null));
    raw.on("close", () => d.destroy());
    raw.on("error", () => {});
    raw.resume();
    return d;
  }

  it("a ClientHello sent slowly, its first bytes just before the deadline and the rest after, is cut at the deadline: one deadline for the whole handshake", async () => {
    const headerMs = 800;
    const g = await testGate([`read:api.test:${T}`, `127.0.0.1:${T}`], { names, tls: tlsOpts, limits: { headerMs } });
    try {
      const { socket, answer } = await connectThrough(g.gate.socketPath, g.token, `api.test:${T}`);
      expect(answer).toMatch(/^HTTP\/1\.1 200/);
      const start = Date.now();
      // The first 3 bytes at 700 ms (within the deadline), the rest in 8 parts until ~1260 ms (past it).
      const t = tlsConnect({ socket: paced(socket, 700, 8, 70), ca: run.certPem, servername: "api.test", ALPNProtocols: ["http/1.1"] });
      const got = await new Promise<string>((resolve) => {
        let out = "";
        t.once("secureConnect", () => t.write(`GET /slow-hello HTTP/1.1\r\nHost: api.test:${T}\r\nConnection: close\r\n\r\n`));
        t.on("data", (b: Buffer) => (out += b.toString("latin1")));
        t.on("error", () => {});
        t.once("close", () => resolve(out));
      });
      const took = Date.now() - start;
      expect(got).not.toContain("seen /slow-hello");
      expect(seen.some((r) => r.line.includes("/slow-hello"))).toBe(false);
      expect(took).toBeLessThan(headerMs + 400);
      const connect = g.events.find((e) => e.method === "CONNECT" && e.outcome !== undefined);
      expect(connect?.outcome).toMatch(/handshake took longer than 800 ms/);
    } finally {
      await g.close();
    }
  });
});
