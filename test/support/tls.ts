import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { webcrypto } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer as createHttpsServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeDestroying, listenLoopback } from "./net.js";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

function pem(label: string, der: ArrayBuffer): string {
  return `-----BEGIN ${label}-----\n${Buffer.from(der).toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "")}\n-----END ${label}-----\n`;
}

/** A test CA of the test's own (never the run's): it signs the loopback HTTPS servers the gate talks to. */
export interface TestCa {
  certPem: string;
  /** Its certificate written to a file, for --ca-file. */
  file: string;
  issue(names: string[], opts?: { notAfter?: Date }): Promise<{ key: string; cert: string }>;
}

export async function testCa(name = "Vak test CA"): Promise<TestCa> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01", name: `CN=${name}`, notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 86_400_000),
    signingAlgorithm: ALG, keys,
    extensions: [new x509.BasicConstraintsExtension(true, 1, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true), await x509.SubjectKeyIdentifierExtension.create(keys.publicKey)],
  });
  const certPem = ca.toString("pem");
  const file = join(mkdtempSync(join(tmpdir(), "vak-test-ca-")), "ca.pem");
  writeFileSync(file, certPem);
  let serial = 2;
  return {
    certPem,
    file,
    async issue(names, opts = {}) {
      const lk = (await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as webcrypto.CryptoKeyPair;
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: (serial++).toString(16).padStart(2, "0"), subject: `CN=${names[0]}`, issuer: ca.subject,
        notBefore: new Date(Date.now() - 60_000), notAfter: opts.notAfter ?? new Date(Date.now() + 3_600_000),
        signingAlgorithm: ALG, publicKey: lk.publicKey, signingKey: keys.privateKey,
        extensions: [
          new x509.SubjectAlternativeNameExtension(names.map((n) => (/^[0-9.]+$|:/.test(n) ? { type: "ip" as const, value: n } : { type: "dns" as const, value: n }))),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          await x509.AuthorityKeyIdentifierExtension.create(ca, false),
        ],
      });
      return { key: pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", lk.privateKey)), cert: leaf.toString("pem") };
    },
  };
}

export interface HttpsUpstream {
  port: number;
  server: Server;
  requests: { method: string; url: string; headers: IncomingMessage["headers"]; body: string; alpn: string | false }[];
  close(): Promise<void>;
}

/** A loopback HTTPS server with a leaf from the test CA, recording every request that reached it. */
export async function httpsUpstream(
  ca: TestCa,
  names: string[],
  handler?: (req: IncomingMessage, body: string, res: ServerResponse) => boolean | void,
): Promise<HttpsUpstream> {
  const { key, cert } = await ca.issue(names);
  const requests: HttpsUpstream["requests"] = [];
  const server = createHttpsServer({ key, cert, ALPNProtocols: ["http/1.1"] }, (req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body, alpn: (req.socket as unknown as { alpnProtocol: string | false }).alpnProtocol });
      if (handler?.(req, body, res)) return;
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`ok ${req.method} ${req.url}\n`);
    });
  });
  // A WebSocket that echoes raw bytes back: enough to show an upgrade is carried and counted.
  server.on("upgrade", (req: IncomingMessage, socket: import("node:net").Socket) => {
    requests.push({ method: "UPGRADE", url: req.url ?? "", headers: req.headers, body: "", alpn: false });
    socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: test\r\n\r\n");
    socket.on("data", (d: Buffer) => socket.write(d));
    socket.on("error", () => {});
  });
  const close = closeDestroying(server);
  const port = await listenLoopback(server);
  return { port, server, requests, close };
}
