import { constants, randomBytes, webcrypto } from "node:crypto";
import { createSecureContext, DEFAULT_CIPHERS, type SecureContext } from "node:tls";
import { type Host, hostText } from "../policy/address.js";
import * as der from "./x509-der.js";

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

/** 16 random bytes, the first never zero: a positive serial of fixed size (RFC 5280: at most 20 octets). */
function serial(): Buffer {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x01;
  return b;
}

/** Makes the run's CA: two P-256 keys and a signature, no X.509 library (x509-der.ts). */
export async function createRunCa(name = "Vak run CA"): Promise<RunCa> {
  const subtle = webcrypto.subtle;
  const [caKeys, leafKeys] = (await Promise.all([
    subtle.generateKey(ALG, false, ["sign", "verify"]),
    subtle.generateKey(ALG, true, ["sign", "verify"]),
  ])) as [webcrypto.CryptoKeyPair, webcrypto.CryptoKeyPair];
  const now = Date.now();
  const caNotAfter = Math.floor((now + CA_DAYS * 86_400_000) / 1000) * 1000;
  const caName = der.name(`${name} ${randomBytes(4).toString("hex")}`, "Vak");
  const [caSpki, leafSpki, caKeyId, leafPkcs8] = await Promise.all([
    subtle.exportKey("spki", caKeys.publicKey).then(Buffer.from),
    subtle.exportKey("spki", leafKeys.publicKey).then(Buffer.from),
    der.keyId(caKeys.publicKey),
    subtle.exportKey("pkcs8", leafKeys.privateKey).then(Buffer.from),
  ]);
  const ca = await der.certificate(
    { serial: serial(), issuer: caName, subject: caName, notBefore: new Date(now - SKEW_MS), notAfter: new Date(caNotAfter), spki: caSpki, ski: caKeyId, ca: true },
    caKeys.privateKey,
  );
  const leafKeyPem = der.pem("PRIVATE KEY", leafPkcs8);
  const certPem = der.pem("CERTIFICATE", ca);
  const leaves = new Map<string, Promise<{ ctx: SecureContext; notAfter: number }>>();

  const mint = async (host: Host): Promise<{ ctx: SecureContext; notAfter: number }> => {
    const t = Date.now();
    const notAfter = Math.min(t + LEAF_MS, caNotAfter);
    // A common name is at most 64 characters (RFC 5280); clients check the subject alternative name.
    const cn = host.kind === "name" && host.name.length <= 64 ? host.name : "vak leaf";
    const leaf = await der.certificate(
      {
        serial: serial(), issuer: caName, subject: der.name(cn), notBefore: new Date(t - SKEW_MS), notAfter: new Date(notAfter), spki: leafSpki, aki: caKeyId, ca: false,
        san: host.kind === "ip" ? { type: "ip", value: host.ip } : { type: "dns", value: host.name },
      },
      caKeys.privateKey,
    );
    // No session tickets: a resumed handshake skips the certificate callback, and with it the check that the SNI
    // names the CONNECT target (terminate.ts); a TLS 1.2 ticket for this host was resumed with any SNI. Without
    // tickets (and with Node's session cache off) every handshake is a full one, checked.
    const ctx = createSecureContext({ key: leafKeyPem, cert: `${der.pem("CERTIFICATE", leaf)}${certPem}`, minVersion: "TLSv1.2", ciphers: FAST_FIRST, honorCipherOrder: true, secureOptions: constants.SSL_OP_NO_TICKET });
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
