import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { isIPv6 } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import type { Host } from "../policy/address.js";
import { javaTrustStore } from "./jks.js";
import { createRunCa, type RunCa } from "./tls-ca.js";
import { sweepBuffersInScavenges } from "./terminate.js";
import { trustEnv, upstreamTrust, type UpstreamTrust } from "./tls-trust.js";

/**
 * TLS for one run: what the gate needs (the CA, made now if a grant may need
 * termination, and the upstream trust) and what the sandbox gets (a directory
 * holding the trust bundle, and a Java truststore where Java is installed,
 * bound read-only, and the variables that point clients at them). A run with
 * no grant that needs termination and no CA file of the user's gets nothing:
 * no key is made, no file written.
 */
export interface RunTls {
  gate: { ca: () => Promise<RunCa>; trust: UpstreamTrust };
  /** The directory to bind read-only into the sandbox. */
  dir: string;
  env: Record<string, string>;
  /** Whether this run's gate can terminate TLS (its CA is in the bundle). */
  terminates: boolean;
  /**
   * Makes now what a first request would otherwise wait for: the upstream
   * context (every root parsed: ~60 ms of CPU here for a system store of 144)
   * and the leaves of named grants (a wildcard-only run mints one throwaway
   * leaf, which readies WebCrypto's signing for the first real one). Settles
   * when the context and the first four leaves are ready (the rest follow, a
   * few ms each); the
   * first call does the work, later ones return the same promise. `vak exec`
   * calls it once the launcher is building the held sandbox and starts the
   * command when it settles. Not awaited (made while the sandbox was set up),
   * it held this thread when the first request came (+51 ms against +1 ms
   * awaited, in one interleaved run at a load of 1.5); the roots loaded in
   * slices a turn at a time instead, 35-65 of 144 were still to load when
   * curl's first upstream connection needed them (2026-12-03, load ~4).
   */
  warm(): Promise<void>;
  close(): void;
}

/** Whether a Java runtime is on this PATH (then the sandbox gets a truststore too). */
export function hasJava(path = process.env.PATH ?? ""): boolean {
  return path.split(delimiter).some((d) => d.startsWith("/") && existsSync(join(d, "java")));
}

export async function prepareRunTls(opts: {
  terminate: boolean;
  caFiles: readonly string[];
  /** The gate needs upstream trust even without termination (a provider endpoint over https). */
  forceTrust?: boolean;
  env?: NodeJS.ProcessEnv;
  java?: boolean;
  existingEnv?: Record<string, string>;
  /** Hosts whose leaves are minted now, while the sandbox starts, so that a first request does not wait for one. */
  warm?: readonly Host[];
}): Promise<RunTls | undefined> {
  const env = opts.env ?? process.env;
  if (!opts.terminate && !opts.forceTrust && opts.caFiles.length === 0 && !env.NODE_EXTRA_CA_CERTS) return undefined;
  // The CA's keys are made on libuv's threads while this one reads the roots.
  const making = opts.terminate ? createRunCa() : undefined;
  making?.catch(() => undefined);
  const trust = upstreamTrust({ caFiles: opts.caFiles, env });
  const ca = await making;
  if (ca) sweepBuffersInScavenges();
  let warmed: Promise<void> | undefined;
  const warm = (): Promise<void> =>
    (warmed ??= (async () => {
      if (opts.terminate || opts.forceTrust) {
        trust.context();
        // Node's HTTP client checks every request's Host with isIPv6, whose large pattern V8 compiles on first
        // use (~10 ms of this thread): compiled now, not in the first request.
        isIPv6("::1");
      }
      if (!ca) return;
      const hosts = (opts.warm?.length ? opts.warm : [{ kind: "name", name: "warm.vak.invalid" } as const]).slice(0, 16);
      // A leaf that cannot be made now is made (and fails, with its message) when its host is asked for. The
      // first few are awaited; the rest, a signature and a context each, follow meanwhile.
      const mint = (h: Host) => ca.contextFor(h).then(() => undefined, () => undefined);
      await Promise.all(hosts.slice(0, 4).map(mint));
      setImmediate(() => hosts.slice(4).forEach(mint));
    })());
  const dir = mkdtempSync(join(tmpdir(), "vak-tls-"));
  try {
    chmodSync(dir, 0o755); // the sandbox runs as the same user; 0755 keeps it readable whatever the id mapping
    const roots = (ca ? [ca.certPem, ...trust.roots] : trust.roots).map((p) => `${p.replace(/\r\n/g, "\n").trim()}\n`);
    const bundle = join(dir, "ca-bundle.pem");
    writeFileSync(bundle, roots.join(""), { mode: 0o644 });
    let jks: string | undefined;
    if (opts.java ?? hasJava(env.PATH)) {
      jks = join(dir, "truststore.jks");
      writeFileSync(jks, javaTrustStore(roots), { mode: 0o644 });
    }
    return {
      gate: { ca: ca ? async () => ca : () => Promise.reject(new Error("this run's gate has no CA")), trust },
      dir,
      env: trustEnv(bundle, jks, opts.existingEnv),
      terminates: Boolean(ca),
      warm,
      close: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
