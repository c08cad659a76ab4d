import { createServer as createTlsServer } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GateOptions } from "../../src/net/egress-gate.js";
import { createRunCa } from "../../src/net/tls-ca.js";
import { upstreamTrust } from "../../src/net/tls-trust.js";
import { type LenientRequest, lenientUpstream, listenLoopback, rawGate, readLeniently, testGate } from "../support/net.js";
import { tlsThrough } from "../support/tls-client.js";
import { testCa } from "../support/tls.js";

// What the gate decides on each request, plain (absolute-form) and inside a terminated tunnel: a read: grant lets
// nothing change anything on its host, a path grant lets no request reach its host outside its paths, and the server
// is asked what was checked, not something a header of the request asks for instead. Both upstreams read leniently
// (test/support/net.ts): header names in any case, `_` for `-`, as the servers these attacks aim at do.

describe("the egress gate's decision on each request", () => {
  let plainUp: Awaited<ReturnType<typeof lenientUpstream>>;
  const tlsSeen: LenientRequest[] = [];
  let tlsClose: () => void;
  let P = 0;
  let T = 0;
  let g: Awaited<ReturnType<typeof testGate>>;
  let runPem = "";
  let tlsOpts: GateOptions["tls"];

  beforeAll(async () => {
    plainUp = await lenientUpstream();
    P = plainUp.port;
    const ca = await testCa();
    const run = await createRunCa();
    runPem = run.certPem;
    const { key, cert } = await ca.issue(["api.test", "path.test", "loop.test"]);
    const server = createTlsServer({ key, cert, ALPNProtocols: ["http/1.1"] }, (s) => {
      s.on("error", () => {});
      readLeniently(s, 0, (r) => {
        tlsSeen.push(r);
        const text = `seen ${r.line.split(" ")[1]}`;
        s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`);
      });
    });
    T = await listenLoopback(server as unknown as import("node:net").Server);
    tlsClose = () => server.close();
    tlsOpts = { ca: async () => run, trust: upstreamTrust({ caFiles: [ca.file], env: {} }) };
    // read:api.test and api.test/repos/acme/* on both ports; the loopback literal only makes the address reachable.
    const grants = [P, T].flatMap((p) => [`read:api.test:${p}`, `path.test:${p}/repos/acme/*`, `127.0.0.1:${p}`]);
    g = await testGate(grants, {
      names: { "api.test": ["127.0.0.1"], "path.test": ["127.0.0.1"] },
      tls: tlsOpts,
    });
  }, 60_000);
  afterAll(async () => {
    await g?.close();
    await plainUp?.close();
    tlsClose?.();
  });

  /** One plain request through the gate (g unless another is given): its answer, and the targets the upstream saw for it. */
  const plain = async (host: string, target: string, extra: string, gate = g, body = "", method = "GET") => {
    const before = plainUp.requests.length;
    const answer = await rawGate(gate.gate.socketPath, gate.token, `${method} http://${host}:${P}${target} HTTP/1.1\r\nHost: ${host}:${P}\r\n${extra}Connection: close\r\n\r\n${body}`, { waitMs: 3000 });
    return { answer, seen: plainUp.requests.slice(before).map((r) => r.line.split(" ")[1]) };
  };
  /** One request inside a tunnel the gate terminates. */
  const inside = async (host: string, target: string, extra: string, gate = g, body = "", method = "GET") => {
    const before = tlsSeen.length;
    const t = await tlsThrough(gate.gate.socketPath, gate.token, `${host}:${T}`, { ca: runPem });
    expect(t.error).toBeUndefined();
    const answer = await new Promise<string>((resolve) => {
      let out = "";
      const timer = setTimeout(() => t.tls!.destroy(), 3000);
      t.tls!.on("data", (d: Buffer) => (out += d.toString("latin1")));
      t.tls!.on("error", () => {});
      t.tls!.once("close", () => (clearTimeout(timer), resolve(out)));
      t.tls!.write(`${method} ${target} HTTP/1.1\r\nHost: ${host}:${T}\r\n${extra}Connection: close\r\n\r\n${body}`);
    });
    return { answer, seen: tlsSeen.slice(before).map((r) => r.line.split(" ")[1]) };
  };
  const status = (answer: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);

  it("a GET under read: whose method-override header names a write is refused, plain and inside TLS, in any spelling; one naming a read passes", async () => {
    const writes = [
      "X-HTTP-Method-Override: DELETE",
      "X-HTTP-Method: PUT",
      "X-Method-Override: PATCH",
      "x-http-method-override: delete",
      "X_HTTP_Method_Override: POST",
      "X-HTTP-Method-Override: GET, DELETE",
      "X-HTTP-Method-Override: GET\r\nX-HTTP-Method-Override: DELETE",
      "X-HTTP-Method-Override: ",
    ];
    for (const [i, h] of writes.entries())
      for (const send of [plain, inside]) {
        const r = await send("api.test", `/w${i}`, `${h}\r\n`);
        expect(status(r.answer), `${send === plain ? "plain" : "inside"} ${JSON.stringify(h)}`).toBe(403);
        expect(r.answer).toContain("the grant read:api.test:");
        expect(r.seen).toEqual([]);
      }
    const refused = g.events.filter((e) => e.decision === "denied" && e.code === "read-only" && /\/w0$/.test(e.asked));
    expect(refused).toHaveLength(2);
    expect(refused[0]!.reason).toMatch(/^X-HTTP-Method-Override: DELETE asks the server for DELETE, a write; the grant read:api\.test:\d+ allows only GET, HEAD and OPTIONS \(writes need --allow-net api\.test:\d+\)$/);
    for (const send of [plain, inside]) {
      const r = await send("api.test", "/r", "X-HTTP-Method-Override: HEAD\r\n");
      expect(status(r.answer)).toBe(200);
      expect(r.seen).toEqual(["/r"]);
    }
  });

  it("a GET or HEAD under read: whose query names a write method through _method is refused, plain and inside TLS, in any spelling; one naming a read passes", async () => {
    // Rails, Laravel, Symfony and Express's method-override take the method from a `_method` parameter: on POST
    // by default, on any method in some middleware and configurations. Decided on the query as a server decodes
    // it: percent-encoding (once or more), `+` for a space, any case, `;` as a separator, PHP's `.` for `_`.
    const writes = [
      "?_method=DELETE",
      "?_method=PUT",
      "?_method=patch",
      "?_METHOD=Delete",
      "?a=1&%5Fmethod=DELETE",
      "?%5f%6d%65%74%68%6f%64=POST",
      "?_method=%44ELETE",
      "?_method=%2544ELETE",
      "?_method=+DELETE+",
      "?_method=GET&_method=DELETE",
      "?_method=GET,DELETE",
      "?a=1;_method=PUT",
      "?.method=DELETE",
      "?_method",
      "?_method[]=DELETE",
      "?_method%5B0%5D=PUT",
      "?_method[a][b]=PATCH",
    ];
    for (const [i, q] of writes.entries())
      for (const method of ["GET", "HEAD"])
        for (const send of [plain, inside]) {
          const r = await send("api.test", `/q${i}${q}`, "", g, "", method);
          expect(status(r.answer), `${send === plain ? "plain" : "inside"} ${method} ${q}`).toBe(403);
          if (method === "GET") expect(r.answer).toContain("the grant read:api.test:");
          expect(r.seen).toEqual([]);
        }
    const refused = g.events.filter((e) => e.decision === "denied" && e.code === "read-only" && /\/q0\?/.test(e.asked));
    expect(refused).toHaveLength(4);
    expect(refused[0]!.reason).toMatch(/^the query parameter _method=DELETE asks the server for DELETE, a write; the grant read:api\.test:\d+ allows only GET, HEAD and OPTIONS \(writes need --allow-net api\.test:\d+\)$/);
    // A read named, a name that only looks like it, or _method inside another parameter's value: passed on as sent.
    for (const q of ["?_method=GET", "?_method=head", "?my_method=DELETE", "?_methods=DELETE", "?x=_method%3DDELETE", "?_method[]=GET", "?x[_method]=DELETE"])
      for (const send of [plain, inside]) {
        const r = await send("api.test", `/r${q}`, "");
        expect(status(r.answer), `${send === plain ? "plain" : "inside"} ${q}`).toBe(200);
        expect(r.seen).toEqual([`/r${q}`]);
      }
  });

  it("a path grant refuses a header some servers take the path from instead of the request line (X-Original-URL, X-Rewrite-URL), plain and inside TLS", async () => {
    for (const h of ["X-Original-URL: /repos/other", "X-Rewrite-URL: /repos/other", "x_original_url: /repos/other"])
      for (const send of [plain, inside]) {
        const r = await send("path.test", "/repos/acme/x", `${h}\r\n`);
        expect(status(r.answer), `${send === plain ? "plain" : "inside"} ${h}`).toBe(403);
        expect(r.answer).toContain("path.test:");
        expect(r.seen).toEqual([]);
      }
    expect(g.events.filter((e) => e.code === "path-header")).toHaveLength(6);
    // Under a grant without a path the header decides nothing, and goes on as sent.
    expect(status((await plain("api.test", "/x", "X-Original-URL: /y\r\n")).answer)).toBe(200);
  });

  it("a path segment some server reads as a dot segment (..%3B, .%3B, ..%09, ..%20, ..%3F, overlong UTF-8, a fullwidth dot or slash) is refused under a path grant", async () => {
    const tricks = [
      "/repos/acme/..%3B/other",
      "/repos/acme/..%3bx/other",
      "/repos/acme/.%3B/x",
      "/repos/acme/..%09/other",
      "/repos/acme/..%20/other",
      "/repos/acme/..%3F/other",
      "/repos/acme/..%23/other",
      "/repos/acme/%C0%AE%C0%AE/other",
      "/repos/acme/%E0%80%AE%E0%80%AE/other",
      "/repos/acme/%EF%BC%8E%EF%BC%8E/other",
      "/repos/acme/%E2%80%A5/other",
      "/repos/acme/x%EF%BC%8F..%EF%BC%8F..%EF%BC%8Fother",
    ];
    for (const p of tricks)
      for (const send of [plain, inside]) {
        const r = await send("path.test", p, "");
        expect(status(r.answer), `${send === plain ? "plain" : "inside"} ${p}`).toBe(400);
        expect(r.seen).toEqual([]);
      }
    // Encoded characters that are no such trick still pass: a semicolon, a space, UTF-8 text.
    for (const send of [plain, inside]) {
      const r = await send("path.test", "/repos/acme/a%3Bb/%20x/caf%C3%A9", "");
      expect(status(r.answer)).toBe(200);
      expect(r.seen).toEqual(["/repos/acme/a%3Bb/%20x/caf%C3%A9"]);
    }
  });

  it("a read-only grant of an address lets no GET that writes reach it through a name granted for every method: a body, a WebSocket, a method override (a header or _method), plain and inside TLS", async () => {
    // loop.test resolves to loopback, which only read:127.0.0.1 makes reachable (the path rule makes its tunnel terminated).
    const x = await testGate([`loop.test:${P}`, `read:127.0.0.1:${P}`, `loop.test:${T}/x/*`, `read:127.0.0.1:${T}`], {
      names: { "loop.test": ["127.0.0.1"] },
      tls: tlsOpts,
    });
    try {
      const writes: [string, string][] = [
        ["Content-Length: 5\r\n", "hello"],
        ["Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n"],
        ["X-HTTP-Method-Override: DELETE\r\n", ""],
        ["Connection: Upgrade\r\nUpgrade: websocket\r\n", ""],
      ];
      for (const [extra, body] of writes)
        for (const send of [plain, inside]) {
          const r = await send("loop.test", "/x/w", extra, x, body);
          expect(status(r.answer), `${send === plain ? "plain" : "inside"} ${JSON.stringify(extra)}`).toBe(403);
          expect(r.answer).toContain("127.0.0.1");
          expect(r.seen).toEqual([]);
        }
      for (const send of [plain, inside]) {
        const r = await send("loop.test", "/x/w?_method=DELETE", "", x);
        expect(status(r.answer), `${send === plain ? "plain" : "inside"} ?_method=DELETE`).toBe(403);
        expect(r.seen).toEqual([]);
      }
      const reasons = x.events.filter((e) => e.code === "not-reachable").map((e) => e.reason);
      expect(reasons).toHaveLength(10);
      expect(reasons).toContain(`127.0.0.1 (loopback) is reachable only by a grant for every method naming that exact address: the query parameter _method=DELETE asks the server for DELETE, a write`);
      expect(reasons).toContain(`127.0.0.1 (loopback) is reachable only by a grant for every method naming that exact address: X-HTTP-Method-Override: DELETE asks the server for DELETE, a write`);
      // A GET that only reads is what the read grant allows, through the name too.
      for (const send of [plain, inside]) expect(status((await send("loop.test", "/x/r", "", x)).answer)).toBe(200);
    } finally {
      await x.close();
    }
  });

  it("a path grant of an address lets no other path reach it through a name granted in full: plain, inside TLS, nor an opaque tunnel", async () => {
    // loop.test resolves to loopback, which only 127.0.0.1:PORT/x/* makes reachable.
    const x = await testGate([`loop.test:${P}`, `127.0.0.1:${P}/x/*`, `read:loop.test:${T}`, `127.0.0.1:${T}/x/*`], {
      names: { "loop.test": ["127.0.0.1"] },
      tls: tlsOpts,
    });
    try {
      for (const send of [plain, inside]) {
        const r = await send("loop.test", "/other", "", x);
        expect(status(r.answer), send === plain ? "plain" : "inside").toBe(403);
        expect(r.answer).toContain("127.0.0.1");
        expect(r.seen).toEqual([]);
        const dotted = await send("loop.test", "/x/../other", "", x);
        expect(status(dotted.answer)).toBe(403);
        const ok = await send("loop.test", "/x/./a", "", x);
        expect(status(ok.answer)).toBe(200);
        expect(ok.seen).toEqual(["/x/a"]);
      }
      const before = plainUp.requests.length;
      const tunnel = await rawGate(x.gate.socketPath, x.token, `CONNECT loop.test:${P} HTTP/1.1\r\nHost: loop.test:${P}\r\n\r\nGET /tunnelled HTTP/1.1\r\nHost: loop.test\r\n\r\n`, { waitMs: 2000 });
      expect(status(tunnel)).toBe(403);
      expect(plainUp.requests.length).toBe(before);
    } finally {
      await x.close();
    }
  });
});
