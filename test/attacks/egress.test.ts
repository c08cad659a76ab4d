import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { servedTree, testInternet, type TestInternet } from "../support/netns.js";
import { runVak } from "../support/vak.js";
import { collect, gateClient, kernelEnds, lenientUpstream, rawGate, rawUpstream, statusOf, testGate, until } from "../support/net.js";
import type { EgressEvent } from "../../src/net/egress-gate.js";

// Real clients (curl, Node's fetch, git) inside `vak exec`, reaching a web
// server in a network namespace the test made, through the egress gate. The
// client namespace has no route but to that server: whatever a check misses,
// no packet can leave this machine.
describe("egress through the gate", () => {
  let net: TestInternet;
  const hosts = {
    "granted.test": "11.0.0.2",
    "other.test": "11.0.0.2",
    "api.granted.test": "11.0.0.2",
    "loop.test": "127.0.0.1",
    "meta.test": "169.254.169.254",
    "private.test": "10.1.2.3",
    "evil.test": "11.0.0.2",
  };

  beforeAll(async () => {
    net = await testInternet(hosts, [80, 8080], [9091]);
    servedTree(net.dir);
  }, 60_000);
  afterAll(() => net?.close());

  /** Runs a shell script in the sandbox with the given network grants. */
  const run = async (grants: string[], script: string) => {
    const r = await net.vak(["exec", ...grants.flatMap((g) => ["--allow-net", g]), "--", "/bin/sh", "-c", script]);
    // Bodies end in a newline; put curl's " status=NNN" on the same line as the body.
    return { ...r, stdout: r.stdout.replace(/\n status=/g, " status=").replace(/ body= status=/g, " status=") };
  };
  const curl = (args: string) => `curl -s -S -o - -w ' status=%{http_code}\\n' --max-time 10 ${args}`;

  it("with no grant, nothing is reachable: not the server's address, not its name", async () => {
    const r = await net.vak(["exec", "--", "/bin/sh", "-c", `${curl("http://11.0.0.2/echo")}; ${curl("http://granted.test/echo")}; true`]);
    expect(r.stdout).not.toContain("echo GET");
    expect(net.log().filter((l) => l.includes("/echo"))).toEqual([]);
  });

  it("a granted host is reachable over plain HTTP (absolute-form)", async () => {
    const r = await run(["granted.test"], curl("http://granted.test/echo/plain"));
    expect(r.stdout).toContain("echo GET /echo/plain host=granted.test status=200");
  });

  it("a granted host is reachable through a CONNECT tunnel", async () => {
    const r = await run(["granted.test:8080"], curl("--proxytunnel http://granted.test:8080/echo/tunnel"));
    expect(r.stdout).toContain("echo GET /echo/tunnel host=granted.test:8080 status=200");
  });

  it("Node's built-in fetch, which ignores HTTP_PROXY, still goes through the gate", async () => {
    const r = await run(["granted.test"], `node -e "fetch('http://granted.test/echo/fetch').then(r => r.text()).then(t => console.log(t.trim()), e => console.log('failed', e.cause?.message ?? e.message))"`);
    expect(r.stdout.trim()).toBe("echo GET /echo/fetch host=granted.test body=");
  });

  it("git ls-remote over http works through the gate", async () => {
    const r = await run(["granted.test"], `git ls-remote http://granted.test/repo.git`);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^[0-9a-f]{40}\trefs\/heads\/main$/m);
  });

  it("every other host, port and method is refused with a 403 that names the rule", async () => {
    const r = await run(["granted.test", "read:api.granted.test"], [
      curl("http://other.test/echo/other-host"),
      curl("http://granted.test:8080/echo/other-port"),
      curl("-X DELETE http://api.granted.test/echo/write-on-read"),
      curl("http://api.granted.test/echo/read-on-read"),
    ].join("; "));
    expect(r.stdout).toContain("vak egress gate: refused: no grant names other.test:80; grant it with --allow-net other.test status=403");
    expect(r.stdout).toContain("vak egress gate: refused: no grant names granted.test:8080; grant it with --allow-net granted.test:8080 status=403");
    expect(r.stdout).toContain("vak egress gate: refused: DELETE is a write; the grant read:api.granted.test allows only GET, HEAD and OPTIONS status=403");
    expect(r.stdout).toContain("echo GET /echo/read-on-read host=api.granted.test status=200");
    const seen = net.log().join("\n");
    expect(seen).not.toContain("other-host");
    expect(seen).not.toContain("other-port");
    expect(seen).not.toContain("write-on-read");
  });

  it("every spelling of a blocked address is refused", async () => {
    const spellings = ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]", "[::1]", "169.254.169.254", "2852039166", "[fd00:ec2::254]", "[::ffff:a9fe:a9fe]"];
    const r = await run(["granted.test"], spellings.map((s) => curl(`http://${s}/`)).join("; "));
    expect(r.stdout.match(/status=403/g)?.length).toBe(spellings.length);
  });

  it("a granted name that resolves to loopback, metadata or a private address is refused", async () => {
    const r = await run(["loop.test", "meta.test", "private.test"], ["loop.test", "meta.test", "private.test"].map((h) => curl(`http://${h}/`)).join("; "));
    expect(r.stdout.match(/status=403/g)?.length).toBe(3);
    expect(r.stdout).toContain("loop.test resolves only to 127.0.0.1 (loopback)");
    expect(r.stdout).toContain("meta.test resolves only to 169.254.169.254 (metadata)");
    expect(r.stdout).toContain("private.test resolves only to 10.1.2.3 (private)");
  });

  it("a redirect to a blocked address is refused when followed", async () => {
    const r = await run(["granted.test"], `${curl("-L http://granted.test/redirect-meta")}; ${curl("-L http://granted.test/redirect-loop")}`);
    expect(r.stdout.match(/status=403/g)?.length).toBe(2);
  });

  it("a Host header that disagrees with the URL is refused", async () => {
    const r = await run(["granted.test"], curl(`-H 'Host: other.test' http://granted.test/echo/mismatch`));
    expect(r.stdout).toContain("status=400");
    expect(net.log().join("\n")).not.toContain("mismatch");
  });

  it("a client that ignores the proxy fails fast with a message naming the proxy", async () => {
    const r = await run(["granted.test"], `${curl("--noproxy '*' http://11.0.0.2/echo/direct")}; true`);
    expect(r.stdout).not.toContain("echo GET");
    expect(r.stderr).toContain("refused connect 11.0.0.2:80: direct connection; the network is reached only through the egress proxy");
  });

  it("UDP reaches nothing and names do not resolve inside, even with a grant: the lookup fails at once and says the proxy is the way", async () => {
    const r = await run(["granted.test"], `python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try: s.sendto(b'x', ('11.0.0.2', 53)); print('SENT')
except OSError as e: print('udp', e.errno)
try: socket.getaddrinfo('granted.test', 80); print('RESOLVED')
except OSError as e: print('no dns')
"`);
    expect(r.stdout).toContain("udp 101");
    expect(r.stdout).toContain("no dns");
    expect(r.stderr).toContain('vak: a lookup of granted.test inside the sandbox was answered "no such name": names resolve only at the egress gate; use the proxy (HTTPS_PROXY=http://127.0.0.1:3128)');
  });

  /** Python in the sandbox, talking to the relay directly: what curl would not send. */
  const py = (grants: string[], code: string, env?: Record<string, string>) =>
    net.vak(["exec", "--json", ...grants.flatMap((g) => ["--allow-net", g]), "--", "python3", "-c", `import socket\n${code}`], env);
  const RAW = `
def raw(data, shut=False):
    s = socket.create_connection(("127.0.0.1", 3128)); s.settimeout(10); s.sendall(data)
    if shut: s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except Exception as e: out += b" EXC " + str(e).encode()
    s.close()
    return out.decode("latin1")
`;

  it("a second Host header in another case cannot send the request to another virtual host", async () => {
    const r = await py(["granted.test"], `${RAW}
print(raw(b"GET http://granted.test/echo/smuggled HTTP/1.1\\r\\nHost: granted.test\\r\\nhOST: evil.test\\r\\n\\r\\n").split("\\r\\n")[0])`);
    expect(r.stdout).toContain("HTTP/1.1 400 Bad Request");
    expect(net.log().join("\n")).not.toContain("smuggled");
  });

  it("a client that shuts down its sending side after the request still gets the answer", async () => {
    const r = await py(["granted.test"], `${RAW}
print(raw(b"GET http://granted.test/echo/half HTTP/1.1\\r\\nHost: granted.test\\r\\n\\r\\n", shut=True))`);
    expect(r.stdout).toContain("HTTP/1.1 200 OK");
    expect(r.stdout).toContain("echo GET /echo/half host=granted.test");
  });

  it("a client that gives up on a server that never answers is on the record all the same", async () => {
    const r = await net.vak(["exec", "--json", "--allow-net", "granted.test:9091", "--", "/bin/sh", "-c", `${curl("http://granted.test:9091/gave-up")} --max-time 1; true`]);
    expect(net.silentLog()).toContain("9091 GET /gave-up HTTP/1.1");
    const egress = (JSON.parse(r.stderr.trim().split("\n").pop()!) as { egress: Record<string, unknown>[] }).egress.filter((e) => String(e.asked).endsWith("/gave-up"));
    // Recorded when it was allowed, before the server was reached; and how it ended, when the run did.
    expect(egress).toEqual([
      expect.objectContaining({ decision: "allowed", address: "11.0.0.2" }),
      expect.objectContaining({ decision: "allowed", outcome: "the client connection closed" }),
    ]);
    expect(egress[0]).not.toHaveProperty("outcome");
  });

  it("names whose DNS server never answers hold up neither other requests nor the run", async () => {
    const slow = Array.from({ length: 8 }, (_, i) => `${curl(`http://x${i}.slow.test/`).replace("--max-time 10", "--max-time 30")} &`).join(" ");
    const r = await run(["granted.test", "*.slow.test"], `${slow} sleep 1; ${curl("http://granted.test/echo/during-dns-stall").replace("--max-time 10", "--max-time 4")}; wait`);
    expect(net.silentLog().filter((l) => l === "dns").length).toBeGreaterThanOrEqual(8);
    expect(r.stdout).toContain("echo GET /echo/during-dns-stall host=granted.test status=200");
    // The eight answers arrive together and their lines may interleave: count each part.
    expect(r.stdout.match(/DNS lookup of x\d\.slow\.test timed out after 5000 ms/g)?.length).toBe(8);
    expect(r.stdout.match(/status=403/g)?.length).toBe(8);
  });

  it("a flood of refused requests with 15 KB URLs leaves a bounded record that still counts every one", async () => {
    const state = mkdtempSync(join(tmpdir(), "vak-flood-state-"));
    const env = { XDG_STATE_HOME: state };
    const r = await py(["granted.test"], `${RAW}
for i in range(400): raw(b"GET http://notgranted.test/" + b"a" * 15000 + b" HTTP/1.1\\r\\nHost: notgranted.test\\r\\n\\r\\n")
print("sent")`, env);
    expect(r.stdout).toContain("sent");
    // One line for the kind (the same host and reason every time), and a count of the rest.
    expect(r.stderr.match(/vak: refused GET http:\/\/notgranted.test\//g)?.length).toBe(1);
    expect(r.stderr).toContain("… and 399 more egress refusals");
    const [session] = JSON.parse((await net.vak(["journal", "list", "--json"], env)).stdout) as { id: string }[];
    const shown = JSON.parse((await net.vak(["journal", "show", session!.id, "--json"], env)).stdout) as { events: { kind: string; payload: { count?: number; asked: string } }[] };
    const egress = shown.events.filter((e) => e.kind === "egress");
    expect(egress.length).toBeLessThan(60);
    expect(egress.reduce((n, e) => n + (e.payload.count ?? 1), 0)).toBe(400);
    for (const e of egress) expect(e.payload.asked.length).toBeLessThan(400);
  });

  it("more connections than a run may hold are refused with a message that says so", async () => {
    const r = await py(["granted.test"], `import time
socks = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(260)]
time.sleep(1)
print("held", len(socks))`);
    expect(r.stdout).toContain("held 260");
    expect(r.stderr).toContain("vak: refused a connection: more than 256 connections at once");
  });

  it("--json reports every attempt with the destination as asked, canonical, resolved, and why", async () => {
    const r = await net.vak(["exec", "--json", "--allow-net", "granted.test", "--", "/bin/sh", "-c", `${curl("http://granted.test/echo/j")}; ${curl("http://2852039166/")}`]);
    const summary = JSON.parse(r.stderr.trim().split("\n").pop()!) as { egress: Record<string, unknown>[] };
    expect(summary.egress).toContainEqual(expect.objectContaining({ method: "GET", asked: "http://granted.test/echo/j", canonical: "granted.test:80", resolved: ["11.0.0.2"], address: "11.0.0.2", decision: "allowed" }));
    // curl rewrites 2852039166 to dotted form before asking; the gate's own tests send it raw.
    expect(summary.egress).toContainEqual(expect.objectContaining({ asked: "http://169.254.169.254/", canonical: "169.254.169.254:80", decision: "denied", status: 403 }));
  });
});

// The unspecified addresses alias loopback on Linux: a connect to 0.0.0.0
// reaches 127.0.0.1, and one to :: reaches ::1. Only loopback is involved, so
// these run on the host's own network: a gate that failed would connect to
// the test's own listeners and nowhere else.
describe("the unspecified addresses are loopback to the gate", () => {
  let v4: Server;
  let v6: Server;
  let port = 0;
  const reached: string[] = [];
  /** Where each connection to the IPv4 listener came from. */
  const peers: string[] = [];
  const ws = mkdtempSync(join(tmpdir(), "vak-unspec-"));

  beforeAll(async () => {
    const listen = (host: string, p: number) =>
      new Promise<Server>((resolve, reject) => {
        const srv = createServer((s) => {
          reached.push(host);
          if (host === "127.0.0.1") peers.push(s.remoteAddress ?? "?");
          s.end("HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nREACHED");
        });
        srv.on("error", reject);
        srv.listen(p, host, () => resolve(srv));
      });
    v4 = await listen("127.0.0.1", 0);
    port = (v4.address() as { port: number }).port;
    v6 = await listen("::1", port);
  });
  afterAll(() => {
    v4?.close();
    v6?.close();
  });

  const curl = (url: string) => `curl -s -S -o - -w ' status=%{http_code}\\n' --max-time 5 '${url}'`;
  const exec = (allow: string[], deny: string[], urls: string[]) =>
    runVak(["exec", ...allow.flatMap((a) => ["--allow-net", a]), ...deny.flatMap((d) => ["--deny-net", d]), "--", "/bin/sh", "-c", urls.map(curl).join("; ") + "; true"], { cwd: ws });

  it("--allow-net 0.0.0.0:Q --deny-net 127.0.0.1 does not reach a listener on 127.0.0.1:Q, in any spelling", async () => {
    const spellings = ["0.0.0.0", "0", "0x0", "0.0", "0.0.0", "00.00.00.00", "0x0.0x0.0x0.0x0", "[::ffff:0.0.0.0]", "[::ffff:0:0]"];
    const before = reached.length;
    const r = await exec([`0.0.0.0:${port}`, `0:${port}`, `[::ffff:0.0.0.0]:${port}`], ["127.0.0.1"], spellings.map((h) => `http://${h}:${port}/`));
    expect(r.stdout).not.toContain("REACHED");
    expect(r.stdout.match(/status=403/g)?.length).toBe(spellings.length);
    expect(r.stderr).toContain("denied by --deny-net 127.0.0.1");
    expect(reached.length).toBe(before);
  });

  it("--allow-net [::]:Q --deny-net [::1] does not reach a listener on [::1]:Q", async () => {
    const before = reached.length;
    const r = await exec([`[::]:${port}`, `[0:0:0:0:0:0:0:0]:${port}`], ["[::1]"], [`http://[::]:${port}/`, `http://[0:0::0]:${port}/`, `http://[::0]:${port}/`]);
    expect(r.stdout).not.toContain("REACHED");
    expect(r.stdout.match(/status=403/g)?.length).toBe(3);
    expect(reached.length).toBe(before);
  });

  it("a deny of 0.0.0.0 covers 127.0.0.1, and a grant of loopback under any name is still only a literal grant", async () => {
    const before = reached.length;
    const denied = await exec([`127.0.0.1:${port}`], ["0.0.0.0"], [`http://127.0.0.1:${port}/`, `http://0.0.0.0:${port}/`]);
    expect(denied.stdout).not.toContain("REACHED");
    // Another port of loopback is not granted by naming 0.0.0.0:Q.
    const other = await exec([`0.0.0.0:${port}`], [], [`http://127.0.0.1:${port + 1}/`]);
    expect(other.stdout).toContain("status=403");
    expect(reached.length).toBe(before);
  });

  it("a sandbox reaches a granted loopback service from an address of its own, never the user's 127.0.0.1: plain, tunnelled, in any spelling", async () => {
    // A local service that counts or trusts by peer (vak serve's failed-token limit) must not take the sandbox for the user.
    const before = peers.length;
    const r = await exec([`127.0.0.1:${port}`, `0.0.0.0:${port}`], [], [`http://127.0.0.1:${port}/`, `http://0x7f000001:${port}/`, `http://0.0.0.0:${port}/`]);
    const tunnelled = await runVak(["exec", "--allow-net", `127.0.0.1:${port}`, "--", "curl", "-s", "-p", "--max-time", "5", `http://127.0.0.1:${port}/`], { cwd: ws });
    expect(r.stdout.match(/REACHED status=200/g)?.length).toBe(3);
    expect(tunnelled.stdout).toBe("REACHED");
    expect(peers.slice(before)).toEqual(["127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.2"]);
  });

  it("without a deny rule, naming 0.0.0.0:Q is naming loopback:Q (what the kernel would connect to)", async () => {
    const r = await exec([`0.0.0.0:${port}`], [], [`http://0.0.0.0:${port}/`, `http://127.0.0.1:${port}/`]);
    expect(r.stdout.match(/REACHED status=200/g)?.length).toBe(2);
  });
});

// Plain HTTP whose bodies the engine moves in the kernel (src/net/spliced.ts):
// an in-process gate, real sockets on loopback, hostile clients and upstreams.
// A body is spliced once its head has been decided and it has not all arrived
// with the head: the tests send heads first, then the bodies, so that they are.
describe("plain HTTP with its bodies spliced", () => {
  const MiB = 1 << 20;
  const sockets = new WeakSet<Socket>();
  /** An upstream answer once the whole request (head and Content-Length body) has arrived, once per connection. */
  const afterBody = (reply: string | ((soFar: string) => string)) => (soFar: string, s: Socket) => {
    const end = soFar.indexOf("\r\n\r\n");
    if (end < 0 || sockets.has(s)) return undefined;
    const cl = Number(/\r\ncontent-length: *(\d+)/i.exec(soFar.slice(0, end + 2))?.[1] ?? 0);
    if (soFar.length < end + 4 + cl) return undefined;
    sockets.add(s);
    return typeof reply === "string" ? reply : reply(soFar);
  };
  const ok = (text: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
  /** An upstream answer for each whole request (head and Content-Length body) on a connection, pipelined or kept. */
  const answered = new WeakMap<Socket, number>();
  const eachRequest = (reply: string) => (soFar: string, s: Socket) => {
    let at = 0;
    let whole = 0;
    for (;;) {
      const end = soFar.indexOf("\r\n\r\n", at);
      if (end < 0) break;
      const cl = Number(/\r\ncontent-length: *(\d+)/i.exec(soFar.slice(at, end + 2))?.[1] ?? 0);
      if (soFar.length < end + 4 + cl) break;
      at = end + 4 + cl;
      whole += 1;
    }
    const before = answered.get(s) ?? 0;
    answered.set(s, whole);
    return whole > before ? reply.repeat(whole - before) : undefined;
  };
  const post = (port: number, path: string, length: number, extra = "") => `POST http://127.0.0.1:${port}${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${extra}Content-Length: ${length}\r\n\r\n`;
  const ofAsked = (t: { events: EgressEvent[] }, suffix: string) => t.events.filter((e) => e.asked.endsWith(suffix));
  it("a request pipelined after a spliced body never rides it: it is read, decided and refused for an ungranted host", async () => {
    const granted = await rawUpstream({ answer: eachRequest(ok("stored")) });
    const other = await rawUpstream({ answer: () => ok("reached") });
    const t = await testGate([`127.0.0.1:${granted.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.write(post(granted.port, "/upload", MiB));
      await until(() => granted.received().includes("POST /upload"), "the upstream has the first head");
      // The body, then in the same writes a second request to the granted host and a third to a host no grant names.
      const second = `GET http://127.0.0.1:${granted.port}/second HTTP/1.1\r\nHost: 127.0.0.1:${granted.port}\r\n\r\n`;
      const third = post(other.port, "/smuggled", 5) + "hello";
      s.write(Buffer.concat([Buffer.alloc(MiB, "a"), Buffer.from(second + third)]));
      await c.closed;
      expect(other.connections).toBe(0);
      const got = granted.received();
      expect(got).not.toContain("smuggled");
      // The upstream connection got the head and exactly the body, then the second request, checked on its own, on the same kept connection.
      expect(granted.connections).toBe(1);
      const firstBody = got.slice(got.indexOf("\r\n\r\n") + 4, got.indexOf("GET /second"));
      expect(firstBody).toBe("a".repeat(MiB));
      expect(c.text()).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*stored[^]*HTTP\/1\.1 200 OK\r\n[^]*stored[^]*HTTP\/1\.1 403 /);
      expect(ofAsked(t, "/upload").map((e) => e.outcome)).toEqual([undefined, "completed"]);
      expect(ofAsked(t, "/second").map((e) => e.decision)).toEqual(["allowed", "allowed"]);
      expect(ofAsked(t, "/smuggled").map((e) => [e.decision, e.status])).toEqual([["denied", 403]]);
    } finally {
      await t.close();
      await granted.close();
      await other.close();
    }
  });

  it("bytes past a Content-Length that arrived with the head are the next request's head, decided as any other", async () => {
    const granted = await rawUpstream({ answer: afterBody(ok("stored")) });
    const other = await rawUpstream({ answer: () => ok("reached") });
    const t = await testGate([`127.0.0.1:${granted.port}`]);
    try {
      const longer = `${post(granted.port, "/short", 10)}0123456789${post(other.port, "/after", 5)}hello`;
      const r = await rawGate(t.gate.socketPath, t.token, longer, { waitMs: 3000 });
      expect(statusOf(r)).toBe(200);
      expect(r).toMatch(/HTTP\/1\.1 403 /);
      expect(other.connections).toBe(0);
      expect(granted.received()).toMatch(/\r\n\r\n0123456789$/);
      const garbage = await rawGate(t.gate.socketPath, t.token, `${post(granted.port, "/short2", 10)}0123456789XXXX\r\n\r\n`, { waitMs: 3000 });
      expect(garbage).toMatch(/HTTP\/1\.1 400 /);
    } finally {
      await t.close();
      await granted.close();
      await other.close();
    }
  });

  it("request smuggling is refused before any body moves: CL+TE, a repeated or signed Content-Length, folding, bare LF", async () => {
    const granted = await rawUpstream({ answer: afterBody(ok("stored")) });
    const t = await testGate([`127.0.0.1:${granted.port}`]);
    try {
      const P = granted.port;
      const line = `POST http://127.0.0.1:${P}/x HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n`;
      const smuggled = `GET http://127.0.0.1:${P}/smuggled HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\n\r\n`;
      const attempts = [
        `${line}Content-Length: ${smuggled.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
        `${line}Content-Length: 0\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
        `${line}Content-Length: 0, ${smuggled.length}\r\n\r\n${smuggled}`,
        `${line}Content-Length: +${smuggled.length}\r\n\r\n${smuggled}`,
        `${line}Content-Length: 0\r\n ${smuggled.length}\r\n\r\n${smuggled}`,
        `${line}X-A: b\r\n\tContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`,
        `${line}Content-Length : ${smuggled.length}\r\n\r\n${smuggled}`,
        `${line}Content-Length: ${smuggled.length}\n\r\n${smuggled}`,
        `${line}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${smuggled}`,
      ];
      for (const a of attempts) {
        const r = await rawGate(t.gate.socketPath, t.token, a, { waitMs: 2000 });
        expect([400, 501], a).toContain(statusOf(r));
      }
      expect(granted.connections).toBe(0);
    } finally {
      await t.close();
      await granted.close();
    }
  });

  it("a hostile upstream's ambiguous framing gets the client a 502 and none of its body: CL+TE, repeated CL, folding, bare LF", async () => {
    const answers = [
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nevil!",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 50\r\n\r\nevil!",
      "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nevil!",
      "HTTP/1.1 200 OK\r\nX-A: b\r\n Content-Length: 5\r\n\r\nevil!",
      "HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\nevil!",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nevil!",
    ];
    for (const answer of answers) {
      const up = await rawUpstream({ answer: afterBody(answer) });
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/x HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`, { waitMs: 2000 });
        expect(statusOf(r), answer).toBe(502);
        expect(r).not.toContain("evil");
        expect(ofAsked(t, "/x").at(-1)?.outcome).toMatch(/^upstream failed: /);
      } finally {
        await t.close();
        await up.close();
      }
    }
  });

  it("a request body shorter than its Content-Length never completes upstream: the client's leaving is on the record", async () => {
    const up = await rawUpstream({ answer: afterBody(ok("stored")) });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.write(post(up.port, "/cut", 4 * MiB));
      await until(() => up.received().includes("POST /cut"), "the upstream has the head");
      s.end(Buffer.alloc(MiB, "a"));
      await until(() => ofAsked(t, "/cut").length === 2, "the end is on the record");
      expect(ofAsked(t, "/cut")[1]!.outcome).toBe("bad request body: the client closed the connection in the middle of a request body");
      // The upstream connection is reset, not closed: the kernel has nothing left of it, at either end (a FIN would
      // leave it half-closed). Not its Node socket's close: a reset that finds bytes still unread reaches Node as a
      // clean end (kernelEnds).
      await until(() => kernelEnds(up) === 0, "the upstream connection is reset: no end of it is left in the kernel");
      expect(up.connections).toBe(1);
      expect(c.text()).not.toContain("stored");
      s.destroy();
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("an upstream body shorter than its Content-Length is cut at the client, and one longer never reaches it", async () => {
    const short = await rawUpstream({ answer: (soFar, s) => (soFar.includes("\r\n\r\n") ? void s.end(`HTTP/1.1 200 OK\r\nContent-Length: ${4 * MiB}\r\n\r\n${"b".repeat(MiB)}`) : undefined) });
    // Past its Content-Length, a second response: on a kept connection it would answer the client's next request.
    const evil = `HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil`;
    const long = await rawUpstream({ answer: (soFar, s) => (soFar.includes("\r\n\r\n") && !sockets.has(s) ? (sockets.add(s), `HTTP/1.1 200 OK\r\nContent-Length: ${MiB}\r\n\r\n${"c".repeat(MiB)}${evil}`) : undefined) });
    const t = await testGate([`127.0.0.1:${short.port}`, `127.0.0.1:${long.port}`]);
    try {
      const a = await gateClient(t.gate.socketPath, t.token);
      const ca = collect(a);
      a.write(`GET http://127.0.0.1:${short.port}/short HTTP/1.1\r\nHost: 127.0.0.1:${short.port}\r\n\r\n`);
      await ca.closed;
      expect(ca.text().length).toBeLessThan(4 * MiB);
      await until(() => ofAsked(t, "/short").length === 2, "its end is on the record");
      expect(ofAsked(t, "/short")[1]!.outcome).toBe("upstream failed: it closed the connection before the end of the body its Content-Length announced");

      const b = await gateClient(t.gate.socketPath, t.token);
      const cb = collect(b);
      const get = (path: string) => `GET http://127.0.0.1:${long.port}${path} HTTP/1.1\r\nHost: 127.0.0.1:${long.port}\r\n\r\n`;
      b.write(get("/long"));
      await until(() => cb.text().length >= MiB, "the first body arrives");
      b.end(get("/next"));
      await cb.closed;
      expect(cb.text()).not.toContain("evil");
      expect(cb.text().match(/HTTP\/1\.1 200 OK/g)?.length).toBe(2);
      expect(long.connections).toBe(2);
    } finally {
      await t.close();
      await short.close();
      await long.close();
    }
  });

  it("the byte budget stops a spliced upload, a spliced download, and both together, mid-body", async () => {
    const budget = 256 * 1024;
    const up = await rawUpstream({ answer: afterBody((soFar) => (soFar.includes("/down") ? `HTTP/1.1 200 OK\r\nContent-Length: ${4 * MiB}\r\n\r\n${"d".repeat(4 * MiB)}` : soFar.includes("/both") ? `HTTP/1.1 200 OK\r\nContent-Length: ${200 * 1024}\r\n\r\n${"e".repeat(200 * 1024)}` : ok("stored"))) });
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { bytesPerConnection: budget } });
    try {
      const stopped = `stopped: the connection passed its limit of ${budget} bytes`;
      // An upload past the budget.
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.on("error", () => {});
      s.write(post(up.port, "/up", 4 * MiB));
      await until(() => up.received().includes("POST /up"), "the upstream has the head");
      s.write(Buffer.alloc(4 * MiB, "u"));
      await c.closed;
      await until(() => ofAsked(t, "/up").length === 2, "its end is on the record");
      expect(ofAsked(t, "/up")[1]!.outcome).toBe(stopped);
      expect((up.received().match(/u/g) ?? []).length).toBeLessThanOrEqual(budget);
      expect(c.text()).not.toContain("stored");
      // A download past the budget.
      const d = await gateClient(t.gate.socketPath, t.token);
      const cd = collect(d);
      d.on("error", () => {});
      d.write(`GET http://127.0.0.1:${up.port}/down HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
      await cd.closed;
      expect(cd.text().length).toBeLessThanOrEqual(budget + 200);
      await until(() => ofAsked(t, "/down").length === 2, "its end is on the record");
      expect(ofAsked(t, "/down")[1]!.outcome).toBe(stopped);
      // 150 KiB up and 200 KiB down: each under the budget, together over it.
      const before = up.received().length;
      const b = await gateClient(t.gate.socketPath, t.token);
      const cboth = collect(b);
      b.on("error", () => {});
      b.write(post(up.port, "/both", 150 * 1024));
      await until(() => up.received().includes("POST /both"), "the upstream has the head");
      b.write(Buffer.alloc(150 * 1024, "v"));
      await cboth.closed;
      await until(() => ofAsked(t, "/both").length === 2, "its end is on the record");
      expect(ofAsked(t, "/both")[1]!.outcome).toBe(stopped);
      expect(up.received().length - before + cboth.text().length).toBeLessThanOrEqual(budget + 400);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a body that stalls mid-splice ends at the idle time, on the record", async () => {
    const up = await rawUpstream({ answer: afterBody(ok("stored")) });
    const t = await testGate([`127.0.0.1:${up.port}`], { limits: { idleMs: 400 } });
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.on("error", () => {});
      s.write(post(up.port, "/stalled", MiB));
      await until(() => up.received().includes("POST /stalled"), "the upstream has the head");
      s.write(Buffer.alloc(64 * 1024, "s")); // then nothing
      await c.closed;
      await until(() => ofAsked(t, "/stalled").length === 2, "its end is on the record");
      expect(ofAsked(t, "/stalled")[1]!.outcome).toBe("stopped: no data either way for 400 ms");
      await until(() => kernelEnds(up) === 0, "no TCP connection to the upstream is left in the kernel");
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a secret header whose value holds CR LF cannot add a header or a request to what the gate sends", async () => {
    const up = await rawUpstream({ answer: afterBody(ok("stored")) });
    const header = { ref: "k", header: "X-Key", value: "v\r\nX-Injected: 1\r\n\r\nGET /smuggled HTTP/1.1", hosts: ["127.0.0.1"] };
    const t = await testGate([`127.0.0.1:${up.port}`], { worker: { headers: [header] } });
    try {
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/x HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`, { waitMs: 2000 });
      expect(statusOf(r)).toBe(502);
      expect(up.received()).not.toContain("X-Injected");
      expect(up.received()).not.toContain("smuggled");
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("revoking the worker ends a spliced body at once, on the record", async () => {
    const up = await rawUpstream({ answer: afterBody(ok("stored")) });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.on("error", () => {});
      s.write(post(up.port, "/revoked", 64 * MiB));
      await until(() => up.received().includes("POST /revoked"), "the upstream has the head");
      // The client keeps sending for as long as it can.
      const block = Buffer.alloc(256 * 1024, "r");
      const pump = () => {
        while (!s.destroyed && s.write(block));
      };
      s.on("drain", pump);
      pump();
      await until(() => up.received().length > MiB, "the body is moving");
      t.gate.unregister(t.token);
      await c.closed;
      await until(() => ofAsked(t, "/revoked").length === 2, "its end is on the record");
      expect(ofAsked(t, "/revoked")[1]!.outcome).toBe("stopped: the worker's grant was revoked");
      // The upstream sees a reset, not a clean end, and nothing after it.
      await until(() => kernelEnds(up) === 0, "no TCP connection to the upstream is left in the kernel");
      expect(up.received().length).toBeLessThan(64 * MiB);
    } finally {
      await t.close();
      await up.close();
    }
  });
});

// Request smuggling against the gate's plain HTTP: the upstream is a lenient server (test/support/net.ts)
// that reads every request on each connection as it comes, as the servers smuggling exploits do. Each test
// fails if that server ever sees a request the gate did not check, or more requests than the gate checked.
describe("plain HTTP: transfer codings and request smuggling", () => {
  const checked = (t: { events: EgressEvent[] }) => t.events.filter((e) => e.decision === "allowed" && e.outcome === undefined);
  /** Every request the upstream read was checked by the gate, one for one, on its path. */
  const oneForOne = (t: { events: EgressEvent[] }, seen: { line: string }[], what: string) => {
    const paths = checked(t).map((e) => new URL(e.asked).pathname);
    expect(seen.length, what).toBeLessThanOrEqual(paths.length);
    for (const r of seen) expect(paths, what).toContain(r.line.split(" ")[1]);
  };
  const smuggled = "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const head = (P: number, fields: string, version = "1.1") => `POST http://127.0.0.1:${P}/x HTTP/${version}\r\nHost: 127.0.0.1:${P}\r\n${fields}\r\n`;

  it("a header a lenient server reads as Transfer-Encoding or Content-Length (Transfer_Encoding, Content_Length) is refused: no request rides a body", async () => {
    const up = await lenientUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const P = up.port;
      const chunkedBody = `0\r\n\r\n${smuggled}`;
      const attempts = [
        `${head(P, `Content-Length: ${chunkedBody.length}\r\nTransfer_Encoding: chunked\r\n`)}${chunkedBody}`,
        `${head(P, `Content-Length: ${chunkedBody.length}\r\ntransfer_encoding: chunked\r\n`)}${chunkedBody}`,
        `${head(P, `Content-Length: ${smuggled.length}\r\nContent_Length: 0\r\n`)}${smuggled}`,
        `${head(P, `Transfer-Encoding: chunked\r\nContent_Length: 0\r\n`)}${(smuggled.length).toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`,
      ];
      for (const a of attempts) {
        const r = await rawGate(t.gate.socketPath, t.token, a, { waitMs: 2000 });
        expect(statusOf(r), a).toBe(400);
        oneForOne(t, up.requests, a);
      }
      expect(up.requests).toEqual([]);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("Transfer-Encoding obfuscations are refused before anything is sent: xchunked, parameters, chunked not last or twice, identity, quoted, a repeated header, in HTTP/1.0, with Content-Length", async () => {
    const up = await lenientUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const P = up.port;
      // A body a lenient reader takes as chunked, ending early, with a request after it.
      const body = `0\r\n\r\n${smuggled}`;
      const te = (v: string) => `Transfer-Encoding: ${v}\r\n`;
      const attempts = [
        head(P, te("xchunked")),
        head(P, te("chunkedx")),
        head(P, te("chunked;q=1")),
        head(P, te("chunked, gzip")),
        head(P, te("chunked, chunked")),
        head(P, te("identity, chunked")),
        head(P, te("gzip")),
        head(P, te('"chunked"')),
        head(P, te("gzip,, chunked")),
        head(P, te("gzip chunked")),
        head(P, te("ch\x85unked")),
        head(P, te("chunked") + te("chunked")),
        head(P, te("gzip") + te("chunked")),
        head(P, te("chunked"), "1.0"),
        head(P, te("chunked") + `Content-Length: ${body.length}\r\n`),
        head(P, `Content-Length: ${body.length}\r\n` + te("chunked")),
        head(P, "Transfer-Encoding:\r\n chunked\r\n"),
        head(P, "Transfer-Encoding : chunked\r\n"),
        head(P, "Transfer-Encoding: chunked\x0b\r\n"),
      ];
      for (const a of attempts) {
        const r = await rawGate(t.gate.socketPath, t.token, a + body, { waitMs: 2000 });
        expect([400, 501], JSON.stringify(a)).toContain(statusOf(r));
        expect(r, JSON.stringify(a)).toMatch(/refused: [^\n]*(Transfer-Encoding|transfer coding|Content-Length|malformed|control|HTTP\/1\.0)/);
        oneForOne(t, up.requests, a);
      }
      expect(up.requests).toEqual([]);
      expect(up.connections).toBe(0);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("the unambiguous forms reach the upstream as exactly one request, framed the gate's way: chunked in any case and with spaces, codings before chunked", async () => {
    const up = await lenientUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const P = up.port;
      const forms: [string, string][] = [
        ["chunked", "chunked"],
        ["Chunked", "chunked"],
        ["CHUNKED", "chunked"],
        ["\t chunked  ", "chunked"],
        ["gzip, chunked", "gzip, chunked"],
        ["GZIP,chunked", "gzip, chunked"],
        ["deflate ,  chunked", "deflate, chunked"],
        ["x-gzip, chunked", "x-gzip, chunked"],
      ];
      // The body holds what looks like the end of a body and a request: data, to the gate and to the upstream.
      const data = `0\r\n\r\n${smuggled}`;
      const body = `${data.length.toString(16)}\r\n${data}\r\n0\r\nX-Trailer: 1\r\nContent-Length: 0\r\n\r\n`;
      for (const [i, [form, sent]] of forms.entries()) {
        const r = await rawGate(t.gate.socketPath, t.token, head(P, `Transfer-Encoding: ${form}\r\nConnection: close\r\n`) + body, { waitMs: 3000 });
        expect(statusOf(r), form).toBe(200);
        expect(r, form).toContain("seen /x");
        expect(up.requests.length, form).toBe(i + 1);
        const got = up.requests[i]!;
        expect(got.headers["transfer-encoding"], form).toBe(sent);
        expect(got.body, form).toBe(data);
        expect(got.headers["x-trailer"], form).toBeUndefined(); // trailers are not passed on
        oneForOne(t, up.requests, form);
      }
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a malformed chunk ends the request and the connection, on the record, and the upstream never gets a whole request", async () => {
    const up = await lenientUpstream();
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const P = up.port;
      const bodies = [
        "5\r\nhelloEXTRA\r\n0\r\n\r\n", // data longer than its size
        "5\r\nhel", // the client ends mid-chunk
        "fffffffffffffffff\r\nx\r\n0\r\n\r\n", // a size past any length
        "-5\r\nhello\r\n0\r\n\r\n",
        "0x5\r\nhello\r\n0\r\n\r\n",
        "5\nhello\r\n0\r\n\r\n", // a bare LF after the size
        "5;\x01\r\nhello\r\n0\r\n\r\n", // a control character in an extension
        `5;${"e".repeat(5000)}\r\nhello\r\n0\r\n\r\n`, // a size line past its bound
        `0\r\n${"X-T: 1\r\n".repeat(100)}\r\n`, // too many trailers
      ];
      for (const b of bodies) {
        const r = await rawGate(t.gate.socketPath, t.token, head(P, "Transfer-Encoding: chunked\r\n") + b, { waitMs: 2000 });
        expect(statusOf(r) === 200, JSON.stringify(b)).toBe(false);
        expect(up.requests, JSON.stringify(b)).toEqual([]);
      }
      const ends = t.events.filter((e) => e.outcome !== undefined).map((e) => e.outcome);
      expect(ends.length).toBe(bodies.length);
      for (const o of ends) expect(o).toMatch(/chunk|line|closed|trailer|incomplete/);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("an upstream's Transfer-Encoding is taken only in an unambiguous form: codings before chunked are passed on with them, HTTP/1.0 with one or chunked not last is a 502", async () => {
    const answers: [string, number, string | undefined][] = [
      ["HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n", 200, "gzip, chunked"],
      ["HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n", 200, "chunked"],
      ["HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nevil\r\n0\r\n\r\n", 502, undefined],
      ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n4\r\nevil\r\n0\r\n\r\n", 502, undefined],
      ["HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n4\r\nevil\r\n0\r\n\r\n", 502, undefined],
      ["HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\nContent-Length: 4\r\n\r\nevil", 502, undefined],
      ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nevil\r\n0\r\n\r\n", 502, undefined],
    ];
    for (const [answer, status, te] of answers) {
      const up = await lenientUpstream(() => answer);
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/x HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nConnection: close\r\n\r\n`, { waitMs: 2000 });
        expect(statusOf(r), answer).toBe(status);
        expect(r, answer).not.toContain("evil");
        if (te) {
          expect(r, answer).toMatch(new RegExp(`\r\nTransfer-Encoding: ${te}\r\n`));
          expect(r, answer).toMatch(/\r\n\r\n4\r\nbody\r\n0\r\n\r\n$/);
        }
      } finally {
        await t.close();
        await up.close();
      }
    }
  });
});

describe("plain HTTP: an HTTP/1.0 client and a chunked answer", () => {
  it("gets the data alone, ended by the close: no chunk framing in its body, small chunks or ones the engine moves", async () => {
    const big = "B".repeat(200 * 1024);
    const answer = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n5;ext=1\r\nmore!\r\n${big.length.toString(16)}\r\n${big}\r\n0\r\nX-Trailer: t\r\n\r\n`;
    const up = await lenientUpstream(() => answer);
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const r = await rawGate(t.gate.socketPath, t.token, `GET http://127.0.0.1:${up.port}/x HTTP/1.0\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`, { waitMs: 5000 });
      expect(statusOf(r)).toBe(200);
      const [head, ...rest] = r.split("\r\n\r\n");
      expect(head).not.toMatch(/transfer-encoding/i);
      expect(head).toMatch(/\r\nConnection: close(\r\n|$)/i);
      expect(rest.join("\r\n\r\n")).toBe(`bodymore!${big}`);
    } finally {
      await t.close();
      await up.close();
    }
  });
});

// Kept upstream connections: a client's keep-alive requests share one upstream connection, but never an
// answer the upstream sent unasked, never another destination's or grant's connection, and each request is
// checked on its own.
describe("plain HTTP: kept upstream connections", () => {
  const get = (P: number, path: string, host = `127.0.0.1:${P}`, extra = "") => `GET http://${host}${path} HTTP/1.1\r\nHost: ${host}\r\n${extra}\r\n`;
  /** Sends each request after the previous answer, on one client connection; returns each answer's body (or status line). */
  const inTurn = async (t: { gate: { socketPath: string }; token: string }, requests: string[]) => {
    const s = await gateClient(t.gate.socketPath, t.token);
    const answers: string[] = [];
    let buf = "";
    let wake = () => {};
    s.on("data", (d: Buffer) => ((buf += d.toString("latin1")), wake()));
    let ended = false;
    s.on("end", () => ((ended = true), wake()));
    s.on("close", () => ((ended = true), wake()));
    try {
      for (const r of requests) {
        if (ended) return answers;
        s.write(r);
        for (;;) {
          const end = buf.indexOf("\r\n\r\n");
          const head = end < 0 ? "" : buf.slice(0, end + 2);
          if (end >= 0 && /\r\ntransfer-encoding: chunked\r\n/i.test(head)) {
            // A chunked answer (one data chunk at most, as these upstreams send): its data.
            const last = buf.indexOf("0\r\n\r\n", end + 4);
            if (last >= 0) {
              const m = /^([0-9a-f]+)\r\n/i.exec(buf.slice(end + 4));
              const data = m && m[1] !== "0" ? buf.slice(end + 4 + m[0].length, end + 4 + m[0].length + parseInt(m[1]!, 16)) : "";
              answers.push(`${buf.slice(0, buf.indexOf("\r\n"))} ${data}`);
              buf = buf.slice(last + 5);
              break;
            }
          } else if (end >= 0) {
            const cl = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
            if (buf.length >= end + 4 + cl) {
              answers.push(`${buf.slice(0, buf.indexOf("\r\n"))} ${buf.slice(end + 4, end + 4 + cl)}`);
              buf = buf.slice(end + 4 + cl);
              break;
            }
          }
          if (ended) return answers;
          await new Promise<void>((w) => (wake = w));
        }
      }
      return answers;
    } finally {
      s.destroy();
    }
  };

  it("keep-alive requests reuse one upstream connection, and each is still checked on its own: a refused path ends them", async () => {
    const up = await lenientUpstream();
    const t = await testGate([`127.0.0.1:${up.port}/allowed`]);
    try {
      const P = up.port;
      const answers = await inTurn(t, [get(P, "/allowed/1"), get(P, "/allowed/2"), get(P, "/allowed/3"), get(P, "/denied"), get(P, "/allowed/4")]);
      expect(answers.slice(0, 3)).toEqual(["HTTP/1.1 200 OK seen /allowed/1", "HTTP/1.1 200 OK seen /allowed/2", "HTTP/1.1 200 OK seen /allowed/3"]);
      expect(answers[3]).toMatch(/^HTTP\/1\.1 403 /);
      expect(answers).toHaveLength(4);
      expect(up.requests.map((r) => r.line)).toEqual(["GET /allowed/1 HTTP/1.1", "GET /allowed/2 HTTP/1.1", "GET /allowed/3 HTTP/1.1"]);
      expect(up.connections).toBe(1);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("an answer the upstream sent past its Content-Length (response smuggling) never answers the next request: that connection is not kept", async () => {
    const poisoned = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned";
    let n = 0;
    const up = await lenientUpstream((r) => {
      n += 1;
      const text = `seen ${r.line.split(" ")[1]}`;
      const answer = `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
      return n === 1 ? answer + poisoned : answer;
    });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const P = up.port;
      const answers = await inTurn(t, [get(P, "/first"), get(P, "/second"), get(P, "/third")]);
      expect(answers).toEqual(["HTTP/1.1 200 OK seen /first", "HTTP/1.1 200 OK seen /second", "HTTP/1.1 200 OK seen /third"]);
      // The poisoned connection was closed; the next requests came on another, kept one.
      expect(up.connections).toBe(2);
      expect(up.requests.map((r) => [r.connection, r.line])).toEqual([[1, "GET /first HTTP/1.1"], [2, "GET /second HTTP/1.1"], [2, "GET /third HTTP/1.1"]]);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a connection is never kept after a doubt: bytes sent while idle, an HTTP/1.0 answer, Connection: close, a close-delimited body, a chunked body with bytes after it", async () => {
    const cases: [string, (text: string) => string][] = [
      ["HTTP/1.0", (text) => `HTTP/1.0 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`],
      ["Connection: close", (text) => `HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: ${text.length}\r\n\r\n${text}`],
      ["chunked, then more", (text) => `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${text.length.toString(16)}\r\n${text}\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned`],
    ];
    for (const [what, answer] of cases) {
      const up = await lenientUpstream((r) => answer(`seen ${r.line.split(" ")[1]}`));
      const t = await testGate([`127.0.0.1:${up.port}`]);
      try {
        const P = up.port;
        const answers = await inTurn(t, [get(P, "/a"), get(P, "/b")]);
        expect(answers.map((a) => a.replace(/^HTTP\/1\.1 200 OK /, "")), what).toEqual(["seen /a", "seen /b"]);
        expect(up.connections, what).toBe(2);
      } finally {
        await t.close();
        await up.close();
      }
    }
    // An upstream that speaks while no request is out: its connection is dropped, not kept for the next.
    const seen = new WeakMap<Socket, number>();
    const idle = await rawUpstream({
      answer: (soFar, s) => {
        const paths = [...soFar.matchAll(/GET (\S+) HTTP/g)].map((m) => m[1]!);
        if ((seen.get(s) ?? 0) === paths.length) return undefined;
        seen.set(s, paths.length);
        if (paths.length === 1) setTimeout(() => s.write("HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned"), 100);
        const text = `seen ${paths.at(-1)}`;
        return `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
      },
    });
    const t = await testGate([`127.0.0.1:${idle.port}`]);
    try {
      const P = idle.port;
      const s = await gateClient(t.gate.socketPath, t.token);
      const c = collect(s);
      s.write(get(P, "/a"));
      await until(() => c.text().includes("seen /a"), "the first answer");
      await new Promise((r) => setTimeout(r, 400)); // the upstream has spoken unasked by now
      s.end(get(P, "/b"));
      await c.closed;
      expect(c.text()).toContain("seen /b");
      expect(c.text()).not.toContain("poisoned");
      expect(idle.connections).toBe(2);
    } finally {
      await t.close();
      await idle.close();
    }
  });

  it("a kept connection the upstream drops as the next request arrives: a bodiless request is sent once more on a new one, a request with a body is not", async () => {
    const seen = new WeakMap<Socket, number>();
    const up = await rawUpstream({
      answer: (soFar, s) => {
        const heads = [...soFar.matchAll(/(GET|POST) (\S+) HTTP/g)].map((m) => m[2]!);
        if ((seen.get(s) ?? 0) === heads.length) return undefined;
        seen.set(s, heads.length);
        // The second request on any connection finds it closing (its keep-alive ran out).
        if (heads.length === 2) return void s.destroy();
        const text = `seen ${heads.at(-1)}`;
        return `HTTP/1.1 200 OK\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
      },
    });
    const t = await testGate([`127.0.0.1:${up.port}`]);
    try {
      const P = up.port;
      const answers = await inTurn(t, [get(P, "/a"), get(P, "/b"), `POST http://127.0.0.1:${P}/c HTTP/1.1\r\nHost: 127.0.0.1:${P}\r\nContent-Length: 5\r\n\r\nhello`]);
      expect(answers.slice(0, 2)).toEqual(["HTTP/1.1 200 OK seen /a", "HTTP/1.1 200 OK seen /b"]);
      // /b went again on a second connection; /c, with a body, on that kept one, which dropped it: a 502, not a replay.
      expect(answers[2]).toMatch(/^HTTP\/1\.1 502 /);
      expect(up.connections).toBe(2);
      expect(up.received().match(/GET \/b /g)).toHaveLength(2);
      expect(up.received().match(/POST \/c /g)).toHaveLength(1);
      // Each request checked and recorded once.
      const allowed = t.events.filter((e) => e.decision === "allowed" && e.outcome === undefined).map((e) => new URL(e.asked).pathname);
      expect(allowed).toEqual(["/a", "/b", "/c"]);
    } finally {
      await t.close();
      await up.close();
    }
  });

  it("a kept connection is never used for another host, port or grant on the same address", async () => {
    const up = await lenientUpstream();
    const t = await testGate(["a.test", "b.test", `127.0.0.1:${up.port}`].map((h) => (h.includes(":") ? h : `${h}:${up.port}`)), { names: { "a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"] } });
    try {
      const P = up.port;
      const answers = await inTurn(t, [get(P, "/1", `a.test:${P}`), get(P, "/2", `b.test:${P}`), get(P, "/3", `a.test:${P}`), get(P, "/4", `127.0.0.1:${P}`), get(P, "/5", `b.test:${P}`)]);
      expect(answers).toHaveLength(5);
      // Each upstream connection carried one Host only.
      const hostsOf = new Map<number, Set<string>>();
      for (const r of up.requests) hostsOf.set(r.connection, (hostsOf.get(r.connection) ?? new Set()).add(r.headers.host!));
      for (const hs of hostsOf.values()) expect(hs.size).toBe(1);
      expect(up.connections).toBe(3);
    } finally {
      await t.close();
      await up.close();
    }
  });
});
