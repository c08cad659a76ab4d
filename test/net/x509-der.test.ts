import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type Server } from "node:net";
import { connect, type PeerCertificate, type SecureContext, TLSSocket } from "node:tls";
import { afterAll, describe, expect, it } from "vitest";
import type { Host } from "../../src/policy/address.js";
import { createRunCa } from "../../src/net/tls-ca.js";

// The run CA's certificates, written as DER by x509-der.ts, read back by
// OpenSSL the way clients read them: a leaf served on a loopback socket by
// the gate's own context, fetched by a TLS client that trusts only the run's
// CA, then checked by `openssl verify -x509_strict` for a TLS server.
const dir = mkdtempSync(join(tmpdir(), "vak-x509-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A loopback server that answers with the gate's own context, as terminate.ts wraps a tunnel. */
function tlsServer(ctx: SecureContext): Server {
  return createServer((raw) => {
    const s = new TLSSocket(raw, { isServer: true, secureContext: ctx });
    s.on("error", () => s.destroy());
    s.on("secure", () => s.end());
  });
}

async function served(ca: Awaited<ReturnType<typeof createRunCa>>, host: Host, servername?: string): Promise<{ cert: PeerCertificate; authorized: boolean; error?: string }> {
  const ctx = await ca.contextFor(host);
  const server = tlsServer(ctx);
  const at = host.kind === "ip" ? host.ip : "127.0.0.1"; // Node checks an IP leaf against the address it connected to
  await new Promise<void>((r) => server.listen(0, at, r));
  const port = (server.address() as { port: number }).port;
  try {
    return await new Promise((resolve, reject) => {
      const c = connect({ host: at, port, ca: ca.certPem, rejectUnauthorized: false, ...(servername ? { servername } : {}) }, () => {
        const cert = c.getPeerCertificate(true);
        resolve({ cert, authorized: c.authorized, ...(c.authorizationError ? { error: String(c.authorizationError) } : {}) });
        c.end();
      });
      c.on("error", reject);
    });
  } finally {
    server.close();
  }
}

const pemOf = (der: Buffer) => new X509Certificate(der).toString();

describe("the run CA's DER certificates", () => {
  it("the CA is a self-signed P-256 CA with path length 0, for signing certificates only", async () => {
    const ca = await createRunCa();
    const c = new X509Certificate(ca.certPem);
    expect(c.ca).toBe(true);
    expect(c.checkIssued(c)).toBe(true);
    expect(c.verify(c.publicKey)).toBe(true);
    expect(c.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    const text = execFileSync("openssl", ["x509", "-noout", "-text"], { input: ca.certPem }).toString();
    expect(text).toMatch(/Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
    expect(text).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign/);
    expect(text).toContain("Subject Key Identifier");
    expect(Number(`0x${c.serialNumber}`)).toBeGreaterThan(0);
  });

  it.each([
    ["a name", { kind: "name", name: "api.example.test" } as Host, "api.example.test", "DNS:api.example.test"],
    ["an IPv4 address", { kind: "ip", ip: "127.0.0.1", family: 4 } as Host, undefined, "IP Address:127.0.0.1"],
    ["an IPv6 address", { kind: "ip", ip: "::1", family: 6 } as Host, undefined, "IP Address:0:0:0:0:0:0:0:1"],
  ])("a leaf for %s verifies strictly against the run CA as a TLS server for exactly that host", async (_what, host, servername, san) => {
    const ca = await createRunCa();
    const got = await served(ca, host, servername);
    expect(got.authorized).toBe(true);
    expect(got.cert.subjectaltname).toBe(san);
    const leaf = join(dir, `leaf-${Math.random()}.pem`);
    const caFile = join(dir, `ca-${Math.random()}.pem`);
    writeFileSync(leaf, pemOf(got.cert.raw));
    writeFileSync(caFile, ca.certPem);
    const name = host.kind === "name" ? ["-verify_hostname", host.name] : ["-verify_ip", host.ip];
    expect(execFileSync("openssl", ["verify", "-x509_strict", "-purpose", "sslserver", ...name, "-CAfile", caFile, leaf]).toString()).toContain(": OK");
    const other = host.kind === "name" ? ["-verify_hostname", "other.example.test"] : ["-verify_ip", "10.0.0.1"];
    expect(() => execFileSync("openssl", ["verify", "-x509_strict", "-purpose", "sslserver", ...other, "-CAfile", caFile, leaf], { stdio: "pipe" })).toThrow();
  });

  it("a leaf from another run's CA is not trusted", async () => {
    const [a, b] = [await createRunCa(), await createRunCa()];
    const ctx = await a.contextFor({ kind: "name", name: "x.test" });
    const server = tlsServer(ctx);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const authorized = await new Promise<boolean>((resolve, reject) => {
      const c = connect({ host: "127.0.0.1", port, ca: b.certPem, servername: "x.test", rejectUnauthorized: false }, () => (resolve(c.authorized), c.end()));
      c.on("error", reject);
    });
    server.close();
    expect(authorized).toBe(false);
  });
});
