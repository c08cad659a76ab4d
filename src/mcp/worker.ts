import type { Readable, Writable } from "node:stream";
import type { LaunchPlan } from "../policy/plan.js";
import { type GateLink, launch, type LaunchResult } from "../sandbox/launcher.js";
import { edgeId, LineReader } from "./framing.js";
import { frame, type Side } from "./messages.js";
import { Relay, type RelayOptions } from "./relay.js";
import type { StderrRelay } from "./stderr.js";

/**
 * The server as a worker for the life of one connection: started in the
 * sandbox from the plan, its stdio joined to the client's through the relay,
 * and stopped as a whole when the client goes. The client closing its end
 * (or its pipe breaking, or a stop signal) ends the server's stdin, gives it
 * GRACE_MS to exit, and then stops the sandbox, which takes every process in
 * it (the pid namespace dies with its init): nothing outlives the connection
 * by more than about GRACE_MS + 200 ms. Reading stops on either side while
 * the other cannot take more, so neither side can make Vak hold more than a
 * few messages.
 */
export interface ConnectionOptions {
  plan: LaunchPlan;
  gate?: GateLink | undefined;
  clientIn: Readable;
  clientOut: Writable;
  maxMessage: number;
  relay: Omit<RelayOptions, "toClient" | "toServer">;
  stderr: StderrRelay;
  graceMs?: number;
}

export type EndReason = "client" | "server" | "signal" | "record";

export interface Connection {
  relay: Relay;
  /** Ends the connection: the server's stdin is closed, then its sandbox stopped. */
  stop(why: EndReason): void;
  ended: Promise<{ result: LaunchResult; why: EndReason }>;
}

const GRACE_MS = 500;
/** Bytes queued for one side past which Vak stops reading both. */
const HIGH_WATER = 1 << 20;

export function connect(o: ConnectionOptions): Connection {
  // A server speaks through its pipes only. In a session of its own it has no controlling terminal, and
  // without /dev/tty it cannot open one: a client run in a terminal (Claude Code) must not lend it the
  // user's keystrokes or a screen to write escapes on.
  const plan = { ...o.plan, mounts: o.plan.mounts.filter((m) => m.path !== "/dev/tty") };
  const sb = launch(plan, ["pipe", "pipe", "pipe"], o.gate, { detached: true });
  const serverIn = sb.stdin as Writable;
  const serverOut = sb.stdout as Readable;
  const serverErr = sb.stderr as Readable;
  let why: EndReason | undefined;
  let paused = false;

  const congested = () => o.clientOut.writableLength > HIGH_WATER || serverIn.writableLength > HIGH_WATER;
  const resume = () => {
    if (!paused || congested()) return;
    paused = false;
    o.clientIn.resume();
    serverOut.resume();
  };
  const write = (to: Writable, m: Record<string, unknown>) => {
    if (to.destroyed || to.writableEnded) return;
    to.write(frame(m));
    if (!paused && congested()) {
      paused = true;
      o.clientIn.pause();
      serverOut.pause();
    }
  };
  o.clientOut.on("drain", resume);
  serverIn.on("drain", resume);

  const relay = new Relay({ ...o.relay, toClient: (m) => write(o.clientOut, m), toServer: (m) => write(serverIn, m) });
  const reader = (from: Side) =>
    new LineReader(o.maxMessage, {
      line: (l) => (from === "client" ? relay.fromClient(l) : relay.fromServer(l)),
      oversized: (n, head, tail) => {
        const e = edgeId(head, tail);
        relay.unreadable(from, `a message of ${n} bytes, over the ${o.maxMessage}-byte limit`, n, e?.id, e?.request);
      },
      undecodable: (n) => relay.unreadable(from, "a message that is not UTF-8", n),
    });
  const fromClient = reader("client");
  const fromServer = reader("server");

  let graceTimer: NodeJS.Timeout | undefined;
  const stop = (reason: EndReason) => {
    if (why) return;
    why = reason;
    relay.close(reason === "client" ? "the client disconnected" : reason === "record" ? "the journal could not be written; the server was stopped" : "vak was stopped");
    serverIn.end();
    if (reason === "record") sb.cancel();
    else graceTimer = setTimeout(() => sb.cancel(), o.graceMs ?? GRACE_MS);
  };

  o.clientIn.on("data", (c: Buffer) => fromClient.push(c));
  o.clientIn.on("end", () => {
    fromClient.finish();
    stop("client");
  });
  o.clientIn.on("error", () => stop("client"));
  o.clientOut.on("error", () => stop("client"));
  serverIn.on("error", () => undefined); // the server has gone; its exit says how
  serverOut.on("data", (c: Buffer) => fromServer.push(c));
  serverErr.on("data", (c: Buffer) => o.stderr.push(c));

  const ended = sb.result.then((result) => {
    if (graceTimer) clearTimeout(graceTimer);
    why ??= "server";
    relay.close(`the server exited (status ${result.code})`);
    o.stderr.finish();
    return { result, why };
  });
  return { relay, stop, ended };
}
