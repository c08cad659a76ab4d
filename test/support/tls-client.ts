import type { Socket } from "node:net";
import { connect as tlsConnect, type TLSSocket } from "node:tls";
import { gateClient } from "./net.js";

/** Sends a CONNECT through the gate as a relay's client and returns the socket with the proxy's answer read off it. */
export async function connectThrough(socketPath: string, token: string, target: string): Promise<{ socket: Socket; answer: string }> {
  const s = await gateClient(socketPath, token, { allowHalfOpen: false });
  s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  const answer = await new Promise<string>((resolve, reject) => {
    let got = "";
    const onData = (d: Buffer) => {
      got += d.toString("latin1");
      const end = got.indexOf("\r\n\r\n");
      if (end >= 0) {
        s.off("data", onData);
        const rest = Buffer.from(got.slice(end + 4), "latin1");
        if (rest.length) s.unshift(rest);
        s.pause();
        resolve(got.slice(0, end + 4));
      }
    };
    s.on("data", onData);
    s.once("close", () => resolve(got));
    s.once("error", reject);
  });
  return { socket: s, answer };
}

/** CONNECT, then a TLS handshake inside trusting only ca (the run's CA): the TLS socket, or the handshake's error. */
export async function tlsThrough(
  socketPath: string,
  token: string,
  target: string,
  opts: { ca: string; servername?: string; alpn?: string[] },
): Promise<{ tls?: TLSSocket; error?: Error; answer: string }> {
  const { socket, answer } = await connectThrough(socketPath, token, target);
  if (!answer.startsWith("HTTP/1.1 200")) return { answer, error: new Error(answer.split("\r\n")[0]) };
  const host = target.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  return new Promise((resolve) => {
    const t = tlsConnect({ socket, ca: opts.ca, servername: opts.servername ?? (/^[0-9.]+$|:/.test(host) ? undefined : host), host, ALPNProtocols: opts.alpn ?? ["http/1.1"] });
    t.once("secureConnect", () => resolve({ tls: t, answer }));
    t.once("error", (error) => resolve({ error, answer }));
  });
}

/** Writes raw request bytes on a socket and reads until it closes. */
export function exchange(s: Socket, request: string, ms = 5000): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    const timer = setTimeout(() => s.destroy(), ms);
    s.on("data", (d: Buffer) => (out += d.toString("latin1")));
    s.once("close", () => (clearTimeout(timer), resolve(out)));
    s.on("error", () => {});
    s.resume();
    s.write(request);
  });
}
