/**
 * The first guard, run on the raw request before anything reads its body or
 * hands it to the router: the Host header must be one of the loopback names
 * with the server's port, or exactly one of `[server] trusted_hosts`. This is
 * the defence against DNS rebinding: a page on attacker.example that makes
 * its name resolve to 127.0.0.1 becomes same-origin with us, but its requests
 * still say `Host: attacker.example`. Exact names only; no suffix, no
 * wildcard, no IP spelling games (127.1, 2130706433) and no trailing dot.
 */
export const LOOPBACK_NAMES = ["127.0.0.1", "localhost", "[::1]"] as const;

export interface HostPolicy {
  /** Every Host value accepted, lower case. */
  allowed: ReadonlySet<string>;
  /** The subset that are loopback names (with our port): the only ones a URL token or the terminal may arrive on. */
  loopback: ReadonlySet<string>;
}

/** The Host values this server answers to: loopback names with its port (and the loopback address it binds, if another), plus exactly the trusted names. */
export function hostPolicy(port: number, trustedHosts: readonly string[], scheme: "http" | "https", also: readonly string[] = []): HostPolicy {
  const defaultPort = scheme === "https" ? 443 : 80;
  const loopback = new Set<string>();
  for (const name of [...LOOPBACK_NAMES, ...also]) {
    loopback.add(`${name}:${port}`);
    // A browser leaves the default port out of Host.
    if (port === defaultPort) loopback.add(name);
  }
  return { allowed: new Set([...loopback, ...trustedHosts.map((h) => h.toLowerCase())]), loopback };
}

export type HostVerdict = { ok: true; host: string; loopbackName: boolean } | { ok: false; status: 400 | 421; reason: string };

/**
 * Checks one request's target and Host. rawHeaders is Node's flat
 * [name, value, …] list: Node keeps only the first of duplicate Host headers
 * in req.headers, so duplicates are counted here, where they are all visible.
 */
export function checkHost(policy: HostPolicy, rawHeaders: readonly string[], target: string | undefined): HostVerdict {
  // Absolute-form (GET http://other/ HTTP/1.1) carries a second authority that some code prefers to Host; authority-form and * have no business here.
  if (!target || !target.startsWith("/") || target.startsWith("//"))
    return { ok: false, status: 400, reason: "only origin-form request targets (a path beginning with one /) are served" };
  const hosts: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === "host") hosts.push(rawHeaders[i + 1]!);
  if (hosts.length !== 1) return { ok: false, status: 421, reason: hosts.length ? "more than one Host header" : "no Host header" };
  const host = hosts[0]!.trim().toLowerCase();
  if (!policy.allowed.has(host))
    return { ok: false, status: 421, reason: "this server does not answer to that host name; if it should, add the exact name to [server] trusted_hosts in ~/.config/vak/config.toml" };
  return { ok: true, host, loopbackName: policy.loopback.has(host) };
}
