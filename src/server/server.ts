import { readFileSync } from "node:fs";
import { createServer as createHttp, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttps } from "node:https";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import type { Journal } from "../journal/journal.js";
import { VakError } from "../policy/errors.js";
import { installation } from "../policy/install.js";
import { app } from "./app.js";
import { ServerAuth } from "./auth.js";
import type { TextFilter } from "./browser-text.js";
import { checkExposure, type Exposure, type ServerConfig } from "./exposure.js";
import { SECURITY_HEADERS } from "./headers.js";
import { checkHost, hostPolicy, type HostPolicy } from "./host-check.js";
import { Hub } from "./hub.js";
import { JournalTail } from "./journal-tail.js";
import { ownOrigins } from "./origin.js";
import { type SessionFactory, SessionHost } from "./session-host.js";
import { loadStaticFiles } from "./static-files.js";
import { Terminals } from "./terminal.js";
import { refuseUpgrade, upgradeHandler } from "./upgrade.js";

/**
 * `vak serve`'s server: the exposure policy decided from the user's
 * `[server]` config before anything listens (exposure.ts), one HTTP(S)
 * listener bound to exactly that address, the Host check on every raw
 * request and upgrade, then the Hono app (app.ts) and the WebSocket upgrades
 * (upgrade.ts). It hosts the sessions itself, so a browser and the terminal
 * that started `vak --serve` watch the same one.
 */
export interface ServeOptions {
  /** The user's [server] config (the trusted tier only). */
  config: ServerConfig;
  /** --port, over the config's. */
  port?: number | undefined;
  journal: Journal;
  /** The host's redactor and neutraliser, composed: every string for the browser passes it. */
  filter: TextFilter;
  /** Makes a session for POST /api/sessions; without it the server hosts only what is adopted. */
  factory?: SessionFactory | undefined;
  info: Record<string, unknown>;
  log: (line: string) => void;
  /** The web client's files (default: dist/web). */
  webDir?: string | undefined;
  /** A fixed token (tests); default: a fresh random one. */
  token?: string | undefined;
}

export interface RunningServer {
  /** The URL the browser opens (without the token). */
  url: string;
  /** The URL that logs a browser on this machine in (none when this machine's loopback cannot reach the bind: use the login form). */
  loginUrl: string | undefined;
  token: string;
  port: number;
  exposure: Exposure;
  sessions: SessionHost;
  close(): Promise<void>;
}

function refuseRaw(res: ServerResponse, status: number, reason: string): void {
  const body = JSON.stringify({ error: { code: "host", message: reason } });
  res.writeHead(status, { ...SECURITY_HEADERS, "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), Connection: "close", "Cache-Control": "no-store" });
  // The request's body is never read: the connection closes after this answer.
  res.end(body);
}

export async function startServer(o: ServeOptions): Promise<RunningServer> {
  const exposure = checkExposure(o.config, o.port);
  const files = loadStaticFiles(o.webDir ?? installation().webDir);
  let tls: { cert: Buffer; key: Buffer } | undefined;
  if (exposure.tlsFiles) {
    try {
      tls = { cert: readFileSync(exposure.tlsFiles.cert), key: readFileSync(exposure.tlsFiles.key) };
    } catch (e) {
      throw new VakError("bad-input", `[server] tls_cert / tls_key: ${(e as Error).message}`);
    }
  }
  const server = tls ? createHttps({ cert: tls.cert, key: tls.key }) : createHttp();
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.maxHeadersCount = 100;

  let hosts: HostPolicy | undefined;
  let origins: ReadonlySet<string> = new Set();
  const hub = new Hub();
  const terminals = new Terminals({ filter: o.filter, redactor: o.journal.redactor, log: o.log });
  const sessions = new SessionHost(o.journal, {
    filter: o.filter, redact: (t: string) => o.journal.redactor.text(t), publish: (m) => hub.publish(m), terminal: exposure.terminal, factory: o.factory,
    beforeRevoke: (id) => terminals.stopSession(id),
  });
  const tail = new JournalTail(o.journal, o.filter, (m) => hub.publish(m), () => hub.size > 0);

  // Listen first (port 0 picks one), with the guard already in place: until the policy is known, everything is refused.
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    if (!hosts || !handler) return refuseRaw(res, 503, "the server is starting");
    const v = checkHost(hosts, req.rawHeaders, req.url);
    if (!v.ok) return refuseRaw(res, v.status, v.reason);
    handler(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) =>
      reject(new VakError("bad-input", `cannot listen on ${exposure.bindHost}:${exposure.port} (${e.code ?? e.message}); choose another --port`)));
    // The address is always explicit: a server given none binds every interface.
    server.listen({ port: exposure.port, host: exposure.bindHost, exclusive: true }, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  const scheme = tls ? "https" : "http";
  const auth = new ServerAuth({ port, secure: exposure.tls !== "none", token: o.token });
  // A loopback bind other than 127.0.0.1 and ::1 (127.0.0.2, say) answers to its own address as a loopback name too.
  const bind = exposure.bindHost.includes(":") ? `[${exposure.bindHost}]` : exposure.bindHost;
  const also = exposure.loopback && !["127.0.0.1", "[::1]"].includes(bind) ? [bind] : [];
  // A name of this instance's own under .localhost (browsers resolve it to loopback themselves): the login URL uses
  // it, so the session cookie is the browser's for that name only, and another server on this machine's loopback
  // (which a browser visiting it would send a 127.0.0.1 cookie, ports aside) never receives it. Plain HTTP only:
  // a certificate the user gave names its own hosts.
  const instanceName = exposure.loopback && scheme === "http" ? `vak-${auth.instance}.localhost` : undefined;
  if (instanceName) also.push(instanceName);
  hosts = hostPolicy(port, exposure.trustedHosts, scheme, also);
  origins = ownOrigins(port, exposure.trustedHosts, exposure.tls === "none" ? "http" : "https", scheme, also);

  const application = app({
    hosts, origins, files, sessions, journal: o.journal, auth, filter: o.filter, log: o.log,
    info: () => ({ ...o.info, terminal: exposure.terminal, exposed: !exposure.loopback }),
    feedPosition: () => hub.position,
  });
  handler = getRequestListener(application.fetch) as (req: IncomingMessage, res: ServerResponse) => void;
  const upgrades = upgradeHandler({
    hosts: () => hosts, auth, origins: () => origins, terminalEnabled: exposure.terminal,
    onFeed: (ws) => {
      hub.add(ws);
      // The feed is one way; anything a client sends is ignored (its size is bounded by maxPayload).
      ws.on("message", () => {});
    },
    canOpenTerminal: (id) => terminals.refusal(sessions.get(id)),
    onTerminal: (ws, id) => terminals.open(ws, sessions.get(id)!),
  });
  server.on("upgrade", upgrades.handle);
  // CONNECT (authority-form): this is not a proxy.
  server.on("connect", (_req: IncomingMessage, socket: Duplex) => refuseUpgrade(socket, 400, "this server is not a proxy"));
  tail.start();

  // Exposed: the name clients use. A login URL exists only where this machine's loopback can reach the bind.
  const url = exposure.loopback ? `${scheme}://${bind}:${port}/` : `${exposure.tls === "none" ? "http" : "https"}://${exposure.trustedHosts[0]}/`;
  const reachesLoopback = exposure.loopback || exposure.bindHost === "0.0.0.0" || exposure.bindHost === "::";
  const loginUrl = reachesLoopback ? `${scheme}://${instanceName ?? (exposure.loopback ? bind : "127.0.0.1")}:${port}/?token=${auth.token}` : undefined;
  let closing: Promise<void> | undefined;
  return {
    url,
    loginUrl,
    token: auth.token,
    port,
    exposure,
    sessions,
    close: () =>
      (closing ??= (async () => {
        tail.stop();
        await terminals.closeAll();
        await sessions.closeAll();
        hub.close();
        upgrades.close();
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      })()),
  };
}
