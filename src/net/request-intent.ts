import { isReadMethod, type NetRule } from "../policy/net-grants.js";
import type { Framing, RequestHead } from "./http1.js";
import { isUpgrade } from "./upgrade.js";

/**
 * What a request asks of its server beyond its request line, for the gate's one decision (egress-gate.ts,
 * check): a write its method does not show, and a path taken from a header instead of the request line.
 * Many servers and frameworks honour a method-override header on any request (a GET with
 * X-HTTP-Method-Override: DELETE deletes), or a `_method` query parameter (queryWrite), and some route by
 * X-Original-URL or X-Rewrite-URL instead of the path they were sent. Header names are matched as a lenient
 * server matches them: any case, and `_` for `-` (CGI-style gateways fold both to one name).
 */
export interface Intent {
  /** What makes the request a write whatever its method: a read-only grant refuses it, saying this. */
  write?: string;
  /** A header some servers take the path from: a grant that names paths refuses it, saying this. */
  pathHeader?: string;
}

const METHOD_HEADERS: ReadonlySet<string> = new Set(["x-http-method-override", "x-http-method", "x-method-override"]);
const PATH_HEADERS: ReadonlySet<string> = new Set(["x-original-url", "x-rewrite-url"]);

export function intentOf(head: RequestHead, framing: Framing): Intent {
  const intent: Intent = {};
  if (framing.kind !== "none") intent.write = "a request body is a write, whatever its method";
  else if (isUpgrade(head)) intent.write = "a WebSocket carries writes";
  for (const [name, value] of head.headers) {
    const folded = name.toLowerCase().replace(/_/g, "-");
    if (PATH_HEADERS.has(folded)) intent.pathHeader ??= `${name}: ${value}`;
    if (!METHOD_HEADERS.has(folded) || intent.write) continue;
    // Every method a list names, as any server might pick one of them; an empty one is not a read either.
    const write = writeIn(value);
    if (write !== undefined) intent.write = `${name}: ${value} asks the server for ${write || "(no method)"}, a write`;
  }
  intent.write ??= queryWrite(head.target);
  return intent;
}

/** The first method of a list (an override's value) that is not a read; "" for an empty one, which is not a read either. */
function writeIn(list: string): string | undefined {
  return list.split(",").map((m) => m.trim()).find((m) => !isReadMethod(m));
}

/** Decodes %XX until nothing changes (a server behind another may decode twice); a malformed escape stays as it is. */
function decoded(text: string): string {
  let s = text.replace(/\+/g, " ");
  for (let i = 0; i < 8 && /%[0-9a-f]{2}/i.test(s); i++) s = s.replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  return s;
}

/**
 * A `_method` parameter in a request target's query that names a write: why the request is one, or undefined.
 * Rails (Rack::MethodOverride), Laravel, Symfony and Express's method-override take the method from it, on POST
 * by default and on any method in some middleware and configurations. The query is read as a lenient server
 * reads it: split at `&` and `;`, each name and value percent-decoded (`+` a space), the name in any case and
 * with PHP's folding of a leading space, `.` and ` ` to `_`, a list's brackets dropped (`_method[]`); every `_method` counts, as any one may be the one
 * a server takes, and a list names every method in it.
 */
export function queryWrite(target: string): string | undefined {
  const q = target.indexOf("?");
  if (q < 0) return undefined;
  const hash = target.indexOf("#", q);
  for (const part of target.slice(q + 1, hash < 0 ? undefined : hash).split(/[&;]/)) {
    const eq = part.indexOf("=");
    // PHP and Rack read `_method[]` and `_method[k]` as a list under `_method`: the name before its brackets.
    const name = decoded(eq < 0 ? part : part.slice(0, eq)).trimStart().replace(/[. ]/g, "_").replace(/\[.*$/s, "").toLowerCase();
    if (name !== "_method") continue;
    const value = decoded(eq < 0 ? "" : part.slice(eq + 1));
    const write = writeIn(value);
    if (write !== undefined) return `the query parameter ${part.length > 100 ? `${part.slice(0, 100)}…` : part} asks the server for ${write || "(no method)"}, a write`;
  }
  return undefined;
}

/** The refusal of a request a read-only grant does not cover because of what it asks beyond its method. */
function readOnlyReason(write: string, grant: string): string {
  return `${write}; the grant ${grant} allows only GET, HEAD and OPTIONS (writes need --allow-net ${grant.replace(/^read:/, "")})`;
}

/**
 * What the grant that allowed a request's method and path refuses of it for what else it asks (intentOf): the one
 * decision the gate (egress-gate.ts, check) and the host's own fetches (fetch.ts) make.
 */
export function intentRefusal(rule: NetRule, intent: Intent): { code: "read-only" | "path-header"; reason: string } | undefined {
  if (rule.methods === "read" && intent.write) return { code: "read-only", reason: readOnlyReason(intent.write, rule.text) };
  if (rule.path !== undefined && intent.pathHeader)
    return { code: "path-header", reason: `${intent.pathHeader}: some servers take the path from this header, and the grant ${rule.text} decides by the request line's path; leave the header out` };
  return undefined;
}
