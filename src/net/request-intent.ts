import { isReadMethod } from "../policy/net-grants.js";
import type { Framing, RequestHead } from "./http1.js";
import { isUpgrade } from "./upgrade.js";

/**
 * What a request asks of its server beyond its request line, for the gate's one decision (egress-gate.ts,
 * check): a write its method does not show, and a path taken from a header instead of the request line.
 * Many servers and frameworks honour a method-override header on any request (a GET with
 * X-HTTP-Method-Override: DELETE deletes), and some route by X-Original-URL or X-Rewrite-URL instead of
 * the path they were sent. Header names are matched as a lenient server matches them: any case, and `_`
 * for `-` (CGI-style gateways fold both to one name).
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
    const write = value.split(",").map((m) => m.trim()).find((m) => !isReadMethod(m));
    if (write !== undefined) intent.write = `${name}: ${value} asks the server for ${write || "(no method)"}, a write`;
  }
  return intent;
}
