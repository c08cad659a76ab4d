/**
 * The headers every response carries, refusals included. The client is one
 * origin's own files: scripts and styles from 'self' only (no inline script,
 * no eval, no CDN, no external font), no frames of us anywhere (clickjacking
 * an approval button), no sniffing a JSON answer into a script, no referrer
 * (a login URL never leaks), and no CORS header at all: no other origin may
 * read anything we answer.
 */
export const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "Content-Security-Policy": CSP,
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Resource-Policy": "same-origin",
  "Permissions-Policy": "camera=(), microphone=(), geolocation=(), usb=(), serial=(), hid=(), clipboard-read=()",
};

/** Headers that would open what the server answers to other origins: never sent, whatever a route does. */
export const CORS_HEADERS = ["access-control-allow-origin", "access-control-allow-credentials", "access-control-allow-headers", "access-control-allow-methods", "access-control-expose-headers"];

/** Sets the security headers on a response's headers and removes any CORS header. */
export function applySecurityHeaders(set: (name: string, value: string) => void, remove: (name: string) => void): void {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) set(k, v);
  for (const h of CORS_HEADERS) remove(h);
}
