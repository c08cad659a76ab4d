import { lookup } from "node:dns/promises";
import { networkInterfaces } from "node:os";
import { type AddressClass, canonicalHost, classify, type Host, hostText } from "./address.js";
import { namesLiteral, type NetPolicy } from "./rules.js";

/** Looks a name up on the host. Injected in tests so that no real resolver is asked. */
export type Resolver = (name: string) => Promise<string[]>;

export const systemResolver: Resolver = async (name) => (await lookup(name, { all: true, verbatim: true })).map((a) => a.address);

/** The host's own interface addresses: reachable only by naming them exactly. */
export function hostAddresses(): Set<string> {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) {
      try {
        const h = canonicalHost(a.address.split("%")[0]!);
        if (h.kind === "ip") own.add(h.ip);
      } catch {
        // an interface address we cannot parse is not one a client can name either
      }
    }
  return own;
}

export type Resolution =
  | { ok: true; address: string; family: 4 | 6; resolved: string[] }
  | { ok: false; reason: string; resolved: string[] };

/**
 * Resolves a destination on the host, once, and picks the address to connect
 * to. Loopback, private, link-local, metadata and the host's own addresses are
 * refused unless a grant names that exact literal. The caller connects to the
 * returned address and never looks the name up again.
 */
export async function resolveDestination(host: Host, port: number, policy: NetPolicy, resolver: Resolver, own: ReadonlySet<string>): Promise<Resolution> {
  let candidates: string[];
  if (host.kind === "ip") candidates = [host.ip];
  else {
    try {
      candidates = await resolver(host.name);
    } catch (e) {
      return { ok: false, reason: `DNS lookup of ${host.name} failed (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`, resolved: [] };
    }
    if (candidates.length === 0) return { ok: false, reason: `${host.name} has no addresses`, resolved: [] };
  }
  const resolved: string[] = [];
  const refused: string[] = [];
  for (const raw of candidates) {
    let ip: Host;
    try {
      ip = canonicalHost(raw);
    } catch {
      continue;
    }
    if (ip.kind !== "ip") continue;
    resolved.push(ip.ip);
    const cls: AddressClass = classify(ip.ip, own);
    if (cls === "public" || namesLiteral(policy, ip.ip, port)) return { ok: true, address: ip.ip, family: ip.family, resolved };
    refused.push(`${ip.ip} (${cls})`);
  }
  const what = host.kind === "ip" ? `${hostText(host)} is` : `${host.name} resolves only to`;
  return {
    ok: false,
    reason: `${what} ${refused.join(", ") || "nothing usable"}; only a grant naming that exact address can reach it`,
    resolved,
  };
}
