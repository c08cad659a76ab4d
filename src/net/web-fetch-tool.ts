import { connect as netConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { sandboxSource } from "./loopback-source.js";
import type { EgressEvent } from "./egress-log.js";
import { webFetch, WebFetchError, type WebFetchOptions } from "./fetch.js";
import type { NetGrants } from "../policy/net-grants.js";
import { upstreamTrust } from "./tls-trust.js";
import { htmlToText } from "./web-text.js";
import { hiddenReplaced } from "../text/visible.js";

/**
 * The brokered web capability (`web_fetch`): the host makes the request under
 * the component's own net grants (webFetch: every redirect hop checked again,
 * names resolved once on the host, private, link-local and metadata addresses
 * refused unless a grant names them, reads and writes granted apart), with the
 * body and the time bounded, and gives back text: HTML reduced to what a
 * reader sees, other text as it is but for hidden characters (webFetchResultText),
 * anything else refused. No sandbox needs a
 * CA for this: TLS is the host's. The caller fences the result as untrusted,
 * labelled with its final URL, and every hop is on the record (onEvent).
 */
export interface WebFetchArgs {
  url: string;
  /** Characters of text given back (the page is cut past this). */
  maxChars?: number | undefined;
}

export type WebFetchOutcome =
  | { ok: true; url: string; status: number; contentType: string; text: string; truncated: boolean; hops: string[] }
  | { ok: false; message: string; hops: string[] };

export interface WebFetchCapability {
  grants: NetGrants;
  component: string;
  generation: number;
  onEvent: (e: EgressEvent) => void;
  /** For tests: the resolver, the host's own addresses and the connect hook of webFetch. */
  net?: Pick<WebFetchOptions, "resolver" | "ownAddresses" | "connect">;
  /** CA files trusted besides the system store and NODE_EXTRA_CA_CERTS: the same trust as the gate's upstreams. */
  caFiles?: readonly string[] | undefined;
  maxBytes?: number;
  timeoutMs?: number;
}

const MAX_BYTES = 2 * 1024 * 1024;
const TIMEOUT_MS = 20_000;
const MAX_CHARS = 50_000;
const TEXTUAL = /^(text\/|application\/(json|xml|xhtml\+xml|javascript|ld\+json|rss\+xml|atom\+xml)|[^;]*\+json|[^;]*\+xml)/i;

function charsetOf(contentType: string): BufferEncoding {
  const c = /charset\s*=\s*"?([A-Za-z0-9_-]+)/i.exec(contentType)?.[1]?.toLowerCase();
  return c === "iso-8859-1" || c === "latin1" || c === "us-ascii" || c === "ascii" ? "latin1" : "utf8";
}

export async function runWebFetch(args: WebFetchArgs, cap: WebFetchCapability): Promise<WebFetchOutcome> {
  const maxChars = Math.min(args.maxChars ?? MAX_CHARS, 200_000);
  try {
    // Servers are verified against what the gate trusts upstream (tls-trust.ts), for the checked name or address.
    const trust = upstreamTrust({ caFiles: cap.caFiles ?? [] });
    const connect: WebFetchOptions["connect"] = (address, port, tls) =>
      tls
        ? tlsConnect({ host: address, port, ...sandboxSource(address), ...(tls.servername ? { servername: tls.servername } : {}), secureContext: trust.context(), rejectUnauthorized: true, ALPNProtocols: ["http/1.1"] })
        : netConnect({ host: address, port, ...sandboxSource(address) });
    const r = await webFetch(args.url, {
      grants: cap.grants, method: "GET", headers: { accept: "text/html,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.1", "user-agent": "vak-web-fetch" },
      maxBytes: cap.maxBytes ?? MAX_BYTES, timeoutMs: cap.timeoutMs ?? TIMEOUT_MS, maxRedirects: 5,
      onEvent: cap.onEvent, component: cap.component, generation: cap.generation, connect, ...cap.net,
    });
    const ct = String(Array.isArray(r.headers["content-type"]) ? r.headers["content-type"][0] : (r.headers["content-type"] ?? "")).slice(0, 200);
    if (ct && !TEXTUAL.test(ct)) return { ok: false, message: `${r.url} answered ${r.status} with ${ct}, which is not text; web_fetch gives back text only`, hops: r.hops };
    const raw = r.body.toString(charsetOf(ct));
    const html = /html/i.test(ct) || (!ct && /^\s*<(!doctype html|html)/i.test(raw));
    let text = html ? htmlToText(raw, maxChars) : raw;
    if (!html && text.length > maxChars) text = `${text.slice(0, maxChars)}\n…[${text.length - maxChars} more characters cut]`;
    return { ok: true, url: r.url, status: r.status, contentType: ct || "(none)", text, truncated: r.truncated, hops: r.hops };
  } catch (e) {
    if (e instanceof WebFetchError) return { ok: false, message: e.message, hops: e.hops };
    return { ok: false, message: `web_fetch ${args.url.slice(0, 300)} failed: ${(e as Error).message}`, hops: [] };
  }
}

/**
 * The text a model gets back: where it ended up, and what it said. The agent
 * fences it as untrusted. Whatever the server chose (the page, plain text or
 * JSON alike, a header, a Location in a refusal) reaches the model without
 * the characters that hide text or drive a terminal, as an HTML page's text
 * does (web-text.ts); the header lines and a refusal are one line each.
 */
export function webFetchResultText(o: WebFetchOutcome): string {
  const line = (s: string) => hiddenReplaced(s, " ").replace(/[\n\t]/g, " ");
  if (!o.ok) return `refused or failed: ${line(o.message)}`;
  const redirected = o.hops.length > 1 ? `\nredirected from: ${line(o.hops.slice(0, -1).join(" -> "))}` : "";
  return `final URL: ${line(o.url)}\nstatus: ${o.status}\ncontent-type: ${line(o.contentType)}${redirected}${o.truncated ? "\n(the body was cut at the size limit)" : ""}\n\n${hiddenReplaced(o.text, " ")}`;
}
