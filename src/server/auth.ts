import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { FailureLimiter } from "./rate-limit.js";

/**
 * Who may use the server: whoever holds its token. Programs send
 * `Authorization: Bearer TOKEN`; a browser trades the token once (in the
 * login URL, or the login form) for a session cookie that is HttpOnly (no
 * script reads it) and SameSite=Strict (no other site's page sends it).
 * Tokens are compared in constant time, session ids are stored only as
 * hashes, and failures are rate-limited (rate-limit.ts).
 */
export type CredentialKind = "bearer" | "cookie" | "url-token" | "login-form";

export type AuthVerdict =
  | { ok: true; via: "bearer" | "cookie" }
  | { ok: false; status: 401 | 429; reason: string; retryAfterS?: number };

const sha = (s: string) => createHash("sha256").update(s, "utf8").digest();

/** The addresses the browser on this machine connects from. Other 127/8 sources (proxies, containers) count as remote. */
export function isLocalPeer(address: string | undefined): boolean {
  return address === "127.0.0.1" || address === "::1" || address === "::ffff:127.0.0.1";
}

/** Headers that say a proxy forwarded the request: then the peer address says nothing about the client. */
export const FORWARDING_HEADERS = ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip"] as const;

const SESSION_IDLE_MS = 24 * 3_600_000;
const MAX_SESSIONS = 256;

export class ServerAuth {
  readonly token: string;
  /**
   * Bound to this instance: the port and a random id. Cookies ignore ports, so
   * every server on this machine's loopback receives ours and can set one of
   * the same name; a name another server cannot know in advance is neither
   * overwritten by a sibling's login nor planted before ours, and a cookie of
   * another instance (an earlier `vak serve` on this port, another port's) is
   * refused as such.
   */
  readonly cookieName: string;
  /** This instance's random id (in the cookie's name). */
  readonly instance: string;
  private readonly tokenHash: Buffer;
  private readonly secure: boolean;
  private readonly now: () => number;
  /** sha256(session id) → last use. */
  private readonly sessions = new Map<string, number>();
  readonly limiter: FailureLimiter;

  constructor(opts: { port: number; secure: boolean; token?: string; instance?: string; limiter?: FailureLimiter; now?: () => number }) {
    this.token = opts.token ?? randomBytes(32).toString("base64url");
    this.tokenHash = sha(this.token);
    this.instance = opts.instance ?? randomBytes(8).toString("hex");
    if (!/^[0-9a-f]{16}$/.test(this.instance)) throw new Error("a server instance id is 16 hex digits");
    // __Host- (Secure, Path=/, no Domain) cannot be set by a sibling subdomain; it needs TLS.
    this.cookieName = `${opts.secure ? "__Host-" : ""}vak_${opts.port}_${this.instance}`;
    this.secure = opts.secure;
    this.limiter = opts.limiter ?? new FailureLimiter();
    this.now = opts.now ?? Date.now;
  }

  /** Constant time: both sides are hashed to one length first. */
  tokenMatches(given: string): boolean {
    return timingSafeEqual(sha(given), this.tokenHash);
  }

  /** Checks a presented credential of one kind from one peer, counting failures. */
  check(kind: CredentialKind, peer: string, valid: () => boolean): Extract<AuthVerdict, { ok: false }> | undefined {
    const key = `${kind}\0${peer}`;
    const wait = this.limiter.blockedFor(key);
    if (wait > 0) return { ok: false, status: 429, reason: "too many failed attempts; wait and try again", retryAfterS: Math.ceil(wait / 1000) };
    if (valid()) return undefined;
    this.limiter.fail(key);
    return { ok: false, status: 401, reason: kind === "cookie" ? "the session has ended; log in again with the URL vak serve printed" : "wrong token" };
  }

  /** The request's own credential: the bearer if there is an Authorization header, else the session cookie. */
  authenticate(h: { authorization?: string | undefined; cookie?: string | undefined; peer: string }): AuthVerdict {
    if (h.authorization !== undefined) {
      const m = /^Bearer ([A-Za-z0-9._~+/=-]{1,512})$/.exec(h.authorization.trim());
      const refused = this.check("bearer", h.peer, () => m !== null && this.tokenMatches(m[1]!));
      return refused ?? { ok: true, via: "bearer" };
    }
    const ids = cookieValues(h.cookie, this.cookieName);
    if (ids.length) {
      const refused = this.check("cookie", h.peer, () => ids.some((id) => this.sessionValid(id)));
      return refused ?? { ok: true, via: "cookie" };
    }
    const foreign = vakCookieNames(h.cookie).find((n) => n !== this.cookieName);
    if (foreign !== undefined)
      return { ok: false, status: 401, reason: "not logged in here: the session cookie this browser sent belongs to another `vak serve` (another port, or an earlier one on this port), and is refused; open the login URL this one printed" };
    return { ok: false, status: 401, reason: "not logged in: open the login URL that `vak serve` printed, or send Authorization: Bearer TOKEN" };
  }

  /** A new browser session; returns the Set-Cookie value. */
  newSession(): string {
    const id = randomBytes(32).toString("base64url");
    this.sessions.set(sha(id).toString("hex"), this.now());
    if (this.sessions.size > MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    return `${this.cookieName}=${id}; Path=/; HttpOnly; SameSite=Strict${this.secure ? "; Secure" : ""}`;
  }

  endSession(cookieHeader: string | undefined): string {
    for (const id of cookieValues(cookieHeader, this.cookieName)) this.sessions.delete(sha(id).toString("hex"));
    return `${this.cookieName}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${this.secure ? "; Secure" : ""}`;
  }

  private sessionValid(id: string): boolean {
    const key = sha(id).toString("hex");
    const seen = this.sessions.get(key);
    if (seen === undefined) return false;
    if (this.now() - seen > SESSION_IDLE_MS) {
      this.sessions.delete(key);
      return false;
    }
    this.sessions.set(key, this.now());
    return true;
  }
}

/** Every value of one cookie name in a Cookie header (a sibling may have set another under a different path). */
export function cookieValues(header: string | undefined, name: string): string[] {
  if (!header) return [];
  const out: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) out.push(part.slice(eq + 1).trim());
  }
  return out.slice(0, 8);
}

/** The names of Vak session cookies (any instance's) in a Cookie header. */
export function vakCookieNames(header: string | undefined): string[] {
  if (!header) return [];
  return header.split(";").map((p) => p.slice(0, Math.max(0, p.indexOf("="))).trim()).filter((n) => /^(?:__Host-)?vak_\d+(?:_[0-9a-f]+)?$/.test(n)).slice(0, 16);
}
