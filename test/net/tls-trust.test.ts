import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { testCa } from "../support/tls.js";

// Each root is trusted once, however many sources name it: NODE_EXTRA_CA_CERTS
// naming the system bundle itself (as on many hosts) doubled every root in the
// upstream context, the sandbox's bundle and its Java truststore. A new root
// in a user's file is still added, and a bad one still refused.
describe("upstream trust reads each root once", () => {
  const dir = mkdtempSync(join(tmpdir(), "vak-trust-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a root named again by NODE_EXTRA_CA_CERTS or --ca-file (wrapped differently, CRLF) is not added twice; a new one is", async () => {
    const [a, b, c] = [await testCa("A"), await testCa("B"), await testCa("C")];
    const system = join(dir, "system.pem");
    writeFileSync(system, a.certPem + b.certPem);
    const again = join(dir, "again.pem");
    // The same certificate as B, its base64 wrapped at 76 columns with CRLF: the same root.
    const body = b.certPem.replace(/-----[A-Z ]+-----|\s/g, "");
    writeFileSync(again, `-----BEGIN CERTIFICATE-----\r\n${body.replace(/(.{76})/g, "$1\r\n")}\r\n-----END CERTIFICATE-----\r\n`);
    const t = upstreamTrust({ systemBundles: [system], env: { NODE_EXTRA_CA_CERTS: system }, caFiles: [again, c.file] });
    expect(t.roots).toHaveLength(3);
    expect(t.context()).toBeTruthy();
    const ids = t.roots.map((r) => r.replace(/-----[A-Z ]+-----|\s/g, ""));
    expect(new Set(ids).size).toBe(3);
    expect(ids).toContain(c.certPem.replace(/-----[A-Z ]+-----|\s/g, ""));
  });

  it("a file of only roots already trusted is accepted; a file with a certificate that does not parse is still refused", async () => {
    const a = await testCa("A");
    const system = join(dir, "system2.pem");
    writeFileSync(system, a.certPem);
    expect(upstreamTrust({ systemBundles: [system], env: {}, caFiles: [system] }).roots).toHaveLength(1);
    const bad = join(dir, "bad.pem");
    writeFileSync(bad, `${a.certPem}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`);
    expect(() => upstreamTrust({ systemBundles: [system], env: {}, caFiles: [bad] })).toThrow(/does not parse/);
  });
});
