import { randomBytes, webcrypto } from "node:crypto";
import { createSecureContext, DEFAULT_CIPHERS, type SecureContext } from "node:tls";
import { type Host, hostText } from "../policy/address.js";

/**
 * The certificate authority of one run (one `vak exec`, one broker session):
 * made in the vak process when a grant first needs the gate to see inside
 * HTTPS, and gone with it. Its private key is a non-extractable WebCrypto key:
 * it is never exported, written or handed to anything, so no file, variable or
 * process inside a sandbox can hold it; only its certificate goes into the
 * sandbox's trust bundle. Leaves are P-256, one per host (the SNI the gate
 * checked against the CONNECT target), valid for an hour, with DNS or IP
 * subject names and the CA's key identifier, cached per host. Every leaf of
 * a run shares one leaf key (held the same way, in memory), so a first request
 * to a host costs one signature, not a key generation.
 */
export interface RunCa {
  /** The CA certificate, PEM: what clients inside trust. */
  certPem: string;
  /** The server context for a host: its leaf, minted on first use and cached. */
  contextFor(host: Host): Promise<SecureContext>;
  /** False always: for the test that proves the key cannot be exported. */
  readonly keyExtractable: boolean;
}

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
/** AES-128-GCM first: the gate decrypts and encrypts every byte of a terminated stream, and it is the cheapest strong suite. */
export const FAST_FIRST = `TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:${DEFAULT_CIPHERS}`;
const CA_DAYS = 30;
const LEAF_MS = 60 * 60 * 1000;
/** Re-minted this long before it expires, so no handshake gets a leaf about to lapse. */
const LEAF_MARGIN_MS = 10 * 60 * 1000;
/** Hosts whose leaves are kept; past this the oldest is dropped (and minted again if asked). */
const MAX_LEAVES = 1024;
/** Clocks differ: a leaf is valid from a little before now. */
const SKEW_MS = 5 * 60 * 1000;

function serial(): string {
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f; // positive, as RFC 5280 asks
  return b.toString("hex");
}

/** Makes the run's CA. Loads the X.509 code on first use only: a run without TLS termination never pays for it. */
export async function createRunCa(name = "Vak run CA"): Promise<RunCa> {
  await import("reflect-metadata"); // @peculiar/x509's dependency injection needs it, once
  const x509 = await import("@peculiar/x509");
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
  const subtle = webcrypto.subtle;
  const caKeys = (await subtle.generateKey(ALG, false, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const leafKeys = (await subtle.generateKey(ALG, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const cn = `${name} ${randomBytes(4).toString("hex")}`.replace(/[,=+<>#;"\\]/g, "");
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${cn}, O=Vak`,
    notBefore: new Date(now - SKEW_MS),
    notAfter: new Date(now + CA_DAYS * 86_400_000),
    signingAlgorithm: ALG,
    keys: caKeys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const caNotAfter = ca.notAfter.getTime();
  const aki = await x509.AuthorityKeyIdentifierExtension.create(ca, false);
  const leafKeyPem = pem("PRIVATE KEY", Buffer.from(await subtle.exportKey("pkcs8", leafKeys.privateKey)));
  const certPem = `${ca.toString("pem").replace(/\r\n/g, "\n").trim()}\n`;
  const leaves = new Map<string, Promise<{ ctx: SecureContext; notAfter: number }>>();

  const mint = async (host: Host): Promise<{ ctx: SecureContext; notAfter: number }> => {
    const t = Date.now();
    const notAfter = Math.min(t + LEAF_MS, caNotAfter);
    const label = hostText(host).replace(/^\[|\]$/g, "");
    const san = host.kind === "ip" ? { type: "ip" as const, value: host.ip } : { type: "dns" as const, value: host.name };
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: host.kind === "name" ? `CN=${label}` : "CN=vak ip leaf",
      issuer: ca.subject,
      notBefore: new Date(t - SKEW_MS),
      notAfter: new Date(notAfter),
      signingAlgorithm: ALG,
      publicKey: leafKeys.publicKey,
      signingKey: caKeys.privateKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([san]),
        aki,
      ],
    });
    const ctx = createSecureContext({ key: leafKeyPem, cert: `${leaf.toString("pem")}\n${certPem}\n`, minVersion: "TLSv1.2", ciphers: FAST_FIRST, honorCipherOrder: true });
    return { ctx, notAfter };
  };

  return {
    certPem,
    keyExtractable: caKeys.privateKey.extractable,
    async contextFor(host: Host): Promise<SecureContext> {
      const key = hostText(host);
      const cached = leaves.get(key);
      if (cached) {
        const got = await cached.catch(() => undefined);
        if (got && got.notAfter - Date.now() > LEAF_MARGIN_MS) return got.ctx;
        leaves.delete(key);
      }
      if (leaves.size >= MAX_LEAVES) leaves.delete(leaves.keys().next().value!);
      const minted = mint(host);
      leaves.set(key, minted);
      return (await minted).ctx;
    },
  };
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}
