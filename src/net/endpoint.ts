import { type Host, hostText, parseAuthority } from "../policy/address.js";
import { RELAY_PORT } from "../policy/proxy-env.js";
import { canonicalPath, PathError, pathWithin } from "../policy/url-path.js";

/**
 * Provider endpoints: a plain-HTTP base URL inside the sandbox
 * (http://127.0.0.1:3128/.vak/endpoint/NAME, on the relay) that the gate
 * forwards over TLS, verified for the real host, to one URL the user named
 * (https://api.anthropic.com), with the secrets for that host put in. For
 * clients that cannot be given a CA (a pinned bundle, a static binary): no
 * CA is needed, because the sandbox never speaks TLS. Nothing else is
 * reachable through an endpoint: only its host and port, only paths under its
 * base path (canonical, so no dot segment climbs out), and only what the
 * grants allow for that destination, as for any request.
 */
export interface Endpoint {
  /** The variable that holds its base URL inside, lower-cased: also its name in the URL. */
  name: string;
  variable: string;
  scheme: "https" | "http";
  host: Host;
  port: number;
  /** The canonical base path on the upstream ("" for the root). */
  base: string;
  /** The URL as the user gave it, for messages. */
  url: string;
}

export const ENDPOINT_PREFIX = "/.vak/endpoint/";

export class EndpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EndpointError";
  }
}

/** --endpoint VAR=URL. */
export function parseEndpoint(spec: string): Endpoint {
  const eq = spec.indexOf("=");
  const variable = eq > 0 ? spec.slice(0, eq) : "";
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(variable)) throw new EndpointError(`--endpoint ${spec}: write it as VAR=https://host[/base] (e.g. ANTHROPIC_BASE_URL=https://api.anthropic.com)`);
  const url = spec.slice(eq + 1);
  const m = /^(https?):\/\/([^/?#]+)(\/[^?#]*)?$/i.exec(url);
  if (!m) throw new EndpointError(`--endpoint ${spec}: the URL must be http(s)://host[:port][/base], with no query or fragment`);
  const scheme = m[1]!.toLowerCase() as "https" | "http";
  let target;
  try {
    target = parseAuthority(m[2]!, scheme === "https" ? 443 : 80);
  } catch (e) {
    throw new EndpointError(`--endpoint ${spec}: ${(e as Error).message}`);
  }
  let base = "";
  try {
    base = m[3] ? canonicalPath(m[3]).path.replace(/\/$/, "") : "";
  } catch (e) {
    if (e instanceof PathError) throw new EndpointError(`--endpoint ${spec}: ${e.message}`);
    throw e;
  }
  return { name: variable.toLowerCase(), variable, scheme, host: target.host, port: target.port, base, url };
}

/** The base URL a sandboxed client is given for an endpoint. */
export function endpointUrl(e: Endpoint, relayPort = RELAY_PORT): string {
  return `http://127.0.0.1:${relayPort}${ENDPOINT_PREFIX}${e.name}`;
}

export type EndpointMatch =
  | { ok: true; endpoint: Endpoint; path: string; checkedPath: string }
  | { ok: false; reason: string };

/**
 * Whether a request target is for an endpoint: origin-form (a client that
 * talks to the relay directly) or absolute-form to the relay's own address (a
 * client that sends everything to its proxy). Undefined when it is not.
 */
export function matchEndpoint(target: string, endpoints: readonly Endpoint[], relayPort = RELAY_PORT): EndpointMatch | undefined {
  let rest: string;
  const abs = /^http:\/\/(?:127\.0\.0\.1|localhost|\[::1\]):(\d+)(\/.*)?$/i.exec(target);
  if (abs) {
    if (Number(abs[1]) !== relayPort) return undefined;
    rest = abs[2] ?? "/";
  } else if (target.startsWith("/")) rest = target;
  else return undefined;
  if (!rest.startsWith(ENDPOINT_PREFIX)) return target.startsWith("/") ? { ok: false, reason: "a request to the relay itself that names no endpoint" } : undefined;
  const after = rest.slice(ENDPOINT_PREFIX.length);
  const slash = after.search(/[/?]/);
  const name = slash < 0 ? after : after.slice(0, slash);
  const endpoint = endpoints.find((e) => e.name === name.toLowerCase());
  if (!endpoint) return { ok: false, reason: `no endpoint named ${name.slice(0, 64)} in this run; give one with --endpoint VAR=URL` };
  const tail = slash < 0 ? "/" : after.slice(slash).startsWith("?") ? `/${after.slice(slash)}` : after.slice(slash);
  let cp;
  try {
    cp = canonicalPath(`${endpoint.base}${tail}`);
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
  if (endpoint.base && !pathWithin(cp.path, endpoint.base)) return { ok: false, reason: `the path ${cp.path} is outside the endpoint's base ${endpoint.base}` };
  return { ok: true, endpoint, path: cp.path + cp.query, checkedPath: cp.path };
}

/** Whether a CONNECT target is the relay itself (some clients' proxy agents tunnel even plain HTTP, to an endpoint too). */
export function isRelay(host: Host, port: number, relayPort = RELAY_PORT): boolean {
  return port === relayPort && ((host.kind === "ip" && (host.ip === "127.0.0.1" || host.ip === "::1")) || (host.kind === "name" && host.name === "localhost"));
}

/** host[:port] of an endpoint, for records. */
export function endpointAuthority(e: Endpoint): string {
  return `${hostText(e.host)}${e.port === (e.scheme === "https" ? 443 : 80) ? "" : `:${e.port}`}`;
}
