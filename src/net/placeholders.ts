import ipaddr from "ipaddr.js";
import { type Host, hostText } from "../policy/address.js";
import type { HeaderList } from "./http1.js";

/**
 * Secrets a sandboxed command holds only as placeholders. The gate replaces a
 * placeholder with its value in request header values (where credentials go:
 * `Authorization: Bearer …`, `x-api-key: …`), for requests to the secret's own
 * hosts, after the destination and method checks; never in the URL or the
 * body, never for another host, and never in clear text across a network
 * (`carries`): there the placeholder goes out as it is (and the record says so). A request that merely mentions a placeholder is
 * not refused: that would break clients for nothing, since a placeholder is
 * worth nothing without the gate.
 */
export interface PlaceholderSecret {
  /** The reference, for the record ("secret:anthropic"); never the value. */
  ref: string;
  placeholder: string;
  value: string;
  /** host or host:port, as granted. */
  hosts: readonly string[];
}

/** Whether a destination is one of a secret's hosts: the host at any port its grants allow, or host:port exactly. */
export function forHost(hosts: readonly string[], host: Host, port: number): boolean {
  const h = hostText(host).toLowerCase();
  return hosts.some((x) => x.toLowerCase() === h || x.toLowerCase() === `${h}:${port}`);
}

/** How a request leaves the gate: over TLS it verifies (terminated, an https endpoint) or not, and to which address. */
export interface Channel {
  tls: boolean;
  address: string;
  /** The host of the upstream proxy ([egress] upstream_proxy) the connection goes through, if it goes through one. */
  proxy?: string | undefined;
}

/**
 * Whether a secret for these hosts may go into a request to this destination: over TLS the gate verifies, at
 * any port the grants allow; in clear text (plain HTTP) only to a loopback address, where nothing crosses a
 * network, or to a host:port the secret names exactly. Otherwise a command could send its placeholder to
 * http://api.example.com/ (a host grant covers port 80) and have the gate put the key on the wire, for anyone
 * on the path, or anyone who answers for the name, to read. A loopback address is on this machine only when
 * the gate connects to it itself (or through an upstream proxy at a loopback address): through a proxy on
 * another machine, the request crosses the network to it in clear text, and reaches that machine's loopback.
 */
export function carries(hosts: readonly string[], host: Host, port: number, via: Channel): boolean {
  if (!forHost(hosts, host, port)) return false;
  if (via.tls || (onThisMachine(via.address) && (via.proxy === undefined || onThisMachine(via.proxy)))) return true;
  const exact = `${hostText(host)}:${port}`.toLowerCase();
  return hosts.some((x) => x.toLowerCase() === exact);
}

/**
 * The address itself is loopback (127.0.0.0/8, ::1, ::ffff:127.x.x.x): not an address that only names one, such
 * as 6to4's 2002:7f00:1::, which the gate would connect to across a network.
 */
function onThisMachine(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const a = ipaddr.parse(address);
  const v4 = a.kind() === "ipv6" && (a as ipaddr.IPv6).isIPv4MappedAddress() ? (a as ipaddr.IPv6).toIPv4Address() : a;
  return v4.range() === "loopback";
}

/** A value the gate may put in a header: no control characters (they would split the head), and bounded. */
export function headerSafe(value: string): boolean {
  return value.length > 0 && value.length <= 8192 && /^[\x20-\x7e\x80-\xff\t]*$/.test(value) && !/^[ \t]|[ \t]$/.test(value);
}

export interface Substituted {
  headers: HeaderList;
  /** References whose value was put in. */
  used: string[];
  /** References whose placeholder went out as it is, to a destination that is not theirs, or outside the headers. */
  withheld: string[];
}

/** Replaces placeholders in header values for this destination (where `carries` allows); the URL target is only looked at, for the record. */
export function substitute(headers: HeaderList, target: string, secrets: readonly PlaceholderSecret[], host: Host, port: number, via: Channel): Substituted {
  if (secrets.length === 0) return { headers, used: [], withheld: [] };
  const used = new Set<string>();
  const withheld = new Set<string>();
  const out: HeaderList = headers.map(([name, value]) => {
    let v = value;
    for (const s of secrets) {
      if (!v.includes(s.placeholder)) continue;
      if (carries(s.hosts, host, port, via)) {
        v = v.split(s.placeholder).join(s.value);
        used.add(s.ref);
      } else withheld.add(s.ref);
    }
    return [name, v];
  });
  for (const s of secrets) if (target.includes(s.placeholder)) withheld.add(s.ref);
  return { headers: out, used: [...used], withheld: [...withheld] };
}
