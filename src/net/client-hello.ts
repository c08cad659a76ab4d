/**
 * The names a TLS ClientHello asks for (its server_name extension), read from
 * the first bytes a client sends in an opaque tunnel: the gate does not
 * terminate that TLS, but a server that hosts several names picks one by the
 * SNI, so the tunnel's CONNECT target must be the name asked for (connect.ts).
 * Only the handshake records are read, reassembled up to the whole
 * ClientHello; nothing is decrypted or changed.
 */
export type Hello =
  /** The bytes so far are a ClientHello's beginning: more are needed. */
  | { kind: "partial" }
  /** A whole ClientHello, with every host_name of its server_name extension (none: it asked for no name). */
  | { kind: "hello"; names: string[] }
  /** TLS records, but no ClientHello the gate can read: a server could read a name in it the gate did not. */
  | { kind: "malformed"; why: string };

/** The largest ClientHello read: one with post-quantum key shares is ~2 KB; OpenSSL takes up to 128 KiB. */
export const MAX_HELLO = 64 * 1024;

/** Whether the first bytes are a TLS handshake record (type 22, version 3.x). */
export function looksLikeTls(b: Buffer): boolean {
  return b[0] === 0x16 && (b.length < 2 || b[1] === 0x03) && (b.length < 3 || b[2]! <= 0x04);
}

export function readHello(b: Buffer): Hello {
  // The handshake messages' bytes, from as many records as are here.
  const parts: Buffer[] = [];
  let at = 0;
  let have = 0;
  for (;;) {
    if (b.length - at < 5) break;
    if (b[at] !== 0x16 || b[at + 1] !== 0x03) return { kind: "malformed", why: "a record that is not a handshake record before the ClientHello ended" };
    const len = b.readUInt16BE(at + 3);
    if (len === 0 || len > 16384) return { kind: "malformed", why: `a handshake record of ${len} bytes` };
    if (b.length - at - 5 < len) {
      parts.push(b.subarray(at + 5));
      have += b.length - at - 5;
      break;
    }
    parts.push(b.subarray(at + 5, at + 5 + len));
    have += len;
    at += 5 + len;
    if (have >= 4) {
      const h = Buffer.concat(parts);
      if (4 + h.readUIntBE(1, 3) <= have) break;
    }
  }
  const h = Buffer.concat(parts);
  if (h.length < 4) return { kind: "partial" };
  if (h[0] !== 0x01) return { kind: "malformed", why: "the first handshake message is not a ClientHello" };
  const size = h.readUIntBE(1, 3);
  if (size > MAX_HELLO) return { kind: "malformed", why: `a ClientHello of ${size} bytes` };
  if (h.length < 4 + size) return { kind: "partial" };
  try {
    return { kind: "hello", names: serverNames(h.subarray(4, 4 + size)) };
  } catch (e) {
    return { kind: "malformed", why: (e as Error).message };
  }
}

/** Every host_name in a ClientHello body's server_name extension; throws where the body does not parse. */
function serverNames(body: Buffer): string[] {
  let at = 2 + 32; // version, random
  const skip = (lenBytes: number) => {
    if (at + lenBytes > body.length) throw new Error("a ClientHello cut short");
    const n = body.readUIntBE(at, lenBytes);
    at += lenBytes + n;
    if (at > body.length) throw new Error("a ClientHello cut short");
  };
  skip(1); // session id
  skip(2); // cipher suites
  skip(1); // compression methods
  if (at === body.length) return []; // no extensions
  if (at + 2 > body.length) throw new Error("a ClientHello cut short");
  const end = at + 2 + body.readUInt16BE(at);
  at += 2;
  if (end !== body.length) throw new Error("a ClientHello whose extensions do not end with it");
  const names: string[] = [];
  let seen = false;
  while (at < end) {
    if (at + 4 > end) throw new Error("a ClientHello extension cut short");
    const type = body.readUInt16BE(at);
    const len = body.readUInt16BE(at + 2);
    const data = body.subarray(at + 4, at + 4 + len);
    if (at + 4 + len > end) throw new Error("a ClientHello extension cut short");
    at += 4 + len;
    if (type !== 0) continue;
    if (seen) throw new Error("two server_name extensions");
    seen = true;
    if (data.length < 2 || 2 + data.readUInt16BE(0) !== data.length) throw new Error("a malformed server_name extension");
    for (let i = 2; i < data.length; ) {
      if (i + 3 > data.length) throw new Error("a malformed server_name extension");
      const kind = data[i]!;
      const n = data.readUInt16BE(i + 1);
      if (i + 3 + n > data.length) throw new Error("a malformed server_name extension");
      if (kind === 0) names.push(data.subarray(i + 3, i + 3 + n).toString("latin1"));
      i += 3 + n;
    }
  }
  return names;
}
