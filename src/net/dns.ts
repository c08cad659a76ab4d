import { readFileSync } from "node:fs";
import { Resolver as AresResolver } from "node:dns/promises";

/** Looks a name up on the host. Injected in tests so that no real resolver is asked. */
export type Resolver = (name: string) => Promise<string[]>;

export const LOOKUP_MS = 5_000;

/** The addresses a hosts file gives a name: every matching line, in file order (glibc's "multi on"). */
export function hostsFileAddresses(text: string, name: string): string[] {
  const found: string[] = [];
  for (const line of text.split("\n")) {
    const [address, ...names] = line.replace(/#.*/, "").trim().split(/\s+/);
    if (address && names.some((n) => n.toLowerCase().replace(/\.$/, "") === name)) found.push(address);
  }
  return found;
}

function timedOut(name: string, ms: number): NodeJS.ErrnoException {
  return Object.assign(new Error(`DNS lookup of ${name} timed out after ${ms} ms`), { code: "ETIMEOUT" });
}

/**
 * Name lookup as the host does it for its hosts file and DNS servers, but on
 * c-ares rather than getaddrinfo. getaddrinfo runs on Node's four-thread pool
 * and cannot be cancelled: a few lookups of a name whose server never answers
 * would hold every thread, stalling all other lookups and file I/O in vak.
 * c-ares queries run on the event loop and are cancelled at the deadline.
 * The hosts file is read first, as nsswitch's usual "files dns" does; other
 * nsswitch sources (mDNS, LDAP) are not asked, and, as with any DNS query
 * Node makes, the search list is not applied to single-label names.
 */
export function dnsResolver(opts: { hostsFile?: string; servers?: string[]; timeoutMs?: number } = {}): Resolver {
  const hostsFile = opts.hostsFile ?? "/etc/hosts";
  const ms = opts.timeoutMs ?? LOOKUP_MS;
  return async (name) => {
    let hosts = "";
    try {
      hosts = readFileSync(hostsFile, "latin1");
    } catch {
      // no hosts file: DNS alone
    }
    const listed = hostsFileAddresses(hosts, name);
    if (listed.length) return listed;
    // Two tries whose timeouts (t, then 2t) fit in the deadline; the cancel is the backstop.
    const ares = new AresResolver({ timeout: Math.max(1, Math.floor(ms / 3)), tries: 2 });
    if (opts.servers) ares.setServers(opts.servers);
    let expired = false;
    const timer = setTimeout(() => {
      expired = true;
      ares.cancel();
    }, ms);
    try {
      const [v4, v6] = await Promise.allSettled([ares.resolve4(name), ares.resolve6(name)]);
      const found = [...(v4.status === "fulfilled" ? v4.value : []), ...(v6.status === "fulfilled" ? v6.value : [])];
      const failed = [v4, v6].find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (found.length || !failed) return found;
      if (expired || (failed.reason as NodeJS.ErrnoException).code === "ETIMEOUT") throw timedOut(name, ms);
      throw failed.reason;
    } finally {
      clearTimeout(timer);
    }
  };
}

/** A lookup that gives up at the deadline, whatever resolver it wraps. */
export function withDeadline(resolver: Resolver, ms: number): Resolver {
  return (name) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(timedOut(name, ms)), ms);
      resolver(name).then(
        (a) => (clearTimeout(timer), resolve(a)),
        (e: unknown) => (clearTimeout(timer), reject(e)),
      );
    });
}
