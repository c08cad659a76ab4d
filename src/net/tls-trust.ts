import { X509Certificate } from "node:crypto";
import { closeSync, constants, fstatSync, openSync, readFileSync, readSync } from "node:fs";
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import { VakError } from "../policy/errors.js";
import { FAST_FIRST } from "./tls-ca.js";

/**
 * What the gate trusts upstream, and what a sandbox trusts: the host's system
 * store (the first bundle found where distributions keep it, else Node's own
 * roots), the host's NODE_EXTRA_CA_CERTS, and each CA file the user named
 * (`--ca-file`, `[egress] ca_files`). Inside a sandbox whose gate may
 * terminate TLS, one bundle holds the run's CA and every one of these roots,
 * so that an untouched tunnel to a server signed by a user's CA verifies as
 * well as a terminated one; every variable that common clients read points at it.
 */
export interface UpstreamTrust {
  /** Root certificates, PEM, one per entry. */
  roots: string[];
  /** Where they came from, for `vak doctor` and messages. */
  sources: string[];
  /** The client context for upstream connections, made once. */
  context(): SecureContext;
}

/** Where distributions keep the system bundle (the list Go and OpenSSL builds look through). */
const SYSTEM_BUNDLES = [
  "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
  "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem",
];

const BEGIN = "-----BEGIN CERTIFICATE-----";
const END = "-----END CERTIFICATE-----";

/** The certificate blocks of a PEM file, by a scan (a system bundle is ~200 KB, read on every run that needs it). */
function blocks(text: string): string[] {
  const out: string[] = [];
  for (let i = text.indexOf(BEGIN); i >= 0; i = text.indexOf(BEGIN, i)) {
    const end = text.indexOf(END, i + BEGIN.length);
    if (end < 0) break;
    const body = text.slice(i + BEGIN.length, end);
    if (/^[A-Za-z0-9+/=\s]+$/.test(body)) out.push(`${BEGIN}${body}${END}\n`);
    i = end + END.length;
  }
  return out;
}

/** A block's identity: its base64 without line breaks (the same certificate, however a file wraps it). */
const identity = (block: string): string => block.slice(BEGIN.length, -END.length - 1).replace(/\s/g, "");

/**
 * A CA file the user named: every block must be a certificate, and there must
 * be one. A block already trusted (seen holds their identities: commonly
 * NODE_EXTRA_CA_CERTS naming the system bundle itself) is left out rather
 * than parsed and loaded again: each root costs ~0.4 ms to parse and as much
 * again in every context and bundle made from them, on every run.
 */
function userCaFile(path: string, what: string, seen: Set<string>): string[] {
  const text = readCaText(path, what);
  const found = blocks(text);
  if (found.length === 0) throw new VakError("bad-input", `${what} ${path}: no PEM certificate in it`);
  const fresh: string[] = [];
  for (const b of found) {
    const id = identity(b);
    if (seen.has(id)) continue;
    seen.add(id);
    fresh.push(b);
    try {
      new X509Certificate(b);
    } catch (e) {
      throw new VakError("bad-input", `${what} ${path}: a certificate in it does not parse (${(e as Error).message})`);
    }
  }
  return fresh;
}

/** The largest CA file read: a system bundle is ~200 KB; a bigger one is not a CA file. */
const MAX_CA_FILE = 8 * 1024 * 1024;

/**
 * A CA file's text, from a regular file only and at most MAX_CA_FILE bytes. The resident host reads the files its
 * clients name: a FIFO would hold its one thread in open(2) or read(2) (every client's gate with it), and an
 * endless file (a FIFO written forever, /dev/zero) would fill its memory. Opened without waiting (O_NONBLOCK),
 * and refused unless fstat says regular (/proc's files are regular, and end).
 */
function readCaText(path: string, what: string): string {
  const refuse = (why: string) => new VakError("bad-input", `${what} ${path}: ${why}`);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    throw refuse(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    if (!fstatSync(fd).isFile()) throw refuse("not a regular file (a CA file is read whole, from a file)");
    const parts: Buffer[] = [];
    let got = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(64 * 1024);
      let r: number;
      try {
        r = readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        throw refuse(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      }
      if (r === 0) break;
      parts.push(buf.subarray(0, r));
      got += r;
      if (got > MAX_CA_FILE) throw refuse(`over ${MAX_CA_FILE / 1024 / 1024} MiB, too large for a CA file`);
    }
    return Buffer.concat(parts, got).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

export function upstreamTrust(opts: { caFiles?: readonly string[]; env?: NodeJS.ProcessEnv; systemBundles?: readonly string[] } = {}): UpstreamTrust {
  const env = opts.env ?? process.env;
  const roots: string[] = [];
  const sources: string[] = [];
  let system: string[] = [];
  for (const f of opts.systemBundles ?? SYSTEM_BUNDLES) {
    try {
      system = blocks(readFileSync(f, "utf8"));
    } catch {
      continue;
    }
    if (system.length) {
      sources.push(f);
      break;
    }
  }
  if (!system.length) {
    system = rootCertificates.map((c) => `${c.trim()}\n`);
    sources.push("Node's built-in roots");
  }
  const seen = new Set<string>();
  for (const b of system) {
    const id = identity(b);
    if (seen.has(id)) continue;
    seen.add(id);
    roots.push(b);
  }
  if (env.NODE_EXTRA_CA_CERTS) {
    roots.push(...userCaFile(env.NODE_EXTRA_CA_CERTS, "NODE_EXTRA_CA_CERTS", seen));
    sources.push(env.NODE_EXTRA_CA_CERTS);
  }
  for (const f of opts.caFiles ?? []) {
    roots.push(...userCaFile(f, "--ca-file", seen));
    sources.push(f);
  }
  let ctx: SecureContext | undefined;
  return { roots, sources, context: () => (ctx ??= createSecureContext({ ca: roots, minVersion: "TLSv1.2", ciphers: FAST_FIRST })) };
}

/**
 * The variables clients read for their trust bundle, all pointing at one file:
 * OpenSSL (and so curl, Python's ssl, httpx, Go, Ruby), curl, requests, Node
 * (added to its own roots), git, pip, Deno, Cargo, the AWS CLI and gRPC; Java
 * reads a truststore, given as a system property through JAVA_TOOL_OPTIONS.
 */
export function trustEnv(bundle: string, javaTrustStore?: string, existing: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "DENO_CERT", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "npm_config_cafile"])
    env[name] = bundle;
  if (javaTrustStore) {
    // Java reads no proxy variable either: its proxy properties go with the truststore.
    const proxy = "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128";
    const props = `-Djavax.net.ssl.trustStore=${javaTrustStore} -Djavax.net.ssl.trustStoreType=JKS -Djavax.net.ssl.trustStorePassword=changeit ${proxy}`;
    env.JAVA_TOOL_OPTIONS = existing.JAVA_TOOL_OPTIONS ? `${existing.JAVA_TOOL_OPTIONS} ${props}` : props;
  }
  return env;
}
