import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer as createNetServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GateEngine, sendClient, socketFd } from "../../src/net/engine.js";
import { EgressGate, type EgressEvent } from "../../src/net/egress-gate.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import { ROOT } from "../support/paths.js";
import { collect, gateClient, listenLoopback, loopbackPair, testGate, until } from "../support/net.js";
import { spawnVak } from "../support/vak.js";

// Attacks on the egress gate's native engine (native/engine.c) and on the
// hand-off between it and the gate: hostile relay messages, floods, tunnels in
// odd states, cancellation and close. Everything stays on loopback. A C helper
// (compiled here) plays a hostile relay and a client that sends TCP urgent
// data, which Node cannot.


let work: string;
let helperBin: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "vak-engine-attacks-"));
  helperBin = join(work, "helper");
  execFileSync("cc", ["-O2", "-Wall", "-Werror", "-o", helperBin, join(ROOT, "test/support/engine-helper.c")]);
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fdCount = () => readdirSync("/proc/self/fd").length;

/** CPU this process (the JS thread and the engine's thread) uses over ms. */
async function cpuOver(ms: number): Promise<number> {
  const start = process.cpuUsage();
  await sleep(ms);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

/** The helper, with its stdout lines; stdin stays open until end(). */
function helper(args: string[]): { proc: ChildProcess; lines: string[]; line(re: RegExp, ms?: number): Promise<string>; end(): Promise<void> } {
  const proc = spawn(helperBin, args, { stdio: ["pipe", "pipe", "inherit"] });
  const lines: string[] = [];
  let partial = "";
  proc.stdout!.on("data", (d: Buffer) => {
    const parts = (partial + d.toString()).split("\n");
    partial = parts.pop()!;
    lines.push(...parts);
  });
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  return {
    proc,
    lines,
    line: async (re, ms = 20_000) => {
      await until(() => lines.some((l) => re.test(l)), `the helper prints ${re}`, ms);
      return lines.find((l) => re.test(l))!;
    },
    end: async () => {
      proc.stdin!.end();
      await exited;
    },
  };
}

/** A CONNECT tunnel through the gate; resolves once the 200 has arrived. */
async function openTunnel(socketPath: string, token: string, port: number): Promise<{ s: Socket; got: () => Buffer }> {
  const s = await gateClient(socketPath, token);
  const chunks: Buffer[] = [];
  s.on("data", (d: Buffer) => chunks.push(d));
  s.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`);
  const got = () => Buffer.concat(chunks);
  await until(() => got().includes("\r\n\r\n"), "the tunnel opens");
  expect(got().toString("latin1")).toMatch(/^HTTP\/1\.1 200 /);
  return { s, got };
}

/** The gate still answers a new client (a 403 for a destination nothing grants). */
async function expectStillServes(t: { gate: EgressGate; token: string }): Promise<void> {
  const s = await gateClient(t.gate.socketPath, t.token);
  const c = collect(s);
  s.end("GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n");
  await c.closed;
  expect(c.text()).toMatch(/^HTTP\/1\.1 403 /);
}

const ended = (events: EgressEvent[]) => events.filter((e) => e.method === "CONNECT" && e.outcome !== undefined);

describe("clients from relays: hostile messages, floods, limits", () => {
  it("odd fds, extra fds, NUL bytes, huge and empty messages are refused, and no fd stays behind", async () => {
    const t = await testGate([]);
    try {
      const before = fdCount();
      const h = helper(["odd", t.gate.socketPath, t.token]);
      await h.line(/^done$/);
      // Every message was sent whole (the numbers are sendmsg's).
      for (const l of h.lines.filter((x) => x !== "done")) expect(Number(l.split(" ")[1]), l).toBeGreaterThanOrEqual(0);
      const refusals = () => t.events.filter((e) => e.code === "relay-message").map((e) => e.reason);
      await until(() => refusals().length >= 16, "every bad message is refused");
      const reasons = refusals().join("\n");
      expect(reasons).toMatch(/without exactly one fd/);
      expect(reasons).toMatch(/not a socket/);
      expect(reasons).toMatch(/not an inet socket/);
      expect(reasons).toMatch(/not a stream socket/);
      expect(reasons).toMatch(/listening socket/);
      expect(reasons).toMatch(/not connected/);
      expect(reasons).toMatch(/NUL byte/);
      expect(reasons).toMatch(/too long/);
      // An empty message with a real client is a client without a token.
      await until(() => t.events.some((e) => e.code === "token"), "the empty message's client is refused for its token");
      await h.end();
      await until(() => fdCount() <= before, `the gate holds no fd of theirs (${fdCount()} > ${before})`);
      // The relay that sent an empty message was dropped, the gate still takes clients.
      await expectStillServes(t);
    } finally {
      await t.close();
    }
  });

  it("a thousand silent relay connections neither stop clients nor spin the engine", async () => {
    const t = await testGate([]);
    const h = helper(["holdmany", t.gate.socketPath, "1000"]);
    try {
      await h.line(/^connected 1000$/);
      await sleep(300);
      expect(await cpuOver(1000)).toBeLessThan(300);
      await expectStillServes(t);
    } finally {
      await h.end();
      await t.close();
    }
  });

  describe("a flood of clients while the event loop is busy", () => {
    const N = 3000;
    const LIMIT = 16;

    async function flood() {
      const t = await testGate([], { limits: { connectionsPerWorker: LIMIT, headerMs: 1000, idleMs: 2000 } });
      const h = helper(["flood", t.gate.socketPath, t.token, String(N)]);
      await h.line(/^ready$/, 60_000);
      await sleep(100);
      const before = fdCount();
      h.proc.stdin!.write("g");
      // The event loop is busy for a second and a half (a long synchronous task): the engine's thread is not.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
      const during = fdCount() - before;
      return { t, h, during };
    }

    it("the per-worker connection limit holds when the clients are served", async () => {
      const { t, h } = await flood();
      try {
        await h.line(/^sent /, 60_000);
        const worker = [...(t.gate as unknown as { workers: Map<string, { open: Set<unknown> }> }).workers.values()][0]!;
        const sockets = (t.gate as unknown as { sockets: Set<unknown> }).sockets;
        let most = 0;
        for (let i = 0; i < 5000 && (i < 100 || sockets.size > 0); i++) {
          most = Math.max(most, worker.open.size);
          await new Promise((r) => setTimeout(r, 1));
        }
        expect(most).toBeLessThanOrEqual(LIMIT);
        await t.gate.close();
        // The log folds refusals past the first few into summaries that carry their count.
        const refused = t.events.filter((e) => e.code === "connection-limit").reduce((n, e) => n + (e.count ?? 1), 0);
        // Past the limit a client is refused, on the record. A loaded machine hands the flood over slower than the
        // served clients' head deadline (1 s), so more than LIMIT may be served in turn as those close (never more
        // than LIMIT at once, above): at a load of 12 on 2 cores, 32 of 3000 were.
        expect(refused).toBeGreaterThanOrEqual(N / 2);
      } finally {
        await h.end();
        await t.close();
      }
    });

    // The relay's hand-over blocks when the gate is slow to take clients, so that a
    // sandbox cannot grow vak's fd table faster than the gate serves: the engine
    // must stop reading relays while JavaScript has clients it has not taken.
    it("the engine stops taking clients' fds while JavaScript is not serving them", async () => {
      const { t, h, during } = await flood();
      try {
        expect(during, `fds queued in the vak process while its loop was busy`).toBeLessThan(256);
      } finally {
        await h.end();
        await t.close();
      }
    });
  });

  // A refused client gets a moment to read its answer, on a deadline: an idle
  // timeout would let one that keeps sending a byte hold an fd in vak forever.
  it("clients refused at the connection limit are closed within headerMs, even if they keep sending", async () => {
    const server = createNetServer({ allowHalfOpen: true }, (c) => (c.on("error", () => {}), c.on("end", () => c.end())));
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`], { limits: { connectionsPerWorker: 1, headerMs: 300 } });
    const refused: Socket[] = [];
    let timer: NodeJS.Timeout | undefined;
    try {
      const holder = await openTunnel(t.gate.socketPath, t.token, port); // the worker's one connection
      holder.s.write("hold"); // spliced once its client speaks (a silent tunnel is held by the gate until one side does)
      // Each refused client sends a byte every 100 ms.
      timer = setInterval(() => {
        for (const s of refused) if (s.writable) s.write(".");
      }, 100);
      for (let i = 0; i < 20; i++) {
        const s = await gateClient(t.gate.socketPath, t.token);
        s.on("error", () => {});
        s.resume();
        refused.push(s);
      }
      await until(() => t.events.filter((e) => e.code === "connection-limit").length === 20, "the 20 are refused");
      await sleep(2000); // more than six times headerMs
      // A refused client gets its answer and a moment to read it; then the gate lets go, whatever it sends.
      const held = (t.gate as unknown as { sockets: Set<unknown> }).sockets.size;
      expect(held, "refused clients the gate still holds open after 6 x headerMs").toBe(0);
      holder.s.destroy();
    } finally {
      clearInterval(timer);
      for (const s of refused) s.destroy();
      await t.close();
      server.close();
    }
  });

  // Out of fds, accept4() fails and the relay's connection stays in the backlog:
  // polling the listening socket again at once would spin the engine's thread.
  it("the engine does not spin when the process has no fd left for a relay", async () => {
    const dir = mkdtempSync(join(work, "emfile-"));
    const sock = join(dir, "gate.sock");
    const script = `
      const { openSync } = require("node:fs");
      const addon = require(${JSON.stringify(join(ROOT, "build/Release/vak-engine.node"))});
      addon.createEngine(${JSON.stringify(sock)}, () => {});
      const held = [];
      try { for (;;) held.push(openSync("/dev/null", "r")); } catch {}
      process.stdout.write("full " + held.length + "\\n");
      setInterval(() => {}, 1000);
    `;
    const child = spawn("prlimit", ["--nofile=256", process.execPath, "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    let h: ReturnType<typeof helper> | undefined;
    try {
      await until(() => out.includes("full"), "the child runs out of fds");
      h = helper(["hold", sock]);
      await h.line(/^connected/);
      await sleep(300);
      const ticks = () => {
        const f = readFileSync(`/proc/${child.pid}/stat`, "utf8").split(") ")[1]!.split(" ");
        return Number(f[11]) + Number(f[12]); // utime + stime, in clock ticks
      };
      const hz = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim());
      const t0 = ticks();
      await sleep(1000);
      const ms = ((ticks() - t0) * 1000) / hz;
      expect(ms, "CPU the out-of-fds process burns in a second").toBeLessThan(300);
    } finally {
      child.kill("SIGKILL");
      await h?.end();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the hand-off and the tunnels", () => {
  // The thread may end and free a tunnel as soon as it is handed over, so its id
  // must be taken under the lock: a wrong id would leave the tunnel's end
  // unmatched, its record missing and its worker's slots never given back. It
  // shows on one CPU, where waking the thread lets it run at once; tunnels that
  // end at once (idle 0) make it likely.
  it("the id tunnel() returns is the tunnel's, however the two threads interleave", async () => {
    const cpus = /Cpus_allowed_list:\s*([0-9]+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]!;
    const script = `
      const net = require("node:net");
      const addon = require(${JSON.stringify(join(ROOT, "build/Release/vak-engine.node"))});
      const sock = ${JSON.stringify(join(work, "ids.sock"))};
      const endedIds = new Set();
      const eng = addon.createEngine(sock, (e) => e.kind === "end" && endedIds.add(e.id));
      async function pair() {
        const srv = net.createServer({ pauseOnConnect: true });
        await new Promise((r) => srv.listen(0, "127.0.0.1", r));
        const acc = new Promise((r) => srv.once("connection", r));
        const c = net.connect({ port: srv.address().port, host: "127.0.0.1" });
        await new Promise((r) => c.once("connect", r));
        const a = await acc;
        srv.close();
        return [c, a];
      }
      (async () => {
        const [, a] = await pair();
        const [b] = await pair();
        const ids = [];
        const empty = Buffer.alloc(0);
        // 200 at a time: each holds two fds until the thread ends it, and the fd limit is not what is tested.
        for (let round = 0; round < 150; round++) {
          for (let i = 0; i < 200; i++) ids.push(addon.tunnel(eng, a._handle.fd, b._handle.fd, empty, empty, 1e12, 0));
          await new Promise((r) => setTimeout(r, 5));
        }
        await new Promise((r) => setTimeout(r, 1000));
        const wrong = ids.filter((id, i) => id !== i + 1);
        const unmatched = ids.filter((id) => !endedIds.has(id));
        process.stdout.write(JSON.stringify({ calls: ids.length, wrong: wrong.length, sample: wrong.slice(0, 3), unmatched: unmatched.length }));
        addon.close(eng);
        process.exit(0);
      })();
    `;
    const out = execFileSync("taskset", ["-c", cpus, process.execPath, "-e", script], { timeout: 60_000 }).toString();
    const r = JSON.parse(out) as { calls: number; wrong: number; sample: number[]; unmatched: number };
    expect(r.calls).toBe(30_000);
    expect(r, "ids that are not the tunnel's").toMatchObject({ wrong: 0, unmatched: 0 });
  });

  // A pipe's capacity is in slots (pages), and a splice of a few bytes takes a
  // whole slot: a stalled destination can leave the pipe "full" with most of its
  // bytes free. Polling the source then (readable, but splice says EAGAIN) would
  // spin the thread. The stall here is a large prefix the upstream does not read.
  it("a stalled destination behind a pipe of small pieces does not spin the engine", async () => {
    const dir = mkdtempSync(join(work, "slots-"));
    const engine = new GateEngine(join(dir, "e.sock"), { onClient: () => {}, onRefused: () => {} });
    const client = await loopbackPair();
    const up = await loopbackPair(); // up.accepted is the upstream server's end: paused, never read
    try {
      const t = engine.tunnel(client.accepted, up.client, Buffer.alloc(32 << 20, 1), Buffer.alloc(0), 1e12, 30_000);
      client.accepted.destroy();
      up.client.destroy();
      await sleep(300);
      expect(await cpuOver(500)).toBeLessThan(150); // stalled on the prefix: quiet
      client.client.setNoDelay(true);
      for (let i = 0; i < 400; i++) {
        client.client.write("x");
        await sleep(2);
      }
      await sleep(200);
      expect(await cpuOver(1000), "CPU over a second, nothing moving").toBeLessThan(300);
      engine.cancel(t.id);
      expect((await t.done).outcome).toBe("cancelled");
    } finally {
      await engine.close();
      client.client.destroy();
      up.accepted.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // The same spin in the gate, with no prefix: a server streams small writes (2 KB
  // each, a millisecond apart, as an interactive or event-stream protocol might)
  // to a client that stops reading. Once the client's buffers are full, each
  // small write is spliced into a slot of its own, and the pipe runs out of slots
  // with most of its bytes free.
  it("a client that stops reading a stream of small writes does not spin the engine", async () => {
    let streaming: Promise<void> | undefined;
    const server = createNetServer({ allowHalfOpen: true }, (c) => {
      c.on("error", () => {});
      c.setNoDelay(true);
      c.once("data", () => {
        streaming = (async () => {
          const piece = Buffer.alloc(2000, 0x7a);
          // Small writes, a millisecond apart, until the kernel stops taking them for a while.
          for (let sent = 0; sent < 64 << 20 && !c.destroyed; sent += piece.length) {
            if (!c.write(piece)) {
              const drained = await Promise.race([new Promise((r) => c.once("drain", () => r(true))), sleep(300).then(() => false)]);
              if (!drained) return;
            }
            await sleep(1);
          }
        })();
      });
    });
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`]);
    try {
      const { s } = await openTunnel(t.gate.socketPath, t.token, port);
      s.pause();
      s.write("go");
      await until(() => streaming !== undefined, "the stream starts");
      await streaming;
      await sleep(200);
      expect(await cpuOver(1000), "CPU over a second, nothing moving").toBeLessThan(300);
      s.destroy();
    } finally {
      await t.close();
      server.close();
    }
  });

  // splice() from a TCP socket returns 0 at urgent (MSG_OOB) data with more
  // queued behind it, as it does at the end of the stream. Taking that for the end
  // would lose everything after the urgent byte and end the upstream's stream
  // cleanly; either side could do it to the other.
  it("urgent data in a tunnel is never passed off as the end of the stream", async () => {
    // Splicing stops at TCP urgent data and says 0, as at an end. The engine does not carry
    // urgent data; what it must not do is end the upstream's stream cleanly after "abc".
    const received: Buffer[] = [];
    let cleanEnd = false;
    const server = createNetServer({ allowHalfOpen: true }, (c) => {
      c.on("data", (d: Buffer) => received.push(d));
      c.on("end", () => ((cleanEnd = true), c.end("bye")));
      c.on("error", () => {});
    });
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`]);
    // The helper is the sandboxed client; this listener is the relay.
    const relay = createNetServer({ pauseOnConnect: true }, (s) => {
      sendClient(t.gate.socketPath, `VAK-TOKEN ${t.token}`, socketFd(s));
      s.destroy();
    });
    const relayPort = await listenLoopback(relay);
    try {
      // Not execFileSync: the gate runs on this thread.
      const h = spawn(helperBin, ["oob", String(relayPort), String(port)], { stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      h.stdout!.on("data", (d: Buffer) => (out += d.toString("latin1")));
      await new Promise((r) => h.once("exit", r));
      await until(() => t.events.some((e) => e.outcome !== undefined), "the tunnel's end is on the record");
      expect(t.events.find((e) => e.outcome !== undefined)!.outcome).toMatch(/urgent \(out-of-band\) data/);
      const all = Buffer.concat(received).toString("latin1");
      // Either everything arrived, or the stream was cut with a reset: never a clean end after a part.
      if (all.replace("!", "") !== "abcdef") {
        expect(cleanEnd).toBe(false);
        expect(out).not.toBe("bye");
      }
    } finally {
      relay.close();
      await t.close();
      server.close();
    }
  });


  // A side that has hung up is left out of poll() while the tunnel has nothing
  // for it; an error on it must still end the tunnel, or a client that half-closes
  // and then resets would hold its upstream and its worker's slot until idleMs.
  it("a client that resets after half-closing ends its tunnel", async () => {
    const server = createNetServer({ allowHalfOpen: true }, (c) => c.on("error", () => {})); // takes the FIN, answers nothing
    const port = await listenLoopback(server);
    const t = await testGate([`127.0.0.1:${port}`], { limits: { idleMs: 30_000 } });
    try {
      const { s } = await openTunnel(t.gate.socketPath, t.token, port);
      s.on("error", () => {});
      s.end();
      await sleep(200);
      s.resetAndDestroy();
      await until(() => ended(t.events).length > 0, "the tunnel's end is recorded", 5000);
    } finally {
      await t.close();
      server.close();
    }
  });

  describe("the byte budget", () => {
    it("bytes sent with the CONNECT head count: an upload in one write is cut at the budget", async () => {
      const BUDGET = 100 * 1024;
      const received: Buffer[] = [];
      const server = createNetServer({ allowHalfOpen: true }, (c) => {
        c.on("data", (d: Buffer) => received.push(d));
        c.on("error", () => {});
      });
      const port = await listenLoopback(server);
      const t = await testGate([`127.0.0.1:${port}`], { limits: { bytesPerConnection: BUDGET } });
      try {
        const s = await gateClient(t.gate.socketPath, t.token, { allowHalfOpen: false });
        s.on("error", () => {});
        const closed = new Promise((r) => s.once("close", r));
        s.write(Buffer.concat([Buffer.from(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`), randomBytes(4 << 20)]));
        await closed;
        await sleep(300);
        expect(Buffer.concat(received).length).toBeLessThanOrEqual(BUDGET);
      } finally {
        await t.close();
        server.close();
      }
    });

    it("counts both ways: an echo cannot double what the budget lets through", async () => {
      const BUDGET = 1 << 20;
      let upstreamGot = 0;
      const server = createNetServer({ allowHalfOpen: true }, (c) => {
        c.on("data", (d: Buffer) => ((upstreamGot += d.length), c.write(d)));
        c.on("error", () => {});
      });
      const port = await listenLoopback(server);
      const t = await testGate([`127.0.0.1:${port}`], { limits: { bytesPerConnection: BUDGET } });
      try {
        const { s, got } = await openTunnel(t.gate.socketPath, t.token, port);
        s.on("error", () => {});
        const closed = new Promise((r) => s.once("close", r));
        const block = randomBytes(64 * 1024);
        for (let i = 0; i < 32 && !s.destroyed; i++) {
          s.write(block);
          await sleep(5);
        }
        await closed;
        const head = got().indexOf("\r\n\r\n") + 4;
        const down = got().length - head;
        // The CONNECT head was counted too; what went each way together fits in the budget.
        expect(upstreamGot + down).toBeLessThanOrEqual(BUDGET);
        await until(() => ended(t.events).length > 0, "the cut is recorded");
        expect(ended(t.events)[0]!.outcome).toMatch(/limit of 1048576 bytes/);
      } finally {
        await t.close();
        server.close();
      }
    });
  });

  describe("tunnels in odd states", () => {
    it("half-closed either way, reset, and stalled both ways with full pipes: no spinning, and close leaves no fd", async () => {
      const servers: Socket[] = [];
      const server = createNetServer({ allowHalfOpen: true }, (c) => {
        servers.push(c);
        c.on("error", () => {});
        c.once("data", (d: Buffer) => {
          const cmd = d.toString("latin1");
          if (cmd.startsWith("END")) c.end(); // the upstream half-closes, the client stays
          if (cmd.startsWith("FLOOD")) {
            c.pause(); // stalls the upload, and floods a client that does not read
            const block = Buffer.alloc(1 << 20, 0x61);
            const more = () => {
              while (!c.destroyed && c.write(block)) {
                // until the kernel pushes back
              }
            };
            c.on("drain", more);
            more();
          }
          if (cmd.startsWith("STREAM")) {
            const timer = setInterval(() => c.destroyed ? clearInterval(timer) : c.write(Buffer.alloc(64 * 1024, 0x62)), 5);
          }
        });
      });
      const port = await listenLoopback(server);
      const t = await testGate([`127.0.0.1:${port}`]);
      const baseline = fdCount();
      try {
        // 1: the client half-closes, the upstream stays silent.
        const a = await openTunnel(t.gate.socketPath, t.token, port);
        a.s.end("QUIET");
        // 2: the upstream half-closes, the client stays silent.
        const b = await openTunnel(t.gate.socketPath, t.token, port);
        b.s.write("END");
        // 3: both stall: the upstream floods a client that does not read, and reads nothing of the client's upload.
        const c = await openTunnel(t.gate.socketPath, t.token, port);
        c.s.write("FLOOD");
        await sleep(100);
        c.s.pause();
        c.s.write(Buffer.alloc(32 << 20, 0x63));
        // 4: the upstream streams to a client that resets.
        const d = await openTunnel(t.gate.socketPath, t.token, port);
        d.s.on("error", () => {});
        d.s.write("STREAM");
        await sleep(100);
        d.s.resetAndDestroy();
        await sleep(500);
        expect(await cpuOver(1000), "CPU over a second with the tunnels in these states").toBeLessThan(300);
        // The reset one has ended; the others are open.
        await until(() => ended(t.events).length >= 1, "the reset tunnel ends");
        expect(ended(t.events)).toHaveLength(1);
        expect(ended(t.events)[0]!.outcome).toMatch(/the tunnel failed/);
        await t.gate.close();
        await until(() => ended(t.events).length === 4, "every tunnel's end is recorded");
        expect(ended(t.events).slice(1).map((e) => e.outcome)).toEqual(Array(3).fill("stopped: the gate closed"));
        for (const x of [a, b, c]) x.s.destroy();
        for (const x of servers) x.destroy();
        await until(() => fdCount() <= baseline, `no fd stays behind (${fdCount()} > ${baseline})`);
      } finally {
        await t.close();
        server.close();
      }
    });

    it("revoking a worker (unregister, setGeneration) ends every tunnel it holds, and leaves no fd", async () => {
      const server = createNetServer({ allowHalfOpen: true }, (c) => {
        c.on("error", () => {});
        c.on("data", (d: Buffer) => c.write(d));
        c.on("end", () => c.end());
      });
      const port = await listenLoopback(server);
      const t = await testGate([`127.0.0.1:${port}`]);
      try {
        const baseline = fdCount();
        const tunnels: Awaited<ReturnType<typeof openTunnel>>[] = [];
        for (let i = 0; i < 10; i++) tunnels.push(await openTunnel(t.gate.socketPath, t.token, port));
        for (const x of tunnels) x.s.write("ping");
        await until(() => tunnels.every((x) => x.got().toString().endsWith("ping")), "the tunnels carry bytes");
        // A revoked tunnel is reset, not ended: its peers must not take it for a complete stream.
        const closed = tunnels.map((x) => new Promise((r) => x.s.once("close", r)));
        t.gate.unregister(t.token);
        await Promise.all(closed);
        for (const x of tunnels) x.s.destroy();
        await until(() => ended(t.events).length === 10, "every tunnel's end is recorded");
        expect(new Set(ended(t.events).map((e) => e.outcome))).toEqual(new Set(["stopped: the worker's grant was revoked"]));
        await until(() => fdCount() <= baseline, `no fd stays behind (${fdCount()} > ${baseline})`);

        // setGeneration: a newer generation ends an older worker's tunnels too.
        const tok = t.gate.register({ component: "old", generation: 1, grants: parseNetGrants([`127.0.0.1:${port}`]) });
        const more: Awaited<ReturnType<typeof openTunnel>>[] = [];
        for (let i = 0; i < 5; i++) more.push(await openTunnel(t.gate.socketPath, tok, port));
        const closed2 = more.map((x) => new Promise((r) => x.s.once("close", r)));
        t.gate.setGeneration(2);
        await Promise.all(closed2);
        await until(() => ended(t.events).length === 15, "every tunnel's end is recorded");
        for (const x of more) x.s.destroy();
        await until(() => fdCount() <= baseline, `no fd stays behind (${fdCount()} > ${baseline})`);
      } finally {
        await t.close();
        server.close();
      }
    });

    it("an upstream that resets at once leaves no fd", async () => {
      const resetting = createNetServer((c) => c.resetAndDestroy());
      const rport = await listenLoopback(resetting);
      const t = await testGate([`127.0.0.1:${rport}`]);
      try {
        const baseline = fdCount();
        for (let i = 0; i < 20; i++) {
          const s = await gateClient(t.gate.socketPath, t.token, { allowHalfOpen: false });
          s.on("error", () => {});
          const c = collect(s);
          s.write(`CONNECT 127.0.0.1:${rport} HTTP/1.1\r\n\r\n`);
          await c.closed;
          s.destroy();
        }
        await until(() => ended(t.events).length === 20, "every attempt's end is recorded");
        await until(() => fdCount() <= baseline, `no fd stays behind (${fdCount()} > ${baseline})`);
      } finally {
        await t.close();
        resetting.close();
      }
    });

    it("a gate closed while CONNECTs are connecting, and while tunnels are handed over, leaves no fd", async () => {
      const server = createNetServer({ allowHalfOpen: true }, (c) => (c.on("error", () => {}), c.on("end", () => c.end())));
      const port = await listenLoopback(server);
      const dir = mkdtempSync(join(work, "closing-"));
      const events: EgressEvent[] = [];
      const baseline = fdCount();
      let n = 0;
      const gate = new EgressGate({
        dir: join(dir, "s"),
        ownAddresses: new Set(),
        onEvent: (e) => events.push(e),
        // Every other upstream connects at once; the rest only after the gate has begun to close.
        connect: (address, p) => {
          const s = new Socket({ allowHalfOpen: true });
          if (n++ % 2) setTimeout(() => s.destroyed || s.connect({ host: address, port: p }), 200);
          else s.connect({ host: address, port: p });
          return s;
        },
      });
      await gate.listen();
      const token = gate.register({ component: "c", generation: 1, grants: parseNetGrants([`127.0.0.1:${port}`]) });
      try {
        const clients: Socket[] = [];
        for (let i = 0; i < 20; i++) {
          const s = await gateClient(gate.socketPath, token);
          s.on("error", () => {});
          s.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\n\r\n`);
          clients.push(s);
        }
        await sleep(50);
        await gate.close();
        expect(events.filter((e) => e.method === "CONNECT" && e.decision === "allowed" && e.outcome !== undefined)).toHaveLength(20);
        for (const s of clients) s.destroy();
        await sleep(400);
        await until(() => fdCount() <= baseline, `no fd stays behind (${fdCount()} > ${baseline})`);
      } finally {
        await gate.close();
        server.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

// The same bounds, end to end: a command in a real sandbox floods the real
// relay, and the vak process running it is watched from outside.
describe("through the real relay", () => {
  it("a command that opens connections by the hundred cannot grow the vak process's fd table past the gate's caps", async () => {
    const ws = mkdtempSync(join(work, "flood-"));
    const script = `import socket, time
socks = []
for i in range(900):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", 3128))
    except BlockingIOError:
        pass
    socks.append(s)
time.sleep(3)
print("opened", len(socks))`;
    const child = spawnVak(["exec", "--allow-net", "127.0.0.1:9", "--", "python3", "-c", script], { cwd: ws });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
    const fds = () => {
      try {
        return readdirSync(`/proc/${child.pid}/fd`).length;
      } catch {
        return 0; // gone
      }
    };
    let most = 0;
    let done = false;
    void exited.then(() => (done = true));
    while (!done) {
      most = Math.max(most, fds());
      await sleep(20);
    }
    expect(await exited, stderr).toBe(0);
    expect(stdout).toContain("opened 900");
    // 256 connections per worker, 64 refused ones lingering, 64 waiting for JavaScript, and what vak
    // holds anyway (its journal, its pipes, Node's own): far below the 900 the command opened.
    expect(most, "fds the vak process held at most").toBeLessThan(256 + 64 + 64 + 100);
    expect(stderr).toContain("more than 256 connections at once");
  });
});
