import type { Socket } from "node:net";
import { type Host, hostText, parseAuthority } from "../policy/address.js";
import { isRelay } from "./endpoint.js";
import { headEnd, type RequestHead } from "./http1.js";
import { LimitError, outcomeOf, RecordError, tunnelOutcome, UpstreamError } from "./outcome.js";
import { forHost } from "./placeholders.js";
import type { Checked, Connection } from "./proxy-context.js";
import { hostHeaderProblem } from "./proxy-head.js";
import { ClosedError, SocketReader } from "./reader.js";
import { sniMatches, terminate, TerminateError } from "./terminate.js";
import { looksLikeTls, readHello } from "./client-hello.js";
import { plainStart } from "./plain-start.js";
import { type EarlyUpstream, preconnect } from "./tls-early.js";
import { upstreamTls } from "./node-forward.js";

// CONNECT at the gate: an opaque tunnel spliced by the engine where every grant for the destination
// allows every method and path; else TLS terminated here and each request inside decided as any other.


/**
 * A CONNECT whose grant must see inside: TLS is terminated here, and each
 * request inside is read, decided (method, path), given its secrets and sent
 * to the address checked now, over TLS verified for the checked name.
 */
async function terminated(conn: Connection, asked: string, target: { host: Host; port: number }, c: Checked & { ok: true }, why: string): Promise<void> {
  const tls = conn.ctx.tls;
  if (!tls) return void conn.refuse("CONNECT", asked, 403, "no-tls", `${why}, which needs TLS at the gate, and this gate has none`, { canonical: c.canonical });
  const allowed = {
    method: "CONNECT", asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed" as const,
    reason: `granted by ${c.rule}; TLS terminated at the gate: ${why}`, tls: "terminated" as const,
  };
  conn.ctx.record(allowed);
  let outcome = "completed";
  let status: number | undefined;
  let early: EarlyUpstream | undefined;
  let recordFailed: unknown;
  try {
    // Answered at once, while the record is made durable: the client's handshake with the gate (nothing
    // leaves the host) overlaps the sync. Nothing goes upstream before it is durable (the early connection
    // waits for it, and each request inside for its own record), and a record that cannot be made durable
    // ends the tunnel.
    const recorded = conn.durable();
    recorded.catch((e: unknown) => {
      recordFailed = e;
      conn.socket.destroy();
    });
    status = 200;
    // Allowed, and the client speaks TLS: the upstream's connection is made (once the record is durable) while it does its handshake.
    const secure = await terminate(conn.socket, conn.reader, target.host, (h) => tls.serverContext(h), conn.ctx.limits.headerMs, () => {
      early = preconnect(conn.ctx, c.address, target.port, (s) => upstreamTls(s, target.host, tls), recorded);
    });
    await recorded;
    secure.setTimeout(conn.ctx.limits.idleMs, () => secure.destroy());
    const inner = conn.inside(secure, new SocketReader(secure, (n) => conn.ctx.take(n)), { ...target, address: c.address, resolved: c.resolved, early }, false);
    try {
      await inner.serve();
    } finally {
      inner.close();
    }
  } catch (e) {
    if (recordFailed !== undefined) outcome = outcomeOf(recordFailed);
    else if (e instanceof TerminateError) {
      outcome = `refused: ${e.message}`;
      conn.ctx.record({ method: "CONNECT", asked, canonical: c.canonical, decision: "denied", code: e.code, reason: e.message, tls: "terminated" });
    } else outcome = outcomeOf(e);
    conn.socket.destroy();
  } finally {
    early?.discard();
    conn.ctx.record({ ...allowed, outcome, ...(status === undefined ? {} : { status }) });
  }
}

/** CONNECT host:port: an opaque tunnel, opened only by a grant for every method and path. */
export async function connect(conn: Connection, head: RequestHead): Promise<void> {
  const asked = head.target;
  let target: { host: Host; port: number };
  try {
    target = parseAuthority(asked);
  } catch (e) {
    return void conn.refuse("CONNECT", asked, 400, "bad-destination", `bad CONNECT target: ${(e as Error).message}`);
  }
  const hostProblem = hostHeaderProblem(head.headers, target, target.port, false);
  if (hostProblem) return void conn.refuse("CONNECT", asked, 400, "host-header", hostProblem);
  if (conn.ctx.endpoints.length && isRelay(target.host, target.port)) {
    // A client whose proxy agent tunnels even plain HTTP, to its endpoint: the tunnel goes to the gate itself,
    // where only endpoints are served, each request decided as any other.
    conn.ctx.record({ method: "CONNECT", asked, canonical: `${hostText(target.host)}:${target.port}`, decision: "allowed", reason: "a tunnel to the relay itself: only provider endpoints are served inside" });
    conn.socket.write(ESTABLISHED);
    return conn.inside(conn.socket, conn.reader, undefined, true).serve();
  }
  const c = await conn.ctx.check("CONNECT", target.host, target.port, {});
  if (!c.ok) return void conn.refuse("CONNECT", asked, c.status, c.code, c.reason, { canonical: c.canonical, resolved: c.resolved });
  const secret = conn.ctx.secretHeaders(target.host, target.port).length > 0 || conn.ctx.placeholders.some((p) => forHost(p.hosts, target.host, target.port));
  if (c.inspect || secret) return terminated(conn, asked, target, c, c.inspect ? `the grant ${c.rule} is checked on each request` : "a secret goes into its requests");
  const allowed = { method: "CONNECT", asked, canonical: c.canonical, resolved: c.resolved, address: c.address, decision: "allowed" as const, reason: `granted by ${c.rule}`, tls: "spliced" as const };
  conn.ctx.record(allowed);

  let status: number | undefined;
  let outcome = "completed";
  const bytes = { up: 0, down: 0 };
  let upstream: Socket | undefined;
  let plain = false;
  const abort = () => upstream?.destroy();
  conn.socket.once("close", abort);
  try {
    await conn.durable();
    if (conn.socket.destroyed) throw new ClosedError();
    const s = conn.ctx.openUpstream(c.address, target.port);
    upstream = s;
    await conn.ctx.upstreamReady(s, c.address, target.port).catch((e: Error) => {
      throw conn.socket.destroyed ? new ClosedError() : new UpstreamError(e.message === "the upstream closed before it connected" ? "closed before connecting" : e.message);
    });
    if (conn.socket.destroyed) throw new ClosedError();
    conn.socket.write(ESTABLISHED);
    status = 200;
    const early = await firstBytes(conn, s, target.host);
    if (early.plain) {
      // Plain HTTP inside: served as requests to this destination, at the address checked now, each one decided.
      s.destroy();
      plain = true;
      conn.reader.unread(early.up);
      const inner = conn.inside(conn.socket, conn.reader, { ...target, address: c.address, resolved: c.resolved, plain: true }, false);
      try {
        await inner.serve();
      } finally {
        inner.close();
      }
      return;
    }
    // From here the bytes are the engine's: what either side sent early goes first, then the kernel splices.
    const ended = conn.ctx.splice(conn.socket, s, early.up, early.down);
    conn.socket.off("close", abort);
    conn.socket.destroy();
    s.destroy();
    const end = await ended;
    bytes.up = early.up.length + end.up;
    bytes.down = early.down.length + end.down;
    outcome = tunnelOutcome(end.outcome, conn.ctx.limits);
  } catch (e) {
    outcome = e instanceof TerminateError ? `refused: ${e.message}` : outcomeOf(e);
    if (e instanceof TerminateError) conn.ctx.record({ method: "CONNECT", asked, canonical: c.canonical, decision: "denied", code: e.code, reason: e.message, tls: "spliced" });
    if (status !== undefined || e instanceof ClosedError || e instanceof RecordError || (e instanceof LimitError && !e.status)) conn.socket.destroy();
    else {
      status = e instanceof LimitError ? (e.status ?? 502) : 502;
      conn.reply(status, `vak egress gate: ${outcome}\n`);
    }
  } finally {
    conn.socket.off("close", abort);
    upstream?.destroy();
    const inside = plain ? { tls: undefined, reason: `${allowed.reason}; plain HTTP inside, each request decided on its own` } : {};
    conn.ctx.record({ ...allowed, ...inside, outcome, ...(status === undefined ? {} : { status }), bytesUp: bytes.up, bytesDown: bytes.down });
  }
}

/** Whether a request head is whole in b, read as the gate's reader reads one (empty lines before it skipped). */
function headWhole(b: Buffer): boolean {
  let start = 0;
  while (b[start] === 13 && b[start + 1] === 10) start += 2;
  return headEnd(b.subarray(start)) >= 0;
}

const ESTABLISHED = Buffer.from("HTTP/1.1 200 Connection Established\r\n\r\n");

/** A fatal TLS alert, unrecognized_name: what a client that asked for another name is told. */
const UNRECOGNIZED_NAME = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70]);

/**
 * The first bytes of an opaque tunnel, once it is answered: the client's, and the server's if it speaks first.
 * A server that hosts several names picks one by the SNI, so a ClientHello must ask for the CONNECT target (or
 * for no name): a tunnel opened to a name granted in full must not reach, at the same address, a name whose grant
 * is narrower (read:, paths, a secret's host), or one not granted. The whole ClientHello is read (within the head
 * deadline); one the gate cannot read, a name that is not the target, a hello not complete in time, is refused
 * (a TLS alert, unrecognized_name) and nothing is spliced. Plain HTTP picks its name by the Host header, so a
 * client whose first line is an HTTP request (plain-start.ts) is not spliced at all: once its first head is
 * whole (within the head deadline, as any head), plain is set, and the caller serves its requests. Other bytes
 * (SSH, a server that speaks first) go on as they came. The head deadline runs from the client's first byte:
 * until either side sends, the tunnel waits (its idle limit ends it), as a client silent past the deadline
 * and then sending a request or a ClientHello must be read all the same. Nothing is taken from either socket
 * that does not go into the splice (or, for plain HTTP, back into the client's reader).
 */
async function firstBytes(conn: Connection, upstream: Socket, target: Host): Promise<{ up: Buffer; down: Buffer; plain?: true }> {
  const client = conn.socket;
  const upReader = new SocketReader(upstream, (n) => conn.ctx.take(n), "upstream");
  const ms = conn.ctx.limits.headerMs;
  /** Set at the client's first byte. */
  let deadline: number | undefined;
  let up = Buffer.alloc(0);
  let down = Buffer.alloc(0);
  // What ends the wait from outside is said as the engine would say it of a spliced tunnel.
  let idle = false;
  const onIdle = () => (idle = true);
  const stopped = (): Error => {
    const ended = conn.ctx.ended();
    if (idle) return new LimitError(`no data either way for ${conn.ctx.limits.idleMs} ms`);
    if (ended) return new LimitError(ended === "revoked" ? "the worker's grant was revoked" : "the command that opened it has ended");
    if (conn.ctx.closing()) return new LimitError("the gate closed");
    return client.destroyed ? new ClosedError() : new UpstreamError("its connection failed before the tunnel began");
  };
  const refuse = (why: string) => {
    client.write(UNRECOGNIZED_NAME);
    return new TerminateError("sni-mismatch", `${why}; an opaque tunnel reaches only the host it names: CONNECT to the name the client asks for (it needs a grant of its own)`);
  };
  client.once("timeout", onIdle);
  upstream.once("timeout", onIdle);
  try {
    for (;;) {
      up = Buffer.concat([up, conn.reader.takeBuffered()]);
      down = Buffer.concat([down, upReader.takeBuffered()]);
      const over = client.destroyed || client.readableEnded || upstream.destroyed || upstream.readableEnded;
      if (up.length && deadline === undefined) deadline = Date.now() + ms;
      if (up.length && looksLikeTls(up)) {
        const h = readHello(up);
        if (h.kind === "malformed") throw refuse(`the client's TLS handshake cannot be read (${h.why})`);
        if (h.kind === "hello") {
          const other = h.names.find((n) => !sniMatches(n, target));
          if (other !== undefined) throw refuse(`the TLS handshake asked for ${other.slice(0, 200)}, not the CONNECT target ${hostText(target)}`);
          break;
        }
        // Part of a ClientHello: more is awaited, unless a side has ended (what was sent cannot become a whole one).
        if (over) break;
      } else if (up.length) {
        const start = plainStart(up);
        // A request: served by the caller once its head is whole (its deadline is this one), or cannot become so.
        if (start === "http" && (headWhole(up) || up.length > conn.ctx.limits.headerBytes || client.destroyed || client.readableEnded)) return { up, down, plain: true };
        // A first line that may yet be a request is awaited whole, whatever the server sends meanwhile; one the
        // client ended before its line did is no request (no server acts on a request line cut short).
        if (start === "other" || client.destroyed || client.readableEnded) break;
      } else if (down.length || over) break; // a server that speaks first: nothing to check
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) {
        if (looksLikeTls(up)) throw refuse(`the client's TLS handshake was not complete within ${ms} ms`);
        throw new TerminateError("head-timeout", `the client's first request head (or a line that may start one) was not complete within ${ms} ms; plain HTTP inside a tunnel is decided request by request`);
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          for (const x of [client, upstream]) for (const ev of ["readable", "end", "close"]) x.off(ev, done);
          resolve();
        };
        const timer = left === undefined ? undefined : setTimeout(done, left);
        for (const x of [client, upstream]) for (const ev of ["readable", "end", "close"]) x.on(ev, done);
      });
    }
    // The answer must have left before the engine takes the socket (it is written here, not by the engine).
    if (!client.destroyed && client.writableLength > 0) await new Promise<void>((resolve) => (client.once("drain", resolve), client.once("close", resolve)));
    if (client.destroyed || upstream.destroyed) throw stopped();
  } finally {
    client.off("timeout", onIdle);
    upstream.off("timeout", onIdle);
  }
  // What came meanwhile goes too; the caller splices at once, with no turn of the event loop between.
  return { up: Buffer.concat([up, conn.reader.takeBuffered()]), down: Buffer.concat([down, upReader.takeBuffered()]) };
}
