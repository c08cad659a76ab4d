import { createHash, webcrypto } from "node:crypto";
import ipaddr from "ipaddr.js";

/**
 * The two certificate shapes a run's CA issues (tls-ca.ts), written as DER
 * here: a self-signed P-256 CA and its P-256 server leaves. A general X.509
 * library (@peculiar/x509 with asn1js and its dependency injection) cost a
 * run that terminates TLS ~100 ms of start-up to load and run, and grew the
 * heap to a collection; these shapes are fixed, so a few encoders suffice.
 * The signature is WebCrypto's (the CA key never leaves it); every field is
 * the gate's own (a host checked as canonical, random serials, times), so
 * nothing here encodes a value a client chose beyond the name the gate checked.
 */

const SUBTLE = webcrypto.subtle;

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** A DER element: tag, definite length, contents. */
function tlv(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
}

const seq = (...parts: Buffer[]) => tlv(0x30, ...parts);
const set = (...parts: Buffer[]) => tlv(0x31, ...parts);
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.from([unused]), b);
const TRUE = Buffer.from([0x01, 0x01, 0xff]);

function oid(text: string): Buffer {
  const [a, b, ...rest] = text.split(".").map(Number);
  const out = [a! * 40 + b!];
  for (const n of rest) {
    const seven: number[] = [];
    for (let v = n; ; v = Math.floor(v / 128)) {
      seven.unshift((v & 0x7f) | (seven.length ? 0x80 : 0));
      if (v < 128) break;
    }
    out.push(...seven);
  }
  return tlv(0x06, Buffer.from(out));
}

/** A non-negative INTEGER from big-endian bytes: minimal, with a zero in front when the top bit is set. */
function uint(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, v[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

/** UTCTime through 2049, GeneralizedTime after (RFC 5280 4.1.2.5), to the second, in UTC. */
function time(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-T:]/g, "");
  const year = d.getUTCFullYear();
  return year < 2050 ? tlv(0x17, Buffer.from(`${digits.slice(2)}Z`, "ascii")) : tlv(0x18, Buffer.from(`${digits}Z`, "ascii"));
}

/** A Name of common name and, if given, organization: one attribute per RDN, as UTF8String. */
export function name(cn: string, o?: string): Buffer {
  const rdn = (type: string, v: string) => set(seq(oid(type), tlv(0x0c, Buffer.from(v, "utf8"))));
  return seq(...(o === undefined ? [] : [rdn("2.5.4.10", o)]), rdn("2.5.4.3", cn));
}

const ECDSA_SHA256 = seq(oid("1.2.840.10045.4.3.2"));

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return seq(oid(id), ...(critical ? [TRUE] : []), octets(value));
}

/** The key identifier of a public key: SHA-1 of its subjectPublicKey bits (RFC 5280 4.2.1.2, method 1). */
export async function keyId(publicKey: webcrypto.CryptoKey): Promise<Buffer> {
  return createHash("sha1").update(Buffer.from(await SUBTLE.exportKey("raw", publicKey))).digest();
}

export interface CertFields {
  serial: Buffer;
  issuer: Buffer;
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  /** SubjectPublicKeyInfo, DER (WebCrypto's "spki" export). */
  spki: Buffer;
  /** The subject's key identifier (a CA), and the issuer's (a leaf). */
  ski?: Buffer;
  aki?: Buffer;
  ca: boolean;
  /** A leaf's one subject alternative name. */
  san?: { type: "dns"; value: string } | { type: "ip"; value: string };
}

function extensions(f: CertFields): Buffer {
  const list: Buffer[] = [];
  // basicConstraints, critical: a CA with path length 0; a leaf with the defaults (not a CA), an empty SEQUENCE.
  list.push(extension("2.5.29.19", true, f.ca ? seq(TRUE, tlv(0x02, Buffer.from([0]))) : seq()));
  // keyUsage, critical: keyCertSign and cRLSign (bits 5, 6) for a CA, digitalSignature (bit 0) for a leaf.
  list.push(extension("2.5.29.15", true, f.ca ? bits(Buffer.from([0x06]), 1) : bits(Buffer.from([0x80]), 7)));
  if (!f.ca) list.push(extension("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1")))); // serverAuth
  if (f.san) {
    const gn = f.san.type === "dns" ? tlv(0x82, Buffer.from(f.san.value, "ascii")) : tlv(0x87, Buffer.from(ipaddr.parse(f.san.value).toByteArray()));
    list.push(extension("2.5.29.17", false, seq(gn)));
  }
  if (f.ski) list.push(extension("2.5.29.14", false, octets(f.ski)));
  if (f.aki) list.push(extension("2.5.29.35", false, seq(tlv(0x80, f.aki))));
  return tlv(0xa3, seq(...list));
}

/** WebCrypto's ECDSA signature (r || s, 32 bytes each) as DER's ECDSA-Sig-Value. */
function derSignature(raw: Buffer): Buffer {
  const half = raw.length / 2;
  return seq(uint(raw.subarray(0, half)), uint(raw.subarray(half)));
}

/** The certificate, DER, signed by signingKey (ECDSA P-256 with SHA-256). */
export async function certificate(f: CertFields, signingKey: webcrypto.CryptoKey): Promise<Buffer> {
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // v3
    uint(f.serial),
    ECDSA_SHA256,
    f.issuer,
    seq(time(f.notBefore), time(f.notAfter)),
    f.subject,
    f.spki,
    extensions(f),
  );
  const sig = Buffer.from(await SUBTLE.sign({ name: "ECDSA", hash: "SHA-256" }, signingKey, tbs));
  return seq(tbs, ECDSA_SHA256, bits(derSignature(sig)));
}

export function pem(label: string, der: Buffer): string {
  const b64 = der.toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}
