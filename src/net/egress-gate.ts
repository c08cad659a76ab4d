import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, mkdirSync, rmSync } from "node:fs";
import { connect as netConnect, Socket } from "node:net";
import { join } from "node:path";
import { classify, type Host, hostText } from "../policy/address.js";
import { hostAddresses, resolveDestination, systemResolver } from "./destination.js";
import { LOOKUP_MS, type Resolver, withDeadline } from "./dns.js";
import { DEFAULT_EGRESS_LOG, EgressLog, type EgressEvent, type EgressLogOptions } from "./egress-log.js";
import { ByteBudget, GateEngine, resetSocket } from "./engine.js";
import { sandboxSource } from "./loopback-source.js";
import { type Checked, type EgressFields, LimitError, ProxyConnection, type ProxyContext } from "./proxy.js";
import { SocketReader } from "./reader.js";
import type { Endpoint } from "./endpoint.js";
import type { PlaceholderSecret } from "./placeholders.js";
import { decideDestination, hasPathRule, isReadMethod, namesLiteral, type NetGrants } from "../policy/net-grants.js";
import { type Intent, intentRefusal } from "./request-intent.js";
import type { RunCa } from "./tls-ca.js";
import { throughProxy, type UpstreamProxy } from "./upstream-proxy.js";
import type { UpstreamTrust } from "./tls-trust.js";

export type { EgressEvent } from "./egress-log.js";

/** A sandboxed component, as the gate knows it from its token. */
export interface GateWorker {
  component: string;
  generation: number;
  grants: NetGrants;
  /** Headers the gate sets on requests to the named hosts: a secret's value, which the worker never sees. */
  headers?: readonly HeaderSecret[];
  /** Secrets the worker holds as placeholders, replaced in request headers for their hosts (placeholders.ts). */
  placeholders?: readonly PlaceholderSecret[];
  /** Provider endpoints on the relay's address (endpoint.ts). */
  endpoints?: readonly Endpoint[];
}

export interface HeaderSecret {
  /** The reference, for the record ("secret:github"). */
  ref: string;
  header: string;
  value: string;
  /** What the command holds for it, if anything: put back for the value where an answer reflects it (reflected.ts). */
  placeholder?: string | undefined;
  /** host or host:port, as granted; the header goes to these only. */
  hosts: readonly string[];
}

export interface GateLimits {
  /** Client connections a worker may hold at once; also its upstream connections. */
  connectionsPerWorker: number;
  /** Bytes received per client connection, from the client and from its upstreams. */
  bytesPerConnection: number;
  idleMs: number;
  headerBytes: number;
  /** From the end of one request (or the hand-over) to the end of the next request's head. */
  headerMs: number;
  lookupsPerWorker: number;
  lookupMs: number;
}

export const DEFAULT_GATE_LIMITS: GateLimits = {
  connectionsPerWorker: 256,
  bytesPerConnection: 1 << 30,
  idleMs: 60_000,
  headerBytes: 16 * 1024,
  headerMs: 10_000,
  lookupsPerWorker: 16,
  lookupMs: LOOKUP_MS,
};

export interface GateOptions {
  /** A directory private to this session (created 0700); the socket is "gate.sock" inside it. */
  dir: string;
  resolver?: Resolver;
  /** Opens the upstream connection; tests replace it to prove that refused requests never connect. */
  connect?: (address: string, port: number) => Socket;
  ownAddresses?: ReadonlySet<string>;
  limits?: Partial<GateLimits>;
  log?: EgressLogOptions;
  onEvent: (e: EgressEvent) => void;
  /**
   * Settles once every event given to onEvent so far is durable, or rejects.
   * The gate waits for it between recording an allowed request and connecting,
   * so that concurrent requests share one sync. Without it, onEvent must make
   * each event durable before it returns.
   */
  durable?: () => Promise<void>;
  /**
   * TLS at the gate, for grants that must see inside HTTPS: the run's CA (made
   * on first use) and what upstreams are verified against. Without it, such a
   * CONNECT is refused.
   */
  tls?: { ca: () => Promise<RunCa>; trust: UpstreamTrust } | undefined;
  /** A proxy every upstream connection goes through (`[egress] upstream_proxy`). */
  upstreamProxy?: UpstreamProxy | undefined;
}

/** What the launcher's relay sends with each client's socket: which worker this is. */
export const PREAMBLE = "VAK-TOKEN ";

const MAX_LINGERING = 64;

/** Something that holds a worker's connection open: a client socket, or a tunnel the engine splices. */
interface Open {
  destroy(): void;
}

interface Registered extends GateWorker {
  open: Set<Open>;
  ended?: "revoked" | "released";
  upstreams: number;
  lookups: number;
}

/**
 * The egress gate: an HTTP proxy (absolute-form and CONNECT) on a unix socket
 * private to one session. Sandboxed workers reach it only through the
 * launcher's relay, which hands over each client's socket with the worker's
 * token (engine.ts). Every request is checked against that worker's grants,
 * resolved on the host, and connected to the address that was checked; the
 * proxying itself is in proxy.ts, and a granted tunnel's bytes are spliced by
 * the engine, off the event loop.
 */
export class EgressGate {
  readonly socketPath: string;
  private engine: GateEngine | undefined;
  private readonly workers = new Map<string, Registered>();
  private readonly limits: GateLimits;
  private readonly lookup: Resolver;
  private readonly connectUpstream: (address: string, port: number) => Socket;
  private readonly own: ReadonlySet<string>;
  private readonly log: EgressLog;
  private readonly durable: () => Promise<void>;
  private readonly sockets = new Set<Socket>();
  private readonly serving = new Set<Promise<void>>();
  private minGeneration = 0;
  /** Upstream sockets whose count a tunnel has taken over. */
  private readonly handedOver = new WeakSet<Socket>();
  /** Refused connections given a moment to read their answer. */
  private lingering = 0;
  private closing: Promise<void> | undefined;
  /** Settles when the gate closes: pending lookups stop waiting then. */
  private readonly stopping: Promise<undefined>;
  private stop = () => {};
  private readonly tls: GateOptions["tls"];
  private readonly upstreamProxy: UpstreamProxy | undefined;

  constructor(opts: GateOptions) {
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
    chmodSync(opts.dir, 0o700);
    this.socketPath = join(opts.dir, "gate.sock");
    rmSync(this.socketPath, { force: true });
    this.limits = { ...DEFAULT_GATE_LIMITS, ...opts.limits };
    this.lookup = withDeadline(opts.resolver ?? systemResolver, this.limits.lookupMs);
    // A loopback destination is reached from the sandbox's own source address, never the user's (loopback-source.ts).
    this.connectUpstream = opts.connect ?? ((address, port) => netConnect({ host: address, port, allowHalfOpen: true, ...sandboxSource(address) }));
    this.own = opts.ownAddresses ?? hostAddresses();
    this.log = new EgressLog(opts.onEvent, opts.log ?? DEFAULT_EGRESS_LOG);
    this.durable = opts.durable ?? (() => Promise.resolve());
    this.stopping = new Promise((resolve) => (this.stop = () => resolve(undefined)));
    this.tls = opts.tls;
    this.upstreamProxy = opts.upstreamProxy;
  }

  async listen(): Promise<void> {
    if (this.engine || this.closing) throw new Error("the egress gate is already listening, or closed");
    this.engine = new GateEngine(this.socketPath, {
      onClient: (message, fd) => {
        let s: Socket;
        try {
          // Half-open: a client that shuts down its sending side still gets its answer.
          s = new Socket({ fd, readable: true, writable: true, allowHalfOpen: true });
          s.setNoDelay(true); // answers go out as written: no wait for an ACK (Nagle) between a head and its body
        } catch {
          return closeSync(fd);
        }
        const done = this.accept(s, message).catch(() => void s.destroy());
        this.serving.add(done);
        void done.finally(() => this.serving.delete(done));
      },
      onRefused: (reason) => {
        try {
          this.record(undefined, { method: "-", asked: "(connection)", decision: "denied", code: "relay-message", reason: `a relay message the gate cannot take: ${reason}` });
        } catch {
          // the sink that threw has its own failure to report; the message is refused either way
        }
      },
    });
    chmodSync(this.socketPath, 0o600);
  }

  /** Stops accepting, ends every connection and tunnel, records how each ended, then any refusal counts not yet recorded. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stop();
      for (const s of this.sockets) s.destroy();
      const engine = this.engine?.close();
      this.workers.clear();
      await engine;
      await Promise.allSettled([...this.serving]);
      try {
        this.log.flush();
      } catch {
        // the sink that threw has its own failure to report
      }
      rmSync(this.socketPath, { force: true });
    })();
    return this.closing;
  }

  /** Registers a worker and returns its token. */
  register(worker: GateWorker): string {
    const token = randomBytes(16).toString("hex");
    this.workers.set(token, { ...worker, open: new Set(), upstreams: 0, lookups: 0 });
    return token;
  }

  /**
   * Forgets a worker and closes its connections: "revoked" when its grant is
   * taken away, "released" when the command it ran has ended (what the record
   * says of a tunnel still open then).
   */
  unregister(token: string, why: "revoked" | "released" = "revoked"): void {
    const w = this.workers.get(token);
    if (!w) return;
    w.ended = why;
    // Reset, not ended: a client must not take a cut connection (a tunnel, an answer ended by the close) for a whole one.
    for (const s of w.open) s instanceof Socket ? resetSocket(s) : s.destroy();
    this.workers.delete(token);
  }

  /** A new policy generation: older tokens are refused and their connections closed. */
  setGeneration(generation: number): void {
    this.minGeneration = generation;
    for (const [token, w] of this.workers) if (w.generation < generation) this.unregister(token);
  }

  /** Records an event; if onEvent throws, so does this, and the request it belongs to goes no further. */
  private record(worker: GateWorker | undefined, e: EgressFields): void {
    // An unknown caller is recorded under generation 0 (the host's): the journal takes no negative generation.
    this.log.record({ time: new Date().toISOString(), component: worker?.component ?? "(unknown)", generation: worker?.generation ?? 0, ...e });
  }

  /** Refuses a connection before any request on it is read. */
  private refuseConnection(socket: Socket, worker: GateWorker | undefined, status: number, code: string, reason: string, head: string): void {
    this.record(worker, { method: "-", asked: "(connection)", decision: "denied", code, reason, status });
    const body = `vak egress gate: refused: ${reason}\n`;
    socket.end(`HTTP/1.1 ${head}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    // Whatever else it sends is dropped unread, and it gets a moment to read the answer, no more:
    // a deadline, not an idle timeout, which a client that keeps sending would never meet. Under a
    // flood of refusals, none lingers: each holds an fd in vak.
    if (this.lingering >= MAX_LINGERING) return void socket.destroy();
    this.lingering += 1;
    socket.resume();
    const deadline = setTimeout(() => socket.destroy(), this.limits.headerMs);
    socket.once("close", () => {
      clearTimeout(deadline);
      this.lingering -= 1;
    });
  }

  /** Takes a client the relay handed over with its message (the worker's token), then serves its requests. */
  private async accept(socket: Socket, message: string): Promise<void> {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    if (this.closing) return void socket.destroy();
    // Every byte taken from the client, or from an upstream for it, counts against one budget as it is read:
    // here, and in each transfer the engine runs for the connection (ByteBudget: one counter for all of them).
    const budget = new ByteBudget(this.limits.bytesPerConnection);
    const take = (n: number) => {
      if (!budget.take(n)) throw new LimitError(`the connection passed its limit of ${this.limits.bytesPerConnection} bytes`);
    };
    const token = message.startsWith(PREAMBLE) ? message.slice(PREAMBLE.length) : undefined;
    const worker = token ? this.workers.get(token) : undefined;
    if (!worker || worker.generation < this.minGeneration) {
      const why = !token ? "no worker token" : !worker ? "an unknown or revoked worker token" : "a token from an older policy generation";
      return this.refuseConnection(socket, undefined, 407, "token", `request with ${why}`, "407 Proxy Authentication Required");
    }
    if (worker.open.size >= this.limits.connectionsPerWorker) {
      const reason = `more than ${this.limits.connectionsPerWorker} connections at once`;
      return this.refuseConnection(socket, worker, 503, "connection-limit", reason, "503 Service Unavailable");
    }
    worker.open.add(socket);
    socket.once("close", () => worker.open.delete(socket));
    socket.setTimeout(this.limits.idleMs, () => socket.destroy());
    await new ProxyConnection(socket, new SocketReader(socket, take), this.context(worker, take, budget)).serve();
  }

  private context(worker: Registered, take: (n: number) => void, budget: ByteBudget): ProxyContext {
    return {
      limits: this.limits,
      take,
      transfer: (from, to, prefix, length, chunked) => {
        if (!this.engine || this.closing) throw new LimitError("the gate is closing", 503);
        const t = this.engine.transfer(from, to, prefix, length, budget, this.limits.idleMs, chunked);
        // Revoking the worker cancels it: its sockets are the caller's, but the engine holds their fds meanwhile.
        const open = { destroy: () => this.engine?.cancel(t.id) };
        worker.open.add(open);
        const done = t.done.then((end) => {
          worker.open.delete(open);
          return end.outcome === "cancelled" && worker.ended === "released" ? { ...end, outcome: "released" } : end;
        });
        return { done, cancel: () => this.engine?.cancel(t.id) };
      },
      splice: (client, upstream, upPrefix, downPrefix) => {
        if (!this.engine || this.closing) throw new LimitError("the gate is closing", 503);
        const t = this.engine.tunnel(client, upstream, upPrefix, downPrefix, budget, this.limits.idleMs);
        // The tunnel takes over the worker's connection slot and its upstream count from the two sockets,
        // now, not when their handles have closed (counted twice meanwhile, a burst of tunnels would pass
        // the caps); revoking the worker cancels it.
        const open = { destroy: () => this.engine?.cancel(t.id) };
        worker.open.delete(client);
        worker.open.add(open);
        this.handedOver.add(upstream);
        return t.done.then((end) => {
          worker.open.delete(open);
          worker.upstreams -= 1;
          // A cancelled tunnel was cancelled by unregister: say which kind of ending it was.
          return end.outcome === "cancelled" && worker.ended === "released" ? { ...end, outcome: "released" } : end;
        });
      },
      ended: () => worker.ended,
      closing: () => this.closing !== undefined,
      record: (e) => this.record(worker, e),
      durable: () => this.durable(),
      check: (method, host, port, intent, path, pinned) => this.check(worker, method, host, port, intent, path, pinned),
      pathRules: (host, port) => hasPathRule(worker.grants, host, port),
      placeholders: worker.placeholders ?? [],
      endpoints: worker.endpoints ?? [],
      tls: this.tls && {
        serverContext: async (host) => (await this.tls!.ca()).contextFor(host),
        upstream: () => this.tls!.trust.context(),
      },
      secretHeaders: (host, port) => (worker.headers ?? []).filter((h) => h.hosts.some((x) => x.toLowerCase() === hostText(host).toLowerCase() || x.toLowerCase() === `${hostText(host)}:${port}`.toLowerCase())),
      upstreamProxy: this.upstreamProxy?.host,
      openUpstream: (address, port) => {
        if (this.closing) throw new LimitError("the gate is closing", 503);
        if (worker.upstreams >= this.limits.connectionsPerWorker) throw new LimitError(`more than ${this.limits.connectionsPerWorker} upstream connections at once`, 503);
        const proxy = this.upstreamProxy;
        const s = proxy ? this.connectUpstream(proxy.host, proxy.port) : this.connectUpstream(address, port);
        worker.upstreams += 1;
        s.once("close", () => {
          if (!this.handedOver.has(s)) worker.upstreams -= 1; // else the tunnel's end gives it back
        });
        s.on("error", () => {}); // reported by whoever reads or writes it
        s.setTimeout(this.limits.idleMs, () => s.destroy(new Error(`no data from the upstream for ${this.limits.idleMs} ms`)));
        return s;
      },
      upstreamReady: async (s, address, port) => {
        if (s.connecting)
          await new Promise<void>((resolve, reject) => {
            const ok = () => (s.off("close", gone), resolve());
            const gone = () => (s.off("connect", ok), reject(new Error("the upstream closed before it connected")));
            s.once("connect", ok);
            s.once("close", gone);
            s.once("error", (e) => reject(e));
          });
        if (s.destroyed) throw new Error("the upstream closed before it connected");
        if (this.upstreamProxy) await throughProxy(s, `${address.includes(":") ? `[${address}]` : address}:${port}`, this.limits.headerMs);
      },
    };
  }

  /** Decides a destination and resolves it; connects nothing. */
  private async check(worker: Registered, method: string, host: Host, port: number, intent: Intent, path?: string, pinned?: { address: string; resolved: string[] }): Promise<Checked> {
    const canonical = `${hostText(host)}:${port}`;
    const d = decideDestination(worker.grants, host, port, method, path);
    if (!d.allowed) return { ok: false, status: 403, code: d.code, reason: d.reason, canonical };
    // What the request asks beyond its request line is decided here too, against the grant that allowed it.
    const refused = intentRefusal(d.rule, intent);
    if (refused) return { ok: false, status: 403, ...refused, canonical };
    const flags = d.inspect ? { inspect: true } : {};
    // A non-public address is reached only by a grant naming it for this method; a read that writes anyway needs one for every method.
    const readWrites = isReadMethod(method) ? intent.write : undefined;
    const reach = { writes: readWrites !== undefined, ...(path === undefined ? {} : { path }), eachRequest: method === "CONNECT" && d.inspect === true };
    // Inside a terminated tunnel the address is the one checked for its CONNECT: the name is not looked up again,
    // but a non-public address must still be named by a grant for this request's method.
    if (pinned) {
      if (classify(pinned.address, this.own) !== "public" && !namesLiteral(worker.grants, pinned.address, port, method, reach))
        return { ok: false, status: 403, code: "not-reachable", reason: `${pinned.address} (${classify(pinned.address, this.own)}) is reachable only by a grant for ${readWrites ? `every method naming that exact address: ${readWrites}` : `${method} naming that exact address${path === undefined ? "" : `, and ${path} if it names paths`}`}`, canonical, resolved: pinned.resolved };
      return { ok: true, canonical, address: pinned.address, resolved: pinned.resolved, rule: d.rule.text, ...flags };
    }
    if (host.kind === "name" && worker.lookups >= this.limits.lookupsPerWorker)
      return { ok: false, status: 503, code: "lookup-limit", reason: `more than ${this.limits.lookupsPerWorker} DNS lookups at once`, canonical };
    worker.lookups += 1;
    try {
      // A terminated tunnel carries requests decided one by one: its address need only be reachable for a read.
      const as = method === "CONNECT" && d.inspect ? "GET" : method;
      const r = await Promise.race([resolveDestination(host, port, worker.grants, this.lookup, this.own, as, reach), this.stopping]);
      if (!r) return { ok: false, status: 503, code: "closing", reason: "the gate closed before the lookup finished", canonical };
      if (!r.ok) return { ok: false, status: 403, code: r.code, reason: r.code === "not-reachable" && readWrites ? `${r.reason}, by a grant for every method: ${readWrites}` : r.reason, canonical, resolved: r.resolved };
      return { ok: true, canonical, address: r.address, resolved: r.resolved, rule: d.rule.text, ...flags };
    } finally {
      worker.lookups -= 1;
    }
  }
}
