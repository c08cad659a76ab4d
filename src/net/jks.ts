import { createHash } from "node:crypto";

/**
 * A Java truststore (JKS, trusted-certificate entries only) for a sandbox's
 * Java clients, which read no PEM bundle. Written here rather than by
 * `keytool`, which would start a JVM (about a second) for every run. The
 * format: magic, version 2, a count, then per entry tag 2, alias, time,
 * "X.509" and the DER certificate; the trailer is SHA-1 over the password
 * (UTF-16BE), "Mighty Aphrodite" and everything before it.
 */
export function javaTrustStore(pems: readonly string[], password = "changeit", now = Date.now()): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    parts.push(b);
  };
  const utf = (s: string) => {
    const b = Buffer.from(s, "utf8");
    const len = Buffer.alloc(2);
    len.writeUInt16BE(b.length);
    parts.push(len, b);
  };
  // The DER is the PEM body decoded; the certificates were parsed where they were read.
  // (Node's base64 decoder skips the line breaks; a pattern that removed them cost ~10 ms per run for a system store.)
  const ders = pems.map((p) => Buffer.from(p.slice(p.indexOf("-----", p.indexOf("-----BEGIN") + 10) + 5, p.lastIndexOf("-----END")), "base64"));
  u32(0xfeedfeed);
  u32(2);
  u32(ders.length);
  for (const [i, der] of ders.entries()) {
    u32(2);
    utf(`vak-${i}`);
    const t = Buffer.alloc(8);
    t.writeBigUInt64BE(BigInt(now));
    parts.push(t);
    utf("X.509");
    u32(der.length);
    parts.push(der);
  }
  const body = Buffer.concat(parts);
  const pw = Buffer.alloc(password.length * 2);
  for (let i = 0; i < password.length; i++) pw.writeUInt16BE(password.charCodeAt(i), i * 2);
  const digest = createHash("sha1").update(pw).update("Mighty Aphrodite", "utf8").update(body).digest();
  return Buffer.concat([body, digest]);
}
