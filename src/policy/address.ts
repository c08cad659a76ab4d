import ipaddr from "ipaddr.js";

/**
 * Canonical destinations. Every host a client names is reduced to one spelling
 * before any rule sees it: lower case, no trailing dot, and every IPv4 spelling
 * (`127.1`, `2130706433`, `0x7f000001`, `0177.0.0.1`) and every IPv4-mapped or
 * -compatible IPv6 spelling parsed to the one dotted quad it means.
 * The unspecified addresses are spelled as the loopback address they reach:
 * Linux connects 0.0.0.0 to 127.0.0.1 and :: to ::1, so a rule or a check
 * that saw them apart would let `0.0.0.0:Q` reach a listener on 127.0.0.1:Q
 * that `--deny-net 127.0.0.1` names.
 */
export type Host = { kind: "name"; name: string } | { kind: "ip"; ip: string; family: 4 | 6 };

export class AddressError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AddressError";
  }
}

const MAX_NAME = 253;
const MAX_LABEL = 63;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?$/;

/** Parses one IPv4 part the way inet_aton and the WHATWG URL parser do: 0x hex, leading-0 octal, decimal. */
function ipv4Part(part: string): number | undefined {
  if (part === "") return undefined;
  let radix = 10;
  let digits = part;
  if (/^0x/i.test(part)) {
    radix = 16;
    digits = part.slice(2);
    if (digits === "") return 0;
  } else if (part.length > 1 && part.startsWith("0")) {
    radix = 8;
    digits = part.slice(1);
  }
  const valid = radix === 16 ? /^[0-9a-f]+$/i : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!valid.test(digits)) return undefined;
  const n = parseInt(digits, radix);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * An IPv4 address in any of its spellings, or undefined when the text is not
 * one. A name whose last label is numeric is an IPv4 address or an error, never
 * a name (this is how browsers and curl treat it, so it is how we must).
 */
export function parseIPv4(text: string): string | undefined {
  const parts = text.split(".");
  if (parts.length > 4) return undefined;
  const nums = parts.map(ipv4Part);
  if (nums.some((n) => n === undefined)) return undefined;
  const values = nums as number[];
  const last = values.pop()!;
  if (values.some((n) => n > 255)) return undefined;
  if (last >= 256 ** (4 - values.length)) return undefined;
  let v = last;
  values.forEach((n, i) => (v += n * 256 ** (3 - i)));
  return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join(".");
}

function endsInNumber(name: string): boolean {
  const labels = name.split(".");
  const last = labels[labels.length - 1] ?? "";
  return /^[0-9]+$/.test(last) || /^0x[0-9a-f]*$/i.test(last);
}

const UNSPECIFIED_V4 = "0.0.0.0";
const UNSPECIFIED_V6 = "::";

/** The address a TCP connect to ip reaches: the unspecified addresses mean this host's loopback. */
export function connectAddress(ip: string): string {
  if (ip === UNSPECIFIED_V4) return "127.0.0.1";
  if (ip === UNSPECIFIED_V6) return "::1";
  return ip;
}

/** Canonical IPv6, or its IPv4 when it embeds one (mapped ::ffff:a.b.c.d or compatible ::a.b.c.d). */
function canonicalIPv6(text: string): Host {
  if (text.includes("%")) throw new AddressError("IPv6 zone identifiers are not allowed");
  if (!ipaddr.IPv6.isValid(text)) throw new AddressError(`not an IPv6 address: ${text}`);
  const a = ipaddr.IPv6.parse(text);
  if (a.isIPv4MappedAddress()) return { kind: "ip", ip: connectAddress(a.toIPv4Address().toString()), family: 4 };
  const p = a.parts;
  // IPv4-compatible (deprecated ::a.b.c.d): the first 96 bits zero, and not :: or ::1 themselves.
  if (p.slice(0, 6).every((x: number) => x === 0) && ((p[6] ?? 0) !== 0 || (p[7] ?? 0) > 1))
    return { kind: "ip", ip: `${(p[6]! >> 8) & 255}.${p[6]! & 255}.${(p[7]! >> 8) & 255}.${p[7]! & 255}`, family: 4 };
  return { kind: "ip", ip: connectAddress(a.toString()), family: 6 };
}

/**
 * Canonicalises a host as a client wrote it (without port). Refuses anything
 * that is not plainly a host: NUL, CR/LF, spaces, userinfo, zone ids, over-long
 * names, bad labels.
 */
export function canonicalHost(raw: string): Host {
  if (raw.length === 0) throw new AddressError("empty host");
  if (raw.length > MAX_NAME + 2) throw new AddressError("host name too long");
  if (/[\u0000-\u0020\u007f]/.test(raw)) throw new AddressError("control characters or spaces in host");
  if (raw.includes("@")) throw new AddressError("userinfo is not allowed in a destination");
  if (raw.includes("%")) throw new AddressError("percent-encoding and zone identifiers are not allowed in a host");
  if (raw.startsWith("[")) {
    if (!raw.endsWith("]")) throw new AddressError("unterminated IPv6 literal");
    return canonicalIPv6(raw.slice(1, -1));
  }
  if (raw.includes(":")) return canonicalIPv6(raw);
  let name = raw.toLowerCase();
  if (name.endsWith(".")) name = name.slice(0, -1);
  if (name.endsWith(".")) throw new AddressError("more than one trailing dot");
  if (endsInNumber(name)) {
    const v4 = parseIPv4(name);
    if (!v4) throw new AddressError(`not a valid IPv4 address: ${raw}`);
    return { kind: "ip", ip: connectAddress(v4), family: 4 };
  }
  if (name.length > MAX_NAME) throw new AddressError("host name too long");
  for (const label of name.split(".")) {
    if (label.length === 0 || label.length > MAX_LABEL || !LABEL.test(label))
      throw new AddressError(`not a valid host name: ${raw}`);
  }
  return { kind: "name", name };
}

export function hostText(h: Host): string {
  return h.kind === "name" ? h.name : h.family === 6 ? `[${h.ip}]` : h.ip;
}

/** Splits "host:port" (IPv6 in brackets) and canonicalises both halves. */
export function parseAuthority(authority: string, defaultPort?: number): { host: Host; port: number } {
  let hostPart = authority;
  let portPart: string | undefined;
  if (authority.startsWith("[")) {
    const end = authority.indexOf("]");
    if (end < 0) throw new AddressError("unterminated IPv6 literal");
    hostPart = authority.slice(0, end + 1);
    const rest = authority.slice(end + 1);
    if (rest) {
      if (!rest.startsWith(":")) throw new AddressError(`bad authority: ${authority}`);
      portPart = rest.slice(1);
    }
  } else {
    const colon = authority.lastIndexOf(":");
    if (colon >= 0) {
      if (authority.indexOf(":") !== colon) throw new AddressError("IPv6 literals must be in brackets");
      hostPart = authority.slice(0, colon);
      portPart = authority.slice(colon + 1);
    }
  }
  let port = defaultPort;
  if (portPart !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portPart)) throw new AddressError(`bad port: ${portPart}`);
    port = Number(portPart);
  }
  if (port === undefined || port < 1 || port > 65535) throw new AddressError(`bad or missing port in ${authority}`);
  return { host: canonicalHost(hostPart), port };
}

/** Address classes that a grant must name exactly before they are reachable. */
export type AddressClass =
  | "public" | "loopback" | "private" | "link-local" | "cgnat" | "multicast" | "unspecified"
  | "documentation" | "metadata" | "broadcast" | "reserved" | "benchmarking" | "unique-local" | "site-local" | "host-interface";

const METADATA = new Set(["169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200"]);

const V4_RANGES: [string, AddressClass][] = [
  ["0.0.0.0/8", "unspecified"], ["10.0.0.0/8", "private"], ["100.64.0.0/10", "cgnat"], ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"], ["172.16.0.0/12", "private"], ["192.0.0.0/24", "reserved"], ["192.0.2.0/24", "documentation"],
  ["192.88.99.0/24", "reserved"], ["192.168.0.0/16", "private"], ["198.18.0.0/15", "benchmarking"],
  ["198.51.100.0/24", "documentation"], ["203.0.113.0/24", "documentation"], ["224.0.0.0/4", "multicast"],
  ["255.255.255.255/32", "broadcast"], ["240.0.0.0/4", "reserved"],
];
const V6_RANGES: [string, AddressClass][] = [
  ["::/128", "unspecified"], ["::1/128", "loopback"], ["fe80::/10", "link-local"], ["fec0::/10", "site-local"],
  ["fc00::/7", "unique-local"], ["ff00::/8", "multicast"], ["2001:db8::/32", "documentation"], ["100::/64", "reserved"],
  ["2001:2::/48", "benchmarking"], ["2001::/23", "reserved"],
  // Local-use NAT64 (RFC 8215): where the IPv4 address sits depends on the site's prefix length.
  ["64:ff9b:1::/48", "reserved"],
];

/**
 * Classifies a canonical IP address. IPv6 forms that carry an IPv4 address
 * (6to4, NAT64) are classified by the address they carry.
 */
export function classify(raw: string, ownAddresses: ReadonlySet<string> = new Set()): AddressClass {
  const ip = connectAddress(ipaddr.parse(raw).toString());
  if (METADATA.has(ip)) return "metadata";
  const cls = rangeClass(ip);
  if (cls === "public" && ownAddresses.has(ip)) return "host-interface";
  return cls;
}

/** The ranges parsed once: parsing them on every check was a tenth of a small proxied request's CPU. */
let parsed: { v4: [ipaddr.IPv4, number, AddressClass][]; carriers: [ipaddr.IPv6, number][]; v6: [ipaddr.IPv6, number, AddressClass][]; global: ipaddr.IPv6 } | undefined;
function ranges(): NonNullable<typeof parsed> {
  return (parsed ??= {
    v4: V4_RANGES.map(([cidr, cls]) => [...ipaddr.IPv4.parseCIDR(cidr), cls]),
    carriers: ["64:ff9b::/96", "::ffff:0:0/96", "::ffff:0:0:0/96"].map((cidr) => ipaddr.IPv6.parseCIDR(cidr)),
    v6: V6_RANGES.map(([cidr, cls]) => [...ipaddr.IPv6.parseCIDR(cidr), cls]),
    global: ipaddr.IPv6.parse("2000::"),
  });
}

function rangeClass(ip: string): AddressClass {
  const a = ipaddr.parse(ip);
  const r = ranges();
  if (a.kind() === "ipv4") {
    for (const [net, bits, cls] of r.v4) if ((a as ipaddr.IPv4).match(net, bits)) return cls;
    return "public";
  }
  const v6 = a as ipaddr.IPv6;
  const p = v6.parts;
  // 6to4 (2002:AABB:CCDD::), NAT64 (64:ff9b::/96), IPv4-mapped and
  // IPv4-translated (::ffff:0:a.b.c.d) addresses carry an IPv4 address.
  const embedded = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (p[0] === 0x2002) return classify(embedded(p[1]!, p[2]!));
  for (const [net, bits] of r.carriers) if (v6.match(net, bits)) return classify(embedded(p[6]!, p[7]!));
  for (const [net, bits, cls] of r.v6) if (v6.match(net, bits)) return cls;
  // Only 2000::/3 is global unicast; the rest (::/8 spellings such as ::ffff:0:0:a.b.c.d among them) reaches nothing public.
  return v6.match(r.global, 3) ? "public" : "reserved";
}
