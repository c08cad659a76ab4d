/**
 * Cross-site request forgery, refused two ways. A browser attaches our cookie
 * to requests that another page makes (a form post, a fetch, an image): with
 * SameSite=Strict only from the same *site*, and every port of 127.0.0.1 is
 * one site, so a page served by any other local server would still send it.
 *
 * 1. Fetch metadata, before authentication: a request the browser labels
 *    `Sec-Fetch-Site: cross-site` or `same-site` was started by another
 *    site's or another port's page; our own client only ever makes
 *    same-origin requests, and a typed or clicked URL is `none`. Refusing
 *    these before the credential check also keeps other pages from spending
 *    the rate limiter's budget.
 * 2. Origin, after authentication: a request that changes state and is
 *    authenticated by the cookie must carry an Origin that is ours. No Origin
 *    with a cookie is refused: programs (curl, the CLI) send the bearer, so
 *    this costs them nothing. A foreign Origin is refused on any request.
 */
export const SAFE_METHODS = new Set(["GET", "HEAD"]);

/** The origins our own pages have: each loopback name with our port, and each trusted host, in the scheme the browser sees. */
export function ownOrigins(port: number, trustedHosts: readonly string[], scheme: "http" | "https", loopbackScheme: "http" | "https", also: readonly string[] = []): Set<string> {
  const defaultPort = loopbackScheme === "https" ? 443 : 80;
  const out = new Set<string>();
  for (const name of ["127.0.0.1", "localhost", "[::1]", ...also]) out.add(port === defaultPort ? `${loopbackScheme}://${name}` : `${loopbackScheme}://${name}:${port}`);
  for (const h of trustedHosts) out.add(`${scheme}://${h.toLowerCase()}`);
  return out;
}

/** Why the browser's own label says another page made this request, or undefined. */
export function fetchSiteRefusal(secFetchSite: string | undefined): string | undefined {
  const v = secFetchSite?.trim().toLowerCase();
  if (v === "cross-site" || v === "same-site") return `refused: the browser says another site's page made this request (Sec-Fetch-Site: ${v})`;
  return undefined;
}

/** Why a request's Origin is refused, given how it was authenticated, or undefined. */
export function originRefusal(method: string, origin: string | undefined, via: "cookie" | "bearer" | "none", own: ReadonlySet<string>): string | undefined {
  if (origin !== undefined) {
    // "null" is what sandboxed frames, file: pages and some redirects send: never ours.
    return own.has(origin.trim().toLowerCase()) ? undefined : "refused: the request comes from a page of another origin";
  }
  if (via === "cookie" && !SAFE_METHODS.has(method.toUpperCase())) return "refused: a request that changes something and carries the session cookie must carry this server's Origin; programs send Authorization: Bearer instead";
  return undefined;
}
