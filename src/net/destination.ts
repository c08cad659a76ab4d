import { networkInterfaces } from "node:os";
import { type AddressClass, canonicalHost, classify, type Host, hostText } from "../policy/address.js";
import { dnsResolver, type Resolver } from "./dns.js";
import { deniesAddress, namesLiteral, type NetGrants, type Reach } from "../policy/net-grants.js";

export type { Resolver } from "./dns.js";

/** The host's own resolver: its hosts file, then its DNS servers (see dns.ts). */
export const systemResolver: Resolver = dnsResolver();

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
  | { ok: false; code: "dns" | "not-reachable"; reason: string; resolved: string[] };

/**
 * Resolves a destination on the host, once, and picks the address to connect
 * to. Loopback, private, link-local, metadata and the host's own addresses are
 * refused unless a grant for this method names that exact literal and covers
 * the rest of the request (Reach: a write, its path); an address
 * a deny rule names literally is never used, whatever name led to it. The
 * caller connects to the returned address and never looks the name up again.
 */
export async function resolveDestination(host: Host, port: number, grants: NetGrants, resolver: Resolver, own: ReadonlySet<string>, method: string, reach: Reach = {}): Promise<Resolution> {
  let candidates: string[];
  if (host.kind === "ip") candidates = [host.ip];
  else {
    try {
      candidates = await resolver(host.name);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      const reason = err.code === "ETIMEOUT" ? err.message : `DNS lookup of ${host.name} failed (${err.code ?? err.message})`;
      return { ok: false, code: "dns", reason, resolved: [] };
    }
    if (candidates.length === 0) return { ok: false, code: "dns", reason: `${host.name} has no addresses`, resolved: [] };
  }
  const resolved: string[] = [];
  const refused: string[] = [];
  let nonPublic = false;
  for (const raw of candidates) {
    let ip: Host;
    try {
      ip = canonicalHost(raw);
    } catch {
      continue;
    }
    if (ip.kind !== "ip") continue;
    resolved.push(ip.ip);
    const denied = deniesAddress(grants, ip.ip, port);
    if (denied) {
      refused.push(`${ip.ip} (denied by --deny-net ${denied.text})`);
      continue;
    }
    const cls: AddressClass = classify(ip.ip, own);
    if (cls === "public" || namesLiteral(grants, ip.ip, port, method, reach)) return { ok: true, address: ip.ip, family: ip.family, resolved };
    refused.push(`${ip.ip} (${cls})`);
    nonPublic = true;
  }
  const what = host.kind === "ip" ? `${hostText(host)} is` : `${host.name} resolves only to`;
  return {
    ok: false,
    code: "not-reachable",
    reason: `${what} ${refused.join(", ") || "nothing usable"}${nonPublic ? "; only a grant naming that exact address can reach it" : ""}`,
    resolved,
  };
}
