import { unhandled } from "../protocol/unhandled.js";
import { AddressError, canonicalHost, type Host, hostText } from "./address.js";
import { parsePathRule, PathError, pathWithin } from "./url-path.js";

/**
 * Network grants. A destination is `host`, `*.suffix` (subdomains only: never
 * the apex, never an IP), or an exact IP literal (any spelling); with `:port`,
 * `:*` for any port, or nothing: for a grant the web ports 80 and 443, for a
 * deny rule every port. A `read:` prefix limits the grant to GET, HEAD and
 * OPTIONS. A path after the host (`api.github.com/repos/acme/*`) limits the
 * grant to that prefix of canonical paths (url-path.ts). A grant that needs to
 * see inside a request (read:, a path) is held inside HTTPS by terminating
 * TLS at the gate. Deny rules beat allow rules (a deny rule on an IP literal also
 * covers names that resolve to it), and an empty list reaches nothing.
 */
export type MethodClass = "read" | "any";

export type RuleHost = { kind: "name"; name: string } | { kind: "suffix"; suffix: string } | { kind: "ip"; ip: string };

export interface NetRule {
  host: RuleHost;
  /** A single port, every port, or the web ports (80 and 443). */
  ports: number | "any" | "web";
  methods: MethodClass;
  /** A canonical path prefix ("/repos/acme"); without one, every path. */
  path?: string;
  /** The rule as the user wrote it, for messages. */
  text: string;
}

export interface NetGrants {
  allow: NetRule[];
  deny: NetRule[];
}

export const NO_NET_GRANTS: NetGrants = { allow: [], deny: [] };

export class RuleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RuleError";
  }
}

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function isReadMethod(method: string): boolean {
  return READ_METHODS.has(method.toUpperCase());
}

function splitPort(text: string): [string, string | undefined] {
  if (text.startsWith("[")) {
    const end = text.indexOf("]");
    if (end < 0) throw new RuleError(`${text}: unterminated IPv6 literal`);
    const rest = text.slice(end + 1);
    if (rest && !rest.startsWith(":")) throw new RuleError(`${text}: expected :port after the address`);
    return [text.slice(0, end + 1), rest ? rest.slice(1) : undefined];
  }
  const colon = text.lastIndexOf(":");
  if (colon < 0) return [text, undefined];
  if (text.indexOf(":") !== colon) throw new RuleError(`${text}: IPv6 literals must be in brackets`);
  return [text.slice(0, colon), text.slice(colon + 1)];
}

/** Parses one grant as written on the command line or in a spec. */
export function parseNetRule(text: string, opts: { deny?: boolean } = {}): NetRule {
  const flag = opts.deny ? "--deny-net" : "--allow-net";
  let rest = text.trim();
  let methods: MethodClass = "any";
  if (rest.startsWith("read:")) {
    if (opts.deny) throw new RuleError(`${flag} ${text}: a deny rule covers every method; drop "read:"`);
    methods = "read";
    rest = rest.slice("read:".length);
  }
  let path: string | undefined;
  const slash = rest.indexOf("/");
  if (slash >= 0) {
    if (opts.deny) throw new RuleError(`${flag} ${text}: a deny rule covers a whole host; to allow only some paths, grant those paths`);
    try {
      path = parsePathRule(rest.slice(slash));
    } catch (e) {
      if (e instanceof PathError) throw new RuleError(`${flag} ${text}: ${e.message}`);
      throw e;
    }
    rest = rest.slice(0, slash);
  }
  const [hostPart, portPart] = splitPort(rest);
  // Deny broadly: a deny rule without a port must not leave 8080 or 22 open.
  let ports: NetRule["ports"] = opts.deny ? "any" : "web";
  if (portPart === "*") ports = "any";
  else if (portPart !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portPart) || Number(portPart) < 1 || Number(portPart) > 65535)
      throw new RuleError(`${flag} ${text}: bad port "${portPart}"`);
    ports = Number(portPart);
  }
  if (hostPart === "*" || hostPart === "" || hostPart === "*.")
    throw new RuleError(`${flag} ${text}: would grant every host; name the hosts`);
  let host: RuleHost;
  if (hostPart.startsWith("*.")) {
    const suffix = hostPart.slice(2);
    let canon: Host;
    try {
      canon = canonicalHost(suffix);
    } catch (e) {
      throw new RuleError(`${flag} ${text}: ${(e as Error).message}`);
    }
    if (canon.kind !== "name") throw new RuleError(`${flag} ${text}: a wildcard cannot cover IP addresses`);
    if (!canon.name.includes(".")) throw new RuleError(`${flag} ${text}: *.${canon.name} would cover a whole top-level domain`);
    host = { kind: "suffix", suffix: canon.name };
  } else {
    if (hostPart.includes("*")) throw new RuleError(`${flag} ${text}: "*" is allowed only as a leading "*." label`);
    let canon: Host;
    try {
      canon = canonicalHost(hostPart);
    } catch (e) {
      if (e instanceof AddressError) throw new RuleError(`${flag} ${text}: ${e.message}`);
      throw e;
    }
    host = canon.kind === "ip" ? { kind: "ip", ip: canon.ip } : { kind: "name", name: canon.name };
  }
  return { host, ports, methods, ...(path === undefined || path === "/" ? {} : { path }), text };
}

export function parseNetGrants(allow: readonly string[], deny: readonly string[] = []): NetGrants {
  return { allow: allow.map((t) => parseNetRule(t)), deny: deny.map((t) => parseNetRule(t, { deny: true })) };
}

function hostMatches(rule: RuleHost, host: Host): boolean {
  switch (rule.kind) {
    case "name":
      return host.kind === "name" && host.name === rule.name;
    case "suffix":
      return host.kind === "name" && host.name.endsWith(`.${rule.suffix}`);
    case "ip":
      return host.kind === "ip" && host.ip === rule.ip;
    default:
      return unhandled(rule, "rule host kind");
  }
}

function portMatches(rule: NetRule, port: number): boolean {
  return rule.ports === "any" || (rule.ports === "web" ? port === 80 || port === 443 : rule.ports === port);
}

export type Decision =
  | { allowed: true; rule: NetRule; /** The gate must see inside this CONNECT: it terminates TLS. */ inspect?: true }
  | { allowed: false; code: "denied" | "no-grant" | "read-only" | "path"; reason: string };

/**
 * Decides a request before anything is resolved or connected. method is the
 * HTTP method, or "CONNECT" for a tunnel. A tunnel to a destination whose
 * grants cover every method and path is opaque; one whose grants are
 * read-only or name paths is allowed only with inspect set, so that the gate
 * terminates TLS and decides each request inside it again, with its path.
 * path is the canonical request path (url-path.ts), when there is one.
 */
export function decideDestination(grants: NetGrants, host: Host, port: number, method: string, path?: string): Decision {
  const dest = `${hostText(host)}:${port}`;
  const denied = grants.deny.find((r) => hostMatches(r.host, host) && portMatches(r, port));
  if (denied) return { allowed: false, code: "denied", reason: `${dest} is denied by --deny-net ${denied.text}` };
  const forHost = grants.allow.filter((r) => hostMatches(r.host, host) && portMatches(r, port));
  if (forHost.length === 0) return { allowed: false, code: "no-grant", reason: `no grant names ${dest}; grant it with --allow-net ${grantHint(host, port)}` };
  if (method === "CONNECT") {
    const whole = forHost.find((r) => r.methods === "any" && r.path === undefined);
    return whole ? { allowed: true, rule: whole } : { allowed: true, rule: forHost[0]!, inspect: true };
  }
  const matching = forHost.filter((r) => r.path === undefined || (path !== undefined && pathWithin(path, r.path)));
  if (matching.length === 0)
    return { allowed: false, code: "path", reason: `no grant covers the path ${path ?? "(none)"} on ${dest}; the grants for it: ${forHost.map((r) => r.text).join(", ")}` };
  const any = matching.find((r) => r.methods === "any");
  if (any) return { allowed: true, rule: any };
  if (isReadMethod(method)) return { allowed: true, rule: matching[0]! };
  return { allowed: false, code: "read-only", reason: `${method} is a write; the grant ${matching[0]!.text} allows only GET, HEAD and OPTIONS` };
}

/**
 * True when some grant for this destination names a path: requests to it are checked on their canonical path.
 * So is a grant with a path for an IP literal on this port: a name may resolve to that address (namesLiteral).
 */
export function hasPathRule(grants: NetGrants, host: Host, port: number): boolean {
  return grants.allow.some((r) => r.path !== undefined && (hostMatches(r.host, host) || r.host.kind === "ip") && portMatches(r, port));
}

/** True when a grant could need the gate to see inside an HTTPS tunnel: read-only, or with a path. */
export function needsInspection(grants: NetGrants): boolean {
  return grants.allow.some((r) => r.methods === "read" || r.path !== undefined);
}

/** Whether a host (or host:port) a secret names is covered by some grant, paths aside. */
export function grantsHost(grants: NetGrants, hostPort: string): boolean {
  try {
    const rule = parseNetRule(hostPort);
    const host: Host = rule.host.kind === "ip" ? canonicalHost(rule.host.ip) : rule.host.kind === "name" ? { kind: "name", name: rule.host.name } : { kind: "name", name: `x.${rule.host.suffix}` };
    // Without a port, the host at any port its grants allow.
    return grants.allow.some((r) => hostMatches(r.host, host) && (typeof rule.ports !== "number" || portMatches(r, rule.ports)));
  } catch {
    return false;
  }
}

function grantHint(host: Host, port: number): string {
  const h = hostText(host);
  return port === 80 || port === 443 ? h : `${h}:${port}`;
}

function methodMatches(rule: NetRule, method: string): boolean {
  return rule.methods === "any" || (method !== "CONNECT" && isReadMethod(method));
}

/** What a request asks of the grant that names a non-public address, beyond its method. */
export interface Reach {
  /** It writes whatever its method (a body, a WebSocket, a method override): only a grant for every method will do. */
  writes?: boolean;
  /** Its canonical path, where one was computed: a grant with a path covers it only under that path. */
  path?: string;
  /** A terminated tunnel, whose requests are each decided again with their path: a grant with a path may open it. */
  eachRequest?: boolean;
}

/**
 * True when a grant for this method names this exact IP literal (the only way to reach a non-public address),
 * and covers what the request asks beyond its method (Reach): the literal's own read: and path hold however
 * the address was named.
 */
export function namesLiteral(grants: NetGrants, ip: string, port: number, method: string, reach: Reach = {}): boolean {
  const canon = literal(ip);
  const covers = (r: NetRule) => r.path === undefined || reach.eachRequest === true || (reach.path !== undefined && pathWithin(reach.path, r.path));
  return grants.allow.some((r) => r.host.kind === "ip" && r.host.ip === canon && portMatches(r, port) && methodMatches(r, method) && (!reach.writes || r.methods === "any") && covers(r));
}

/** The deny rule naming this exact IP literal, if any: it applies to resolved addresses too. */
export function deniesAddress(grants: NetGrants, ip: string, port: number): NetRule | undefined {
  const canon = literal(ip);
  return grants.deny.find((r) => r.host.kind === "ip" && r.host.ip === canon && portMatches(r, port));
}

/** An address in the one spelling rules hold (every IPv4 and mapped spelling, the unspecified ones as loopback). */
function literal(ip: string): string | undefined {
  try {
    const h = canonicalHost(ip.includes(":") && !ip.startsWith("[") ? `[${ip}]` : ip);
    return h.kind === "ip" ? h.ip : undefined;
  } catch {
    return undefined;
  }
}
