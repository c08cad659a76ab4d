import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, rmSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, request as httpRequest, type Server as HttpServer, type ServerResponse } from "node:http";
import { connect as netConnect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { AddressError, type Host, hostText, parseAuthority } from "./address.js";
import { hostAddresses, type Resolver, resolveDestination, systemResolver } from "./destination.js";
import { decideDestination, type NetPolicy } from "./rules.js";

/** One egress attempt, allowed or not, for the journal. */
export interface EgressEvent {
  time: string;
  component: string;
  generation: number;
  method: string;
  /** The destination as the client wrote it. */
  asked: string;
  /** host:port after canonicalisation, when it got that far. */
  canonical?: string;
  resolved?: string[];
  /** The address connected to. */
  address?: string;
  decision: "allowed" | "denied";
  reason: string;
  status?: number;
  bytesUp?: number;
  bytesDown?: number;
}

/** A sandboxed component, as the gate knows it from its token. */
export interface GateWorker {
  component: string;
  generation: number;
  policy: NetPolicy;
}

export interface GateLimits {
  connectionsPerWorker: number;
  bytesPerConnection: number;
  idleMs: number;
  headerBytes: number;
  preambleMs: number;
}

export const DEFAULT_GATE_LIMITS: GateLimits = {
  connectionsPerWorker: 256,
  bytesPerConnection: 1 << 30,
  idleMs: 60_000,
  headerBytes: 16 * 1024,
  preambleMs: 5_000,
};

export interface GateOptions {
  /** A directory private to this session (created 0700); the socket is "gate.sock" inside it. */
  dir: string;
  resolver?: Resolver;
  /** Opens the upstream connection; tests replace it to prove that refused requests never connect. */
  connect?: (address: string, port: number) => Socket;
  ownAddresses?: ReadonlySet<string>;
  limits?: Partial<GateLimits>;
  onEvent: (e: EgressEvent) => void;
}

/** The first line the launcher's relay sends on every connection: which worker this is. */
export const PREAMBLE = "VAK-TOKEN ";
const MAX_PREAMBLE = 128;

const HOP_BY_HOP = new Set([
  "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
  "transfer-encoding", "upgrade",
]);

interface Registered extends GateWorker {
  open: Set<Socket>;
}

/**
 * The egress gate: an HTTP proxy (absolute-form and CONNECT) on a unix socket
 * private to one session. Sandboxed workers reach it only through the
 * launcher's relay, which names the worker with its token before the first
 * byte of HTTP. Every request is checked against that worker's grants,
 * resolved on the host, and connected to the address that was checked.
 */
export class EgressGate {
  readonly socketPath: string;
  private readonly raw: Server;
  private readonly http: HttpServer;
  private readonly workers = new Map<string, Registered>();
  private readonly bySocket = new WeakMap<Socket, { token: string; worker: Registered }>();
  private readonly limits: GateLimits;
  private readonly resolver: Resolver;
  private readonly connectUpstream: (address: string, port: number) => Socket;
  private readonly own: ReadonlySet<string>;
  private minGeneration = 0;
  private readonly budgets = new WeakMap<Socket, { used: number }>();

  constructor(private readonly opts: GateOptions) {
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
    chmodSync(opts.dir, 0o700);
    this.socketPath = join(opts.dir, "gate.sock");
    rmSync(this.socketPath, { force: true });
    this.limits = { ...DEFAULT_GATE_LIMITS, ...opts.limits };
    this.resolver = opts.resolver ?? systemResolver;
    this.connectUpstream = opts.connect ?? ((address, port) => netConnect({ host: address, port }));
    this.own = opts.ownAddresses ?? hostAddresses();
    this.http = createHttpServer({
      maxHeaderSize: this.limits.headerBytes,
      headersTimeout: 10_000,
      requestTimeout: 0,
      keepAliveTimeout: 5_000,
      requireHostHeader: true,
    });
    this.http.on("request", (req, res) => void this.forward(req, res));
    this.http.on("connect", (req: IncomingMessage, socket: Socket, head: Buffer) => void this.tunnel(req, socket, head));
    this.http.on("upgrade", (req: IncomingMessage, socket: Socket) => this.refuseRaw(socket, req, 400, "protocol upgrades are not proxied; use CONNECT"));
    this.http.on("clientError", (e: NodeJS.ErrnoException, socket: Socket) => {
      const status = e.code === "HPE_HEADER_OVERFLOW" ? "431 Request Header Fields Too Large" : "400 Bad Request";
      this.emit(this.workerOf(socket), { method: "-", asked: "-", decision: "denied", reason: `malformed request: ${e.code ?? e.message}`, status: parseInt(status, 10) });
      if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      socket.destroy();
    });
    this.raw = createServer({ pauseOnConnect: false }, (s) => this.accept(s));
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.raw.once("error", reject);
      this.raw.listen(this.socketPath, () => {
        chmodSync(this.socketPath, 0o600);
        resolve();
      });
    });
  }

  close(): Promise<void> {
    for (const w of this.workers.values()) for (const s of w.open) s.destroy();
    this.workers.clear();
    return new Promise((resolve) => this.raw.close(() => resolve()));
  }

  /** Registers a worker and returns its token. */
  register(worker: GateWorker): string {
    const token = randomBytes(16).toString("hex");
    this.workers.set(token, { ...worker, open: new Set() });
    return token;
  }

  /** Forgets a worker and closes its connections. */
  unregister(token: string): void {
    const w = this.workers.get(token);
    if (!w) return;
    for (const s of w.open) s.destroy();
    this.workers.delete(token);
  }

  /** A new policy generation: older tokens are refused and their connections closed. */
  setGeneration(generation: number): void {
    this.minGeneration = generation;
    for (const [token, w] of this.workers) if (w.generation < generation) this.unregister(token);
  }

  private emit(worker: GateWorker | undefined, e: Omit<EgressEvent, "time" | "component" | "generation">): void {
    this.opts.onEvent({ time: new Date().toISOString(), component: worker?.component ?? "(unknown)", generation: worker?.generation ?? -1, ...e });
  }

  /** Reads the relay's preamble, then hands the connection to the HTTP parser. */
  private accept(socket: Socket): void {
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), this.limits.preambleMs);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const nl = buf.indexOf("\r\n");
      if (nl < 0 && buf.length < MAX_PREAMBLE) return;
      socket.off("data", onData);
      socket.pause();
      clearTimeout(timer);
      const line = nl >= 0 ? buf.subarray(0, nl).toString("latin1") : "";
      const token = line.startsWith(PREAMBLE) ? line.slice(PREAMBLE.length) : undefined;
      const worker = token ? this.workers.get(token) : undefined;
      if (!worker || !token || worker.generation < this.minGeneration) {
        const why = !token ? "no worker token" : !worker ? "an unknown or revoked worker token" : "a token from an older policy generation";
        this.emit(undefined, { method: "-", asked: "-", decision: "denied", reason: `request with ${why}`, status: 407 });
        const body = `vak egress gate: refused: ${why}\n`;
        socket.end(`HTTP/1.1 407 Proxy Authentication Required\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
        return;
      }
      if (worker.open.size >= this.limits.connectionsPerWorker) {
        this.emit(worker, { method: "-", asked: "-", decision: "denied", reason: `more than ${this.limits.connectionsPerWorker} connections at once` });
        socket.end("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        return;
      }
      worker.open.add(socket);
      socket.once("close", () => worker.open.delete(socket));
      this.bySocket.set(socket, { token, worker });
      socket.setTimeout(this.limits.idleMs, () => socket.destroy());
      this.meter(socket);
      const rest = buf.subarray(nl + 2);
      if (rest.length) socket.unshift(rest);
      this.http.emit("connection", socket);
      socket.resume();
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  }

  /** Counts bytes moved on behalf of one client connection, in both directions,
   *  and destroys everything involved once it passes the limit. */
  private meter(client: Socket, other?: Socket): void {
    const budget = this.budgets.get(client) ?? { used: 0 };
    this.budgets.set(client, budget);
    (other ?? client).on("data", (d: Buffer) => {
      budget.used += d.length;
      if (budget.used > this.limits.bytesPerConnection) {
        client.destroy();
        other?.destroy();
      }
    });
  }

  private workerOf(socket: Socket): GateWorker | undefined {
    return this.bySocket.get(socket)?.worker;
  }

  private refuse(res: ServerResponse, status: number, text: string): void {
    const body = `vak egress gate: refused: ${text}\n`;
    res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(body), connection: "close" });
    res.end(body);
  }

  private refuseRaw(socket: Socket, req: IncomingMessage, status: number, text: string): void {
    const worker = this.workerOf(socket);
    this.emit(worker, { method: req.method ?? "-", asked: req.url ?? "-", decision: "denied", reason: text, status });
    const body = `vak egress gate: refused: ${text}\n`;
    socket.end(`HTTP/1.1 ${status} ${status === 403 ? "Forbidden" : status === 400 ? "Bad Request" : "Error"}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }

  /** Checks the Host header against the target: they must name the same place. */
  private hostHeaderAgrees(req: IncomingMessage, host: Host, port: number, defaultPort: number): string | undefined {
    const header = req.headers.host;
    if (header === undefined) return req.method === "CONNECT" ? undefined : "no Host header";
    try {
      const h = parseAuthority(header, defaultPort);
      if (hostText(h.host) !== hostText(host) || h.port !== port) return `the Host header (${header}) does not match the target (${hostText(host)}:${port})`;
    } catch (e) {
      return `bad Host header: ${(e as Error).message}`;
    }
    return undefined;
  }

  private async check(worker: GateWorker, method: string, asked: string, host: Host, port: number) {
    const canonical = `${hostText(host)}:${port}`;
    const d = decideDestination(worker.policy, host, port, method);
    if (!d.allowed) {
      this.emit(worker, { method, asked, canonical, decision: "denied", reason: d.reason, status: 403 });
      return { ok: false as const, reason: d.reason };
    }
    const r = await resolveDestination(host, port, worker.policy, this.resolver, this.own);
    if (!r.ok) {
      this.emit(worker, { method, asked, canonical, resolved: r.resolved, decision: "denied", reason: r.reason, status: 403 });
      return { ok: false as const, reason: r.reason };
    }
    return { ok: true as const, canonical, address: r.address, resolved: r.resolved, rule: d.rule.text };
  }

  /** Absolute-form HTTP: http://host[:port]/path. */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const worker = this.workerOf(req.socket);
    const method = req.method ?? "GET";
    const asked = req.url ?? "";
    if (!worker) return this.refuse(res, 407, "no worker");
    const m = /^http:\/\/([^/?#]*)([^#]*)/i.exec(asked);
    if (!m) {
      const reason = /^https:/i.test(asked) ? "https:// URLs go through CONNECT" : "a proxy request needs an absolute http:// URL";
      this.emit(worker, { method, asked, decision: "denied", reason, status: 400 });
      return this.refuse(res, 400, reason);
    }
    let target: { host: Host; port: number };
    try {
      target = parseAuthority(m[1]!, 80);
    } catch (e) {
      const reason = `bad destination: ${(e as AddressError).message}`;
      this.emit(worker, { method, asked, decision: "denied", reason, status: 400 });
      return this.refuse(res, 400, reason);
    }
    const mismatch = this.hostHeaderAgrees(req, target.host, target.port, 80);
    if (mismatch) {
      this.emit(worker, { method, asked, decision: "denied", reason: mismatch, status: 400 });
      return this.refuse(res, 400, mismatch);
    }
    const c = await this.check(worker, method, asked, target.host, target.port);
    if (!c.ok) return this.refuse(res, 403, c.reason);

    const headers: Record<string, string | string[]> = {};
    const listed = new Set(String(req.headers.connection ?? "").toLowerCase().split(",").map((s) => s.trim()));
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      const lower = name.toLowerCase();
      if (HOP_BY_HOP.has(lower) || listed.has(lower)) continue;
      const prev = headers[name];
      headers[name] = prev === undefined ? req.rawHeaders[i + 1]! : ([] as string[]).concat(prev, req.rawHeaders[i + 1]!);
    }
    const upstreamSocket = this.connectUpstream(c.address, target.port);
    this.meter(req.socket, upstreamSocket);
    let bytesDown = 0;
    const up = httpRequest({
      createConnection: () => upstreamSocket,
      method,
      path: m[2] || "/",
      headers,
      setHost: false,
    });
    up.setTimeout(this.limits.idleMs, () => up.destroy(new Error("upstream idle")));
    up.on("response", (upRes) => {
      const out: Record<string, string | string[]> = {};
      for (let i = 0; i < upRes.rawHeaders.length; i += 2) {
        const name = upRes.rawHeaders[i]!;
        if (HOP_BY_HOP.has(name.toLowerCase())) continue;
        const prev = out[name];
        out[name] = prev === undefined ? upRes.rawHeaders[i + 1]! : ([] as string[]).concat(prev, upRes.rawHeaders[i + 1]!);
      }
      res.writeHead(upRes.statusCode ?? 502, out);
      upRes.on("data", (d: Buffer) => (bytesDown += d.length));
      upRes.pipe(res);
      upRes.on("end", () =>
        this.emit(worker, { method, asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed", reason: `granted by ${c.rule}`, status: upRes.statusCode ?? 0, bytesDown }),
      );
    });
    up.on("error", (e) => {
      this.emit(worker, { method, asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed", reason: `granted by ${c.rule}; upstream failed: ${e.message}`, status: 502 });
      if (!res.headersSent) this.refuse(res, 502, `upstream ${c.canonical} failed: ${e.message}`);
      else res.destroy();
    });
    req.pipe(up);
  }

  /** CONNECT host:port: a tunnel, opened only by a grant for every method. */
  private async tunnel(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const worker = this.workerOf(socket);
    const asked = req.url ?? "";
    if (!worker) return void socket.destroy();
    let target: { host: Host; port: number };
    try {
      target = parseAuthority(asked);
    } catch (e) {
      return this.refuseRaw(socket, req, 400, `bad CONNECT target: ${(e as Error).message}`);
    }
    const mismatch = this.hostHeaderAgrees(req, target.host, target.port, target.port);
    if (mismatch) return this.refuseRaw(socket, req, 400, mismatch);
    const c = await this.check(worker, "CONNECT", asked, target.host, target.port);
    if (!c.ok) {
      const body = `vak egress gate: refused: ${c.reason}\n`;
      return void socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    }
    const upstream = this.connectUpstream(c.address, target.port);
    let bytesUp = head.length;
    let bytesDown = 0;
    upstream.setTimeout(this.limits.idleMs, () => upstream.destroy());
    upstream.once("connect", () => {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      socket.on("data", (d: Buffer) => (bytesUp += d.length));
      upstream.on("data", (d: Buffer) => (bytesDown += d.length));
      this.meter(socket, upstream);
      socket.pipe(upstream);
      upstream.pipe(socket);
    });
    const done = (error?: Error) => {
      this.emit(worker, {
        method: "CONNECT", asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed",
        reason: error ? `granted by ${c.rule}; upstream failed: ${error.message}` : `granted by ${c.rule}`, status: error ? 502 : 200, bytesUp, bytesDown,
      });
    };
    upstream.once("error", (e) => {
      if (socket.writable && bytesDown === 0) socket.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
      else socket.destroy();
      done(e);
    });
    upstream.once("close", (hadError) => {
      socket.destroy();
      if (!hadError) done();
    });
    socket.once("close", () => upstream.destroy());
  }
}
