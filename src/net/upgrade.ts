import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { connectionTokens, headerValues, type HeaderList, type RequestHead, responseHead } from "./http1.js";
import type { SocketReader } from "./reader.js";

/**
 * WebSocket upgrades through the gate. A GET that asks to switch to the
 * websocket protocol, to a destination granted for every method (a WebSocket
 * carries writes, so read: never opens one), is sent with its Upgrade; the
 * server's 101 goes back to the client and from then the bytes are carried
 * both ways and counted against the connection's budget. The frames are not
 * inspected: a granted WebSocket is as open as a granted tunnel. No other
 * protocol is switched to (h2c among them): its Upgrade is dropped.
 */
export function isUpgrade(head: RequestHead): boolean {
  return (
    head.method === "GET" &&
    head.version === "1.1" &&
    connectionTokens(head.headers).has("upgrade") &&
    headerValues(head.headers, "upgrade").map((v) => v.trim().toLowerCase()).join(",") === "websocket"
  );
}

export interface Carried {
  up: number;
  down: number;
  outcome: string;
}

/** Writes the 101 to the client, then carries bytes both ways until both ends are done, one fails, or nothing moves for idleMs. */
export async function carryUpgrade(
  client: Socket,
  reader: SocketReader,
  switched: { res: IncomingMessage; socket: Socket; head: Buffer },
  take: (n: number) => void,
  idleMs: number,
): Promise<Carried> {
  const { res, socket: up, head } = switched;
  const fields: HeaderList = [];
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) fields.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
  const moved = { up: 0, down: 0 };
  let outcome = "completed (websocket)";
  client.write(responseHead(101, "Switching Protocols", fields));
  if (head.length) {
    take(head.length);
    moved.down += head.length;
    client.write(head);
  }
  let idle: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => {
    let ends = 0;
    const finish = (why?: string) => {
      if (why && outcome === "completed (websocket)") outcome = why;
      clearTimeout(idle);
      up.destroy();
      client.destroy();
      resolve();
    };
    const ended = () => {
      ends += 1;
      if (ends === 2) finish();
    };
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => finish(`stopped: no data either way for ${idleMs} ms`), idleMs);
    };
    touch();
    up.on("data", (d: Buffer) => {
      try {
        take(d.length);
      } catch (e) {
        return finish(`stopped: ${(e as Error).message}`);
      }
      moved.down += d.length;
      touch();
      if (!client.write(d)) {
        up.pause();
        client.once("drain", () => up.resume());
      }
    });
    up.once("end", () => {
      client.end();
      ended();
    });
    up.once("error", (e) => finish(`the upstream failed: ${e.message}`));
    up.once("close", () => finish());
    client.once("close", () => finish());
    void (async () => {
      try {
        for (;;) {
          const b = await reader.read();
          if (!b) break;
          moved.up += b.length;
          touch();
          if (!up.write(b)) await new Promise<void>((r) => (up.once("drain", r), up.once("close", r)));
        }
        up.end();
        ended();
      } catch (e) {
        finish(e instanceof Error && e.name === "LimitError" ? `stopped: ${e.message}` : undefined);
      }
    })();
  });
  await done;
  return { ...moved, outcome };
}
