import type { Socket } from "node:net";

/**
 * A proxy the host itself must go through (`[egress] upstream_proxy`): every
 * upstream connection the gate opens, tunnelled or not, is a CONNECT to that
 * proxy for the address the gate checked (an IP literal: the proxy connects
 * to what was decided, never re-resolves a name), and is used only after the
 * proxy answers 200. TLS, where there is any, still runs end to end from the
 * gate (or the client, for a spliced tunnel) to the server, verified as
 * always: the proxy sees only an opaque tunnel.
 */
export interface UpstreamProxy {
  host: string;
  port: number;
}

export class UpstreamProxyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamProxyError";
  }
}

/** Parses `http://host:port`, as [egress] upstream_proxy holds it. */
export function parseUpstreamProxy(url: string): UpstreamProxy {
  const m = /^http:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})\/?$/.exec(url);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new UpstreamProxyError(`[egress] upstream_proxy ${url}: write it as http://host:port`);
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port: Number(m[2]) };
}

const MAX_HEAD = 16 * 1024;

/** Asks the proxy for a tunnel to target (address:port) on a connected socket; resolves once it is open. */
export function throughProxy(s: Socket, target: string, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => fail(`the upstream proxy did not answer within ${ms} ms`), ms);
    const fail = (why: string) => {
      cleanup();
      s.destroy();
      reject(new UpstreamProxyError(why));
    };
    const cleanup = () => {
      clearTimeout(timer);
      s.off("data", onData);
      s.off("close", onClose);
    };
    const onClose = () => fail("the upstream proxy closed the connection");
    const onData = (d: Buffer) => {
      head = Buffer.concat([head, d]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return head.length > MAX_HEAD ? fail("the upstream proxy's answer is too long") : undefined;
      cleanup();
      s.pause();
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString("latin1"));
      if (!status || status[1] !== "200") {
        s.destroy();
        const line = head.subarray(0, Math.min(end, 200)).toString("latin1").split("\r\n")[0]!.replace(/[^\x20-\x7e]/g, "?");
        return reject(new UpstreamProxyError(`the upstream proxy refused the tunnel: ${line}`));
      }
      const rest = head.subarray(end + 4);
      if (rest.length) s.unshift(rest);
      resolve();
    };
    s.on("data", onData);
    s.once("close", onClose);
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}
