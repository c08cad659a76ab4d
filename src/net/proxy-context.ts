import type { Socket } from "node:net";
import type { SecureContext } from "node:tls";
import type { Host } from "../policy/address.js";
import type { EgressEvent } from "./egress-log.js";
import type { Endpoint } from "./endpoint.js";
import type { ChunkedOut, TunnelEnd } from "./engine.js";
import type { PlaceholderSecret } from "./placeholders.js";
import type { Intent } from "./request-intent.js";
import type { SocketReader } from "./reader.js";
import type { EarlyUpstream } from "./tls-early.js";

// What one client connection of the egress gate is given by the gate (egress-gate.ts): the types every
// part of a connection (proxy.ts, connect.ts, node-forward.ts, spliced.ts) shares.

export type EgressFields = Omit<EgressEvent, "time" | "component" | "generation">;

export type Checked =
  | { ok: true; canonical: string; address: string; resolved: string[]; rule: string; inspect?: boolean }
  | { ok: false; status: number; code: string; reason: string; canonical: string; resolved?: string[] };

/** What a client connection needs from the gate: its worker's decisions, limits and record. */
export interface ProxyContext {
  limits: { headerBytes: number; headerMs: number; bytesPerConnection: number; idleMs: number };
  /** Counts bytes received for this connection; throws LimitError past its budget. */
  take(n: number): void;
  record(e: EgressFields): void;
  /** Settles once everything recorded so far is durable; rejects if it cannot be (then nothing is sent). */
  durable(): Promise<void>;
  /**
   * Decides a request and resolves its name (once: pinned, an address already
   * checked for this connection, is used instead). intent is what the request
   * asks beyond its request line (request-intent.ts); path is the canonical
   * path, when a grant for the destination names paths.
   */
  check(method: string, host: Host, port: number, intent: Intent, path?: string, pinned?: { address: string; resolved: string[] }): Promise<Checked>;
  /** Whether a grant for this destination names a path: its requests are then checked, and sent, on their canonical path. */
  pathRules(host: Host, port: number): boolean;
  /** The secret headers this worker's grant puts on requests to this destination. */
  secretHeaders(host: Host, port: number): readonly { ref: string; header: string; value: string; placeholder?: string | undefined; hosts: readonly string[] }[];
  /** Secrets the command holds as placeholders; the gate puts their values in headers for their hosts. */
  placeholders: readonly PlaceholderSecret[];
  /** Provider endpoints on the relay's own address. */
  endpoints: readonly Endpoint[];
  /** TLS at the gate, when this worker's grants may need it: the leaf for a host, and the context that verifies upstreams. */
  tls?: { serverContext(host: Host): Promise<SecureContext>; upstream(): SecureContext } | undefined;
  /** The host of the upstream proxy every upstream connection goes through ([egress] upstream_proxy), if there is one. */
  upstreamProxy?: string | undefined;
  /** Opens an upstream connection counted against the worker's cap; throws LimitError at the cap. */
  openUpstream(address: string, port: number): Socket;
  /** Settles once an opened upstream can carry bytes: connected, and through the upstream proxy if there is one. */
  upstreamReady(s: Socket, address: string, port: number): Promise<void>;
  /**
   * Hands a granted tunnel's two sockets to the engine, which splices them off
   * the event loop with the prefixes first; the caller then destroys its own
   * handles. Settles when the tunnel ends.
   */
  splice(client: Socket, upstream: Socket, upPrefix: Buffer, downPrefix: Buffer): Promise<TunnelEnd>;
  /**
   * Hands the engine one counted body: the prefix, then exactly length bytes
   * from -> to, each byte counted against the connection's budget as it is
   * read (the one counter take() spends too). The sockets stay the caller's, who must not read from or
   * write to them until done settles; cancel() ends it early. With chunked,
   * length is what is left of a chunk, and the engine carries the rest of the
   * chunked body, its framing read and checked natively (GateEngine.transfer).
   */
  transfer(from: Socket, to: Socket, prefix: Buffer, length: number, chunked?: ChunkedOut): { done: Promise<TunnelEnd>; cancel(): void };
  /** Why this worker's connections are being closed, once they are: its grant revoked, or its command ended. */
  ended(): "revoked" | "released" | undefined;
  /** Whether the gate is closing (every connection is being ended). */
  closing(): boolean;
}

/** Inside a tunnel (terminated, or plain HTTP): the destination its CONNECT named, and the address checked for it then. */
export interface Origin {
  host: Host;
  port: number;
  address: string;
  resolved: string[];
  /** The upstream connection opened with the tunnel, for its first request. */
  early?: EarlyUpstream;
  /** Plain HTTP inside an opaque tunnel (connect.ts): sent as plain proxy requests are, to this destination only. */
  plain?: true;
}

/** What the parts of a client connection (connect.ts, node-forward.ts) need of it: proxy.ts's ProxyConnection. */
export interface Connection {
  readonly socket: Socket;
  readonly reader: SocketReader;
  readonly ctx: ProxyContext;
  refuse(method: string, asked: string, status: number, code: string, reason: string, extra?: Partial<EgressFields>): false;
  reply(status: number, text: string): void;
  /** Ends the client's side of a failed request: told why, or cut (reset where its answer ends with the connection); the status on its record. */
  failed(e: unknown, outcome: string, status: number | undefined, untilClose: boolean): number | undefined;
  durable(): Promise<void>;
  /** The requests inside a tunnel, served as a connection of their own: a terminated one (origin), or one to the relay (endpoints only). */
  inside(socket: Socket, reader: SocketReader, origin: Origin | undefined, endpointsOnly: boolean): { serve(): Promise<void>; close(): void };
}
