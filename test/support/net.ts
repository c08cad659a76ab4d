import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type Socket } from "node:net";

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
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as { port: number }).port,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
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
    return connect({ host: address, port });
  };
  return { calls, fn };
}

/** Sends raw bytes to the gate's socket (with a preamble unless given null) and returns everything it answers. */
export function rawGate(socketPath: string, token: string | null, payload: string | Buffer, opts: { waitMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(socketPath);
    let out = "";
    const timer = setTimeout(() => s.destroy(), opts.waitMs ?? 3000);
    s.on("connect", () => {
      if (token !== null) s.write(`VAK-TOKEN ${token}\r\n`);
      s.write(payload);
    });
    s.on("data", (d: Buffer) => (out += d.toString("latin1")));
    s.on("close", () => {
      clearTimeout(timer);
      resolve(out);
    });
    s.on("error", (e) => {
      clearTimeout(timer);
      if (out) resolve(out);
      else reject(e);
    });
  });
}

export const statusOf = (response: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0);
