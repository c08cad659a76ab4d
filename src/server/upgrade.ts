import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import { FORWARDING_HEADERS, isLocalPeer, type ServerAuth } from "./auth.js";
import { SECURITY_HEADERS } from "./headers.js";
import { checkHost, type HostPolicy } from "./host-check.js";
import { fetchSiteRefusal, originRefusal } from "./origin.js";

/**
 * WebSocket upgrades, checked in the same order as requests and all before
 * the 101: the Host, the browser's fetch metadata, the credential (bearer
 * or cookie; never a token in the URL), and the Origin, which a browser
 * always sends on a WebSocket and which must be ours. A page of another
 * origin cannot open our feed even though the browser would attach our
 * cookie to it. The terminal is also loopback-pinned: only this machine's
 * loopback, on a loopback name, not through a proxy.
 */
export type UpgradeRoute = { kind: "feed" } | { kind: "terminal"; session: string };

export interface UpgradeDeps {
  hosts: () => HostPolicy | undefined;
  auth: ServerAuth;
  origins: () => ReadonlySet<string>;
  terminalEnabled: boolean;
  onFeed: (ws: WebSocket) => void;
  /** Opens a terminal, or says why not (no such session, not an agent session). */
  onTerminal: (ws: WebSocket, session: string) => void;
  canOpenTerminal: (session: string) => string | undefined;
}

const TERMINAL = /^\/api\/sessions\/([0-9a-z]{1,16}-[0-9a-f]{10})\/terminal$/;

export type UpgradeVerdict = { ok: true; route: UpgradeRoute } | { ok: false; status: number; reason: string };

/** The whole decision for one upgrade request, with no side effect but the rate limiter's count. */
export function decideUpgrade(d: UpgradeDeps, req: IncomingMessage): UpgradeVerdict {
  const hosts = d.hosts();
  if (!hosts) return { ok: false, status: 503, reason: "the server is starting" };
  const h = checkHost(hosts, req.rawHeaders, req.url);
  if (!h.ok) return { ok: false, status: h.status, reason: h.reason };
  const url = new URL(req.url!, "http://vak.invalid");
  if (url.search) return { ok: false, status: 403, reason: "a WebSocket takes no query (a token in a URL is accepted only by the login URL)" };
  const t = TERMINAL.exec(url.pathname);
  const route: UpgradeRoute | undefined = url.pathname === "/api/ws" ? { kind: "feed" } : t ? { kind: "terminal", session: t[1]! } : undefined;
  if (!route) return { ok: false, status: 404, reason: "no such WebSocket" };
  const site = fetchSiteRefusal(header(req, "sec-fetch-site"));
  if (site) return { ok: false, status: 403, reason: site };
  const peer = req.socket.remoteAddress ?? "unknown";
  const v = d.auth.authenticate({ authorization: header(req, "authorization"), cookie: header(req, "cookie"), peer });
  if (!v.ok) return { ok: false, status: v.status, reason: v.reason };
  // An upgrade is state-changing: with the cookie, our Origin is required.
  const origin = originRefusal("POST", header(req, "origin"), v.via, d.origins());
  if (origin) return { ok: false, status: 403, reason: origin };
  if (route.kind === "terminal") {
    if (!d.terminalEnabled) return { ok: false, status: 403, reason: "the web terminal is off; set [server] terminal = true in ~/.config/vak/config.toml to turn it on" };
    if (!isLocalPeer(peer) || !h.loopbackName || FORWARDING_HEADERS.some((f) => header(req, f) !== undefined))
      return { ok: false, status: 403, reason: "the web terminal is served only to this machine's loopback, on a loopback name, whatever else the server answers" };
    const why = d.canOpenTerminal(route.session);
    if (why) return { ok: false, status: 409, reason: why };
  }
  return { ok: true, route };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

const REASONS: Record<number, string> = { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 421: "Misdirected Request", 429: "Too Many Requests", 503: "Service Unavailable" };

/** Refuses an upgrade with a plain HTTP answer (no 101) and closes the socket. */
export function refuseUpgrade(socket: Duplex, status: number, reason: string): void {
  const body = JSON.stringify({ error: { code: "refused", message: reason } });
  const headers = { ...SECURITY_HEADERS, "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(body)), Connection: "close", "Cache-Control": "no-store" };
  socket.end(`HTTP/1.1 ${status} ${REASONS[status] ?? "Refused"}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n${body}`);
}

export function upgradeHandler(d: UpgradeDeps): { handle: (req: IncomingMessage, socket: Duplex, head: Buffer) => void; close: () => void } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024, perMessageDeflate: false });
  return {
    handle: (req, socket, head) => {
      socket.on("error", () => socket.destroy());
      const v = decideUpgrade(d, req);
      if (!v.ok) return refuseUpgrade(socket, v.status, v.reason);
      const route = v.route;
      wss.handleUpgrade(req, socket, head, (ws) => (route.kind === "feed" ? d.onFeed(ws) : d.onTerminal(ws, route.session)));
    },
    close: () => wss.close(),
  };
}
