import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { FORWARDING_HEADERS, isLocalPeer, type ServerAuth } from "./auth.js";
import { applySecurityHeaders } from "./headers.js";
import type { HostPolicy } from "./host-check.js";
import { fetchSiteRefusal, originRefusal } from "./origin.js";

/**
 * The exposure policy as Hono middleware, in the order app.ts mounts them
 * (the Host check runs before any of them, on the raw request: listener.ts).
 * Each is a thin adapter over a pure decider that is tested alone.
 */
export type Env = { Bindings: HttpBindings; Variables: { via: "cookie" | "bearer" | "none" } };

const refuse = (c: Context<Env>, status: 401 | 403 | 405 | 415 | 429, code: string, message: string) =>
  c.json({ error: { code, message } }, status);

export function peerOf(c: Context<Env>): string {
  return c.env.incoming.socket.remoteAddress ?? "unknown";
}

/** Security headers on every response, refusals included; no CORS header ever leaves. */
export function securityHeaders(): MiddlewareHandler<Env> {
  return async (c, next) => {
    await next();
    applySecurityHeaders((k, v) => c.res.headers.set(k, v), (k) => c.res.headers.delete(k));
    if (c.req.path.startsWith("/api/") || c.req.query("token") !== undefined) c.res.headers.set("Cache-Control", "no-store");
  };
}

/** GET, HEAD and POST only: an OPTIONS preflight gets no answer that would let another origin send more. */
export function onlyMethods(): MiddlewareHandler<Env> {
  return async (c, next) => {
    if (!["GET", "HEAD", "POST"].includes(c.req.method)) return refuse(c, 405, "method", `${c.req.method} is not served`);
    return next();
  };
}

/** The browser's own label on who made the request, before any credential is looked at. */
export function fetchMetadataGuard(): MiddlewareHandler<Env> {
  return async (c, next) => {
    const why = fetchSiteRefusal(c.req.header("sec-fetch-site"));
    return why ? refuse(c, 403, "cross-site", why) : next();
  };
}

/** Paths anyone may fetch: the client's own files, which hold nothing but code. */
const isPublic = (path: string) => path === "/" || path === "/index.html" || path.startsWith("/assets/") || path === "/favicon.svg";

/**
 * Authentication. `/?token=…` logs a browser in, only from this machine's
 * loopback, on a loopback name, not through a proxy: anywhere else a token
 * in a URL is a credential in an access log. The answer is a 303 to the same
 * URL without the token, with the session cookie. Everything under /api/
 * needs the bearer or the cookie; the login form (POST /api/login) is the
 * way in for a browser that reached us by a trusted host name.
 */
export function authGuard(auth: ServerAuth, hosts: HostPolicy): MiddlewareHandler<Env> {
  return async (c, next) => {
    const url = new URL(c.req.url);
    const peer = peerOf(c);
    if (url.searchParams.has("token")) {
      if (c.req.method !== "GET" || url.pathname !== "/") return refuse(c, 403, "token-in-url", "a token in a URL is accepted only by GET / (the login URL)");
      const forwarded = FORWARDING_HEADERS.some((h) => c.req.header(h) !== undefined);
      const host = (c.req.header("host") ?? "").toLowerCase();
      if (!isLocalPeer(peer) || forwarded || !hosts.loopback.has(host))
        return refuse(c, 403, "token-in-url", "a token in the URL is accepted only from this machine's loopback (127.0.0.1 or ::1) on a loopback name; from elsewhere, log in with the form, or send Authorization: Bearer");
      const token = url.searchParams.get("token")!;
      const refused = auth.check("url-token", peer, () => url.searchParams.getAll("token").length === 1 && auth.tokenMatches(token));
      if (refused) return refusal(c, refused);
      url.searchParams.delete("token");
      c.header("Set-Cookie", auth.newSession());
      c.header("Location", `${url.pathname}${url.search}`);
      return c.body(null, 303);
    }
    if (isPublic(url.pathname) || (url.pathname === "/api/login" && c.req.method === "POST")) {
      c.set("via", "none");
      return next();
    }
    const v = auth.authenticate({ authorization: c.req.header("authorization"), cookie: c.req.header("cookie"), peer });
    if (!v.ok) return refusal(c, v);
    c.set("via", v.via);
    return next();
  };
}

function refusal(c: Context<Env>, v: { status: 401 | 429; reason: string; retryAfterS?: number | undefined }) {
  if (v.retryAfterS) c.header("Retry-After", String(v.retryAfterS));
  return refuse(c, v.status, v.status === 429 ? "rate-limited" : "unauthorized", v.reason);
}

/** Cross-site request forgery: a foreign Origin never, and a cookie that changes state only with our Origin. The login form needs our Origin too. */
export function originGuard(own: ReadonlySet<string>): MiddlewareHandler<Env> {
  return async (c, next) => {
    const via = c.req.path === "/api/login" ? "cookie" : c.get("via");
    const why = originRefusal(c.req.method, c.req.header("origin"), via, own);
    return why ? refuse(c, 403, "origin", why) : next();
  };
}

/** Bodies are JSON, and small: a form post (text/plain, urlencoded, multipart) is not a request of ours. */
export function jsonBodies(maxBytes = 256 * 1024): MiddlewareHandler<Env>[] {
  return [
    async (c, next) => {
      if (c.req.method !== "POST") return next();
      const given = c.req.header("content-type");
      const type = (given ?? "").split(";")[0]!.trim().toLowerCase();
      // A POST with no body and no type (curl -X POST …/cancel) is fine; anything that has either is JSON.
      const hasBody = c.req.header("transfer-encoding") !== undefined || Number(c.req.header("content-length") ?? 0) > 0;
      if ((given !== undefined || hasBody) && type !== "application/json") return refuse(c, 415, "content-type", "request bodies are JSON: send Content-Type: application/json");
      return next();
    },
    bodyLimit({ maxSize: maxBytes, onError: (c) => c.json({ error: { code: "too-large", message: `request bodies are at most ${maxBytes} bytes` } }, 413) }),
  ];
}
