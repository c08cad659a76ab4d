import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sendClient, socketFd } from "../../src/net/engine.js";
import { EgressGate, type EgressEvent, type GateLimits, type GateOptions, type GateWorker } from "../../src/net/egress-gate.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";

/**
 * Closes a test server at once: every socket it accepted is destroyed first. An HTTP server is half-open by
 * default, and libuv reports a reset after a short read as an end of stream, so a socket whose peer (the gate)
 * reset it can stay open on the server's side; `close()` then waits for ever. Register before any connection.
 */
export function closeDestroying(server: NetServer | Server): () => Promise<void> {
  const sockets = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  return () =>
    new Promise((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
}

/** A loopback HTTP server that records what reached it. */
export interface Upstream {
  port: number;
  requests: { method: string; url: string; host: string | undefined; body: string }[];
  close(): Promise<void>;
}

export async function upstream(handler?: (req: IncomingMessage) => { status: number; headers?: Record<string, string>; body?: string } | undefined): Promise<Upstream> {
  const requests: Upstream["requests"] = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", url: req.url ?? "", host: req.headers.host, body });
      const custom = handler?.(req);
      res.writeHead(custom?.status ?? 200, { "content-type": "text/plain", ...custom?.headers });
      res.end(custom?.body ?? `ok ${req.method} ${req.url}\n`);
    });
  });
  const close = closeDestroying(server);
  const port = await listenLoopback(server);
  return { port, requests, close };
}

/**
 * The gate's upstream connector for tests: records every attempt and refuses
 * any address that is not loopback before a socket exists, so that a failed
 * check can never send a packet off this machine.
 */
export function loopbackOnly() {
  const calls: string[] = [];
  const fn = (address: string, port: number): Socket => {
    calls.push(`${address}:${port}`);
    if (address !== "127.0.0.1" && address !== "::1") throw new Error(`test connect hook: refusing ${address}:${port}`);
    return connect({ host: address, port, allowHalfOpen: true });
  };
  return { calls, fn };
}

/** Sends raw bytes to the gate as a relay's client (with the token, unless null) and returns everything it answers. */
export async function rawGate(socketPath: string, token: string | null, payload: string | Buffer, opts: { waitMs?: number } = {}): Promise<string> {
  // Not half-open: when the gate ends its side, so does this client, and the answer is complete.
  const s = await gateClient(socketPath, token, { allowHalfOpen: false });
  return new Promise((resolve) => {
    let out = "";
    const timer = setTimeout(() => s.destroy(), opts.waitMs ?? 3000);
    s.write(payload);
    s.on("data", (d: Buffer) => (out += d.toString("latin1")));
    s.on("close", () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

export const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);

/**
 * A loopback TCP server that speaks no HTTP of its own: it records every
 * connection and every byte, and answers what answer() returns for the bytes
 * so far. With read: false it never reads, so whatever is sent to it piles up
 * in front of it.
 */
export interface RawUpstream {
  port: number;
  /** Every byte received, all connections, in order (latin1). */
  received(): string;
  connections: number;
  open: number;
  /** The client port of each connection it accepted (the other end is 127.0.0.1:port). */
  peers: number[];
  close(): Promise<void>;
}

export async function rawUpstream(opts: { answer?: (soFar: string, s: Socket) => string | undefined; read?: boolean } = {}): Promise<RawUpstream> {
  let all = "";
  const sockets = new Set<Socket>();
  const state = { connections: 0, open: 0 };
  const peers: number[] = [];
  const server = createNetServer({ pauseOnConnect: opts.read === false, allowHalfOpen: true }, (s) => {
    state.connections += 1;
    state.open += 1;
    peers.push(s.remotePort!);
    sockets.add(s);
    s.on("close", () => ((state.open -= 1), sockets.delete(s)));
    s.on("error", () => {});
    let soFar = "";
    s.on("data", (d: Buffer) => {
      soFar += d.toString("latin1");
      all += d.toString("latin1");
      const reply = opts.answer?.(soFar, s);
      if (reply !== undefined) s.write(reply, "latin1");
    });
  });
  const port = await listenLoopback(server);
  return {
    port,
    received: () => all,
    get connections() {
      return state.connections;
    },
    get open() {
      return state.open;
    },
    peers,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/**
 * How many ends of the connections a raw upstream accepted the kernel still has (/proc/net/tcp, any state:
 * ESTABLISHED, half-closed, TIME_WAIT). None once every one was reset: a reset leaves no state on either end,
 * while a clean close (a FIN) leaves FIN_WAIT2 on the closer's end and CLOSE_WAIT on this upstream's, which
 * keeps its half-open connections. Each connection is matched by its two ports, not by the upstream's port
 * alone: a listener's port may be one that an earlier, unrelated connection still holds in TIME_WAIT.
 *
 * Why not wait for the upstream's Node socket to close: a reset that lands while the upstream still has
 * unread bytes queued reaches Node as a clean end ('end', no error: libuv takes the hang-up after a short
 * read for the end of the stream), and a half-open upstream then stays open.
 */
export function kernelEnds(up: RawUpstream): number {
  const hex = (port: number) => `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const pairs = new Set(up.peers.flatMap((p) => [`${hex(p)} ${hex(up.port)}`, `${hex(up.port)} ${hex(p)}`]));
  return readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1).map((l) => l.trim().split(/\s+/)).filter((f) => f.length > 3 && pairs.has(`${f[1]} ${f[2]}`)).length;
}

/** Waits for a condition the system under test must reach; fails, naming it, if it never does. */
export async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  for (let waited = 0; !cond(); waited += 10) {
    if (waited >= ms) throw new Error(`never happened: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A gate on a fresh private directory, with names from a table and loopback-only upstreams. */
export async function testGate(
  allow: string[],
  opts: {
    deny?: string[];
    names?: Record<string, string[]>;
    resolver?: (name: string) => Promise<string[]>;
    limits?: Partial<GateLimits>;
    onEvent?: (e: EgressEvent) => void;
    durable?: () => Promise<void>;
    tls?: GateOptions["tls"];
    upstreamProxy?: GateOptions["upstreamProxy"];
    worker?: Partial<GateWorker>;
  } = {},
) {
  const dir = mkdtempSync(join(tmpdir(), "vak-gate-test-"));
  const events: EgressEvent[] = [];
  const hook = loopbackOnly();
  const names = opts.names ?? {};
  const gate = new EgressGate({
    dir: join(dir, "s"),
    resolver: opts.resolver ?? (async (name) => names[name] ?? Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" }))),
    connect: hook.fn,
    ownAddresses: new Set(),
    onEvent: (e) => {
      events.push(e);
      opts.onEvent?.(e);
    },
    limits: opts.limits,
    durable: opts.durable,
    tls: opts.tls,
    upstreamProxy: opts.upstreamProxy,
  });
  await gate.listen();
  const token = gate.register({ component: "test", generation: 1, grants: parseNetGrants(allow, opts.deny ?? []), ...opts.worker });
  return {
    gate,
    token,
    events,
    hook,
    close: async () => {
      await gate.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts a server on an ephemeral loopback port and returns the port. */
export async function listenLoopback(server: NetServer): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as { port: number }).port;
}

/** Two ends of one loopback TCP connection: what a relay accepts, and the client it accepted. */
export async function loopbackPair(allowHalfOpen = true): Promise<{ client: Socket; accepted: Socket }> {
  const server = createNetServer({ pauseOnConnect: true });
  const port = await listenLoopback(server);
  const accepted = new Promise<Socket>((r) => server.once("connection", r));
  const client = connect({ port, host: "127.0.0.1", allowHalfOpen });
  client.on("error", () => {});
  await new Promise((r) => client.once("connect", r));
  const a = await accepted;
  server.close();
  return { client, accepted: a };
}

/**
 * A client of the gate, as the launcher's relay makes one: the accepted end of
 * a loopback connection goes to the gate with the token's message (or, with
 * null, a message without one), and the client end is returned.
 */
export async function gateClient(socketPath: string, token: string | null, opts: { allowHalfOpen?: boolean } = {}): Promise<Socket> {
  const { client, accepted } = await loopbackPair(opts.allowHalfOpen ?? true);
  sendClient(socketPath, token === null ? "HELLO" : `VAK-TOKEN ${token}`, socketFd(accepted));
  accepted.destroy();
  return client;
}

/** Everything a socket receives until the other side ends it (or it closes). */
export function collect(s: Socket): { text(): string; closed: Promise<void> } {
  let out = "";
  s.on("data", (d: Buffer) => (out += d.toString("latin1")));
  const closed = new Promise<void>((r) => (s.once("end", () => r()), s.once("close", () => r())));
  return { text: () => out, closed };
}

/** One request as a lenient server read it, and the connection it came on. */
export interface LenientRequest {
  connection: number;
  line: string;
  /** The head's fields, names folded as the server folds them. */
  headers: Record<string, string>;
  body: string;
}

/**
 * Reads every request on one connection as it comes, pipelined ones too, the
 * way a lenient server does (lenientUpstream's rules), and hands each over.
 */
export function readLeniently(s: Socket, connection: number, onRequest: (r: LenientRequest) => void): void {
  let buf = "";
  s.on("data", (d: Buffer) => {
    buf += d.toString("latin1");
    for (;;) {
      const m = /\r?\n\r?\n/.exec(buf);
      if (!m) return;
      const lines = buf.slice(0, m.index).split(/\r?\n/);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const c = l.indexOf(":");
        const name = l.slice(0, c).trim().toLowerCase().replace(/_/g, "-");
        if (c > 0 && !(name in headers)) headers[name] = l.slice(c + 1).trim();
      }
      let at = m.index + m[0].length;
      let body = "";
      if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
        for (;;) {
          const nl = buf.indexOf("\n", at);
          if (nl < 0) return;
          const size = parseInt(buf.slice(at, nl), 16) || 0;
          if (size === 0) {
            const end = buf.indexOf("\n", nl + 1);
            if (end < 0) return;
            at = end + 1;
            break;
          }
          if (buf.length < nl + 1 + size + 2) return;
          body += buf.slice(nl + 1, nl + 1 + size);
          at = nl + 1 + size + 2;
        }
      } else {
        const cl = parseInt(headers["content-length"] ?? "0", 10) || 0;
        if (buf.length < at + cl) return;
        body = buf.slice(at, at + cl);
        at += cl;
      }
      buf = buf.slice(at);
      onRequest({ connection, line: lines[0]!, headers, body });
    }
  });
}

/**
 * A lenient HTTP/1.1 server of the kind request smuggling exploits (CGI-style
 * gateways, old proxies): header names folded (case, `_` read as `-`), a
 * Transfer-Encoding that contains "chunked" anywhere taken over a
 * Content-Length, the first Content-Length taken, a bare LF as a line end.
 * It reads every request on a connection as it comes, pipelined ones too,
 * records each, and answers each with `seen <target>`. A test that counts its
 * requests sees what a smuggled request would do to such a server.
 */
export async function lenientUpstream(answer?: (r: LenientRequest) => string | undefined): Promise<{ port: number; requests: LenientRequest[]; readonly connections: number; close(): Promise<void> }> {
  const requests: LenientRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createNetServer({ allowHalfOpen: true }, (s) => {
    const connection = ++connections;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    readLeniently(s, connection, (r) => {
      requests.push(r);
      const text = `seen ${r.line.split(" ")[1]}`;
      s.write(answer?.(r) ?? `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`, "latin1");
    });
  });
  const port = await listenLoopback(server);
  return {
    port,
    requests,
    get connections() {
      return connections;
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}
