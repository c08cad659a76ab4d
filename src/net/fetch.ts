import { connect as netConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { Agent, request } from "undici";
import { AddressError, type Host, hostText, parseAuthority } from "../policy/address.js";
import { hostAddresses, type Resolver, resolveDestination, systemResolver } from "./destination.js";
import { withDeadline } from "./dns.js";
import { hasHidden } from "../text/visible.js";
import { capped, type EgressEvent } from "./egress-log.js";
import { decideDestination, hasPathRule, type NetGrants } from "../policy/net-grants.js";
import { canonicalPath } from "../policy/url-path.js";
import { intentOf, intentRefusal } from "./request-intent.js";

/**
 * The host's own fetches (the web_fetch tool): the egress gate's rules, applied
 * in-process. Every hop of a redirect chain is checked again from scratch;
 * names resolve once, on the host, and the connection goes to the address that
 * was checked; the body and the time are bounded; reads and writes are granted
 * separately.
 */
export interface WebFetchOptions {
  grants: NetGrants;
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Bytes of body kept; the rest is cut and `truncated` set. */
  maxBytes?: number;
  /** The whole fetch, redirects included. */
  timeoutMs?: number;
  maxRedirects?: number;
  resolver?: Resolver;
  ownAddresses?: ReadonlySet<string>;
  /** Opens the connection; tests replace it to prove that a refused hop never connects. */
  connect?: (address: string, port: number, tls: { servername?: string } | undefined) => Socket;
  onEvent?: (e: EgressEvent) => void;
  component?: string;
  generation?: number;
}

export interface WebFetchResult {
  url: string;
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
  truncated: boolean;
  /** Every URL requested, in order. */
  hops: string[];
}

export class WebFetchError extends Error {
  constructor(
    message: string,
    readonly hops: string[],
  ) {
    super(message);
    this.name = "WebFetchError";
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** All that follows a redirect to another origin: credentials come in too many names (X-Api-Key, Private-Token, ...) to list. */
const CROSS_ORIGIN_SAFE = new Set(["accept", "accept-encoding", "accept-language", "cache-control", "pragma", "user-agent"]);
const BODY_HEADERS = new Set(["content-type", "content-language"]);

function defaultConnect(address: string, port: number, tls: { servername?: string } | undefined): Socket {
  if (!tls) return netConnect({ host: address, port });
  // Verified whatever NODE_TLS_REJECT_UNAUTHORIZED is in this process's environment (upstreamTls in node-forward.ts).
  return tlsConnect({ host: address, port, servername: tls.servername, rejectUnauthorized: true, ALPNProtocols: ["http/1.1"] });
}

/** Splits a URL into scheme, canonical host, port and the rest, refusing what our parser and a client's could disagree on. */
function target(url: string): { scheme: "http" | "https"; host: Host; port: number; path: string } {
  // Anywhere in it, the fragment too: the URL is shown to the model as the result's "final URL" line.
  if (/[\u0000-\u0020\u007f]/.test(url) || hasHidden(url)) throw new AddressError("control characters, spaces or invisible characters in the URL");
  const m = /^(https?):\/\/([^/?#\\]*)([^#]*)/i.exec(url);
  if (!m) throw new AddressError(`only absolute http:// and https:// URLs can be fetched: ${url.slice(0, 200)}`);
  const scheme = m[1]!.toLowerCase() as "http" | "https";
  const { host, port } = parseAuthority(m[2]!, scheme === "https" ? 443 : 80);
  const path = m[3] || "/";
  if (path.includes("\\")) throw new AddressError("a backslash in the URL path");
  return { scheme, host, port, path: path.startsWith("/") ? path : `/${path}` };
}

export async function webFetch(url: string, opts: WebFetchOptions): Promise<WebFetchResult> {
  const maxBytes = opts.maxBytes ?? 5 * 1024 * 1024;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = AbortSignal.timeout(timeoutMs);
  const until = Date.now() + timeoutMs;
  const resolver = opts.resolver ?? systemResolver;
  const own = opts.ownAddresses ?? hostAddresses();
  const open = opts.connect ?? defaultConnect;
  const emit = (e: Omit<EgressEvent, "time" | "component" | "generation">) =>
    opts.onEvent?.(capped({ time: new Date().toISOString(), component: opts.component ?? "host", generation: opts.generation ?? 0, ...e }));
  let method = (opts.method ?? "GET").toUpperCase();
  let body = opts.body;
  let headers: Record<string, string> = { ...opts.headers };
  const hops: string[] = [];
  let current = url;
  for (let redirects = 0; ; redirects++) {
    hops.push(current);
    let t: ReturnType<typeof target>;
    try {
      t = target(current);
    } catch (e) {
      emit({ method, asked: current, decision: "denied", reason: (e as Error).message });
      throw new WebFetchError(`refused ${current}: ${(e as Error).message}`, hops);
    }
    const canonical = `${hostText(t.host)}:${t.port}`;
    // Where a grant names paths, the path is decided and sent in its canonical form, as the gate does: the server gets what was checked.
    let checkedPath: string | undefined;
    if (hasPathRule(opts.grants, t.host, t.port)) {
      try {
        const cp = canonicalPath(t.path);
        checkedPath = cp.path;
        t.path = cp.path + cp.query;
      } catch (e) {
        emit({ method, asked: current, canonical, decision: "denied", code: "path", reason: (e as Error).message });
        throw new WebFetchError(`refused ${method} ${current}: ${(e as Error).message}`, hops);
      }
    }
    const d = decideDestination(opts.grants, t.host, t.port, method, checkedPath);
    if (!d.allowed) {
      emit({ method, asked: current, canonical, decision: "denied", reason: d.reason });
      throw new WebFetchError(`refused ${method} ${current}: ${d.reason}`, hops);
    }
    // What the request asks beyond its method (a body, an override header, `_method`), decided as the gate decides it.
    const head = { method, target: t.path, version: "1.1" as const, headers: Object.entries(headers) };
    const intent = intentOf(head, body === undefined ? { kind: "none" } : { kind: "length", length: Buffer.byteLength(body) });
    const refused = intentRefusal(d.rule, intent);
    if (refused) {
      emit({ method, asked: current, canonical, decision: "denied", ...refused });
      throw new WebFetchError(`refused ${method} ${current}: ${refused.reason}`, hops);
    }
    // The lookup too ends at the fetch's deadline, however many hops came before it.
    const writes = intent.write !== undefined;
    const r = await resolveDestination(t.host, t.port, opts.grants, withDeadline(resolver, Math.max(1, until - Date.now())), own, method, { writes, ...(checkedPath === undefined ? {} : { path: checkedPath }) });
    if (!r.ok) {
      emit({ method, asked: current, canonical, resolved: r.resolved, decision: "denied", reason: r.reason });
      throw new WebFetchError(`refused ${method} ${current}: ${r.reason}`, hops);
    }
    const servername = t.host.kind === "name" ? t.host.name : undefined;
    const dispatcher = new Agent({
      connect: (_o, cb) => {
        const s = open(r.address, t.port, t.scheme === "https" ? { servername } : undefined);
        const ready = t.scheme === "https" ? "secureConnect" : "connect";
        s.once(ready, () => cb(null, s as never));
        s.once("error", (e) => cb(e, null));
        return s as never;
      },
    });
    let res;
    try {
      res = await request(`${t.scheme}://${hostText(t.host)}:${t.port}${t.path}`, {
        dispatcher, method: method as never, headers: { ...headers, host: t.port === (t.scheme === "https" ? 443 : 80) ? hostText(t.host) : canonical },
        body: body as never, signal: deadline,
      });
    } catch (e) {
      await dispatcher.close().catch(() => undefined);
      emit({ method, asked: current, canonical, resolved: r.resolved, address: r.address, decision: "allowed", reason: `granted by ${d.rule.text}; failed: ${(e as Error).message}` });
      throw new WebFetchError(`${method} ${current} failed: ${(e as Error).message}`, hops);
    }
    const location = res.headers.location;
    if (REDIRECTS.has(res.statusCode) && typeof location === "string" && redirects < (opts.maxRedirects ?? 5)) {
      await res.body.dump().catch(() => undefined);
      await dispatcher.close().catch(() => undefined);
      emit({ method, asked: current, canonical, resolved: r.resolved, address: r.address, decision: "allowed", reason: `granted by ${d.rule.text}; redirected`, status: res.statusCode });
      let next: string;
      try {
        next = new URL(location, current).toString();
      } catch {
        const reason = `the redirect's Location is not a URL: ${location.slice(0, 200)}`;
        hops.push(location.slice(0, 200));
        emit({ method, asked: location, decision: "denied", reason });
        throw new WebFetchError(`refused ${reason}`, hops);
      }
      if (res.statusCode === 303 || ((res.statusCode === 301 || res.statusCode === 302) && method === "POST")) {
        method = "GET";
        body = undefined;
      }
      if (new URL(next).origin !== new URL(current).origin)
        headers = Object.fromEntries(Object.entries(headers).filter(([k]) => CROSS_ORIGIN_SAFE.has(k.toLowerCase()) || (body !== undefined && BODY_HEADERS.has(k.toLowerCase()))));
      current = next;
      continue;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    try {
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        if (size + b.length > maxBytes) {
          chunks.push(b.subarray(0, maxBytes - size));
          size = maxBytes;
          truncated = true;
          break;
        }
        chunks.push(b);
        size += b.length;
      }
    } catch (e) {
      // The deadline, or the server cutting the body short: the request was made, so it is on the record too.
      const why = deadline.aborted ? `timed out after ${timeoutMs} ms` : (e as Error).message;
      emit({ method, asked: current, canonical, resolved: r.resolved, address: r.address, decision: "allowed", reason: `granted by ${d.rule.text}; the body failed: ${why}`, status: res.statusCode, bytesDown: size });
      throw new WebFetchError(`${method} ${current} failed while reading the body: ${why}`, hops);
    } finally {
      res.body.destroy();
      await dispatcher.destroy().catch(() => undefined);
    }
    emit({ method, asked: current, canonical, resolved: r.resolved, address: r.address, decision: "allowed", reason: `granted by ${d.rule.text}`, status: res.statusCode, bytesDown: size });
    return { url: current, status: res.statusCode, headers: res.headers as Record<string, string | string[]>, body: Buffer.concat(chunks), truncated, hops };
  }
}
