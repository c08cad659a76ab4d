import { connect } from "node:net";

/**
 * HTTP/1.1 written by hand, for requests no client library will send: two
 * Host headers, an absolute-form target, no Host at all, a body that never
 * comes, a chosen source address (127.0.0.2 stands for a peer that is not
 * this machine's loopback). Loopback only.
 */
export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  /** Every header line as sent, for headers that repeat (Set-Cookie). */
  rawHeaders: [string, string][];
  body: string;
  /** Milliseconds from the first byte sent to the end of the head. */
  ms: number;
}

export interface RawOptions {
  port: number;
  host?: string;
  localAddress?: string;
  /** Send this much more after the head (the head's Content-Length may promise more). */
  body?: string;
  timeoutMs?: number;
}

export function rawRequest(head: string, o: RawOptions): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const s = connect({ port: o.port, host: o.host ?? "127.0.0.1", ...(o.localAddress ? { localAddress: o.localAddress } : {}) });
    let buf = Buffer.alloc(0);
    let headEnd = -1;
    let headAt = 0;
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no answer within ${o.timeoutMs ?? 10_000} ms`));
    }, o.timeoutMs ?? 10_000);
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const text = buf.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return reject(new Error(`no HTTP head in: ${JSON.stringify(text.slice(0, 200))}`));
      const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
      const rawHeaders = lines.map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()] as [string, string]);
      const headers = Object.fromEntries(rawHeaders);
      let body = buf.subarray(Buffer.byteLength(text.slice(0, end + 4), "latin1")).toString("utf8");
      const length = headers["content-length"];
      if (length !== undefined) body = body.slice(0, Number(length));
      resolve({ status: Number(statusLine!.split(" ")[1]), headers, rawHeaders, body, ms: headAt - started });
    };
    s.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (headEnd < 0) {
        headEnd = buf.indexOf("\r\n\r\n");
        if (headEnd >= 0) headAt = Date.now();
      }
      if (headEnd >= 0) {
        const text = buf.toString("latin1");
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, headEnd + 2));
        const have = buf.length - (headEnd + 4);
        // An upgrade refusal or a Connection: close answer ends with the socket; a sized body ends at its length; a 101 at its head.
        if ((m && have >= Number(m[1])) || text.startsWith("HTTP/1.1 101")) {
          s.destroy();
          finish();
        }
      }
    });
    s.on("end", finish);
    s.on("close", () => headEnd >= 0 && finish());
    s.on("error", (e) => {
      if (headEnd >= 0) return finish();
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(e);
    });
    s.write(head);
    if (o.body) s.write(o.body);
  });
}

/** A request head: method, target, and headers given as [name, value] pairs (repeats allowed), ending the head. */
export function head(method: string, target: string, headers: [string, string][], version = "HTTP/1.1"): string {
  return `${method} ${target} ${version}\r\n${headers.map(([k, v]) => `${k}: ${v}`).join("\r\n")}${headers.length ? "\r\n" : ""}\r\n`;
}
