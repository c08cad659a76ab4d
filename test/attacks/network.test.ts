import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// Host services the test starts on loopback. Without a network grant, nothing
// inside the sandbox may reach any of them, by any socket family. Every packet
// here stays on this machine: the only addresses used are 127.0.0.1 and local
// socket paths.
describe("no network without a grant", () => {
  let s: Scratch;
  const hits: string[] = [];
  let tcp: Server;
  let udp: UdpSocket;
  let unixOutside: Server;
  let unixInside: Server;
  let abstract: Server;
  let tcpPort = 0;
  let udpPort = 0;
  const abstractName = `vak-test-${process.pid}`;

  const listen = (srv: Server, where: string | number, label: string) =>
    new Promise<void>((resolve) => {
      srv.on("connection", (c) => {
        hits.push(label);
        c.destroy();
      });
      if (typeof where === "number") srv.listen(where, "127.0.0.1", () => resolve());
      else srv.listen(where, () => resolve());
    });

  beforeAll(async () => {
    s = scratch();
    tcp = createServer();
    await listen(tcp, 0, "tcp");
    tcpPort = (tcp.address() as { port: number }).port;
    udp = createSocket("udp4");
    udp.on("message", () => hits.push("udp"));
    await new Promise<void>((r) => udp.bind(0, "127.0.0.1", () => r()));
    udpPort = udp.address().port;
    unixOutside = createServer();
    await listen(unixOutside, join(s.outside, "host.sock"), "unix-outside");
    unixInside = createServer();
    await listen(unixInside, join(s.ws, "host.sock"), "unix-inside");
    abstract = createServer();
    await listen(abstract, `\0${abstractName}`, "abstract");
  });
  afterAll(async () => {
    for (const srv of [tcp, unixOutside, unixInside, abstract]) srv.close();
    udp.close();
    s.cleanup();
  });

  /** Runs one probe in python inside the sandbox and returns what it printed. */
  const probe = async (code: string) => {
    const r = await sandboxSh(s.ws, `python3 -c '${code.replace(/'/g, `'"'"'`)}'`);
    return r.stdout.trim();
  };
  const attempt = (body: string) => `
import socket, errno
try:
${body.split("\n").map((l) => "    " + l).join("\n")}
    print("REACHED")
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))
`;

  it("TCP to a loopback listener on the host", async () => {
    const out = await probe(attempt(`s = socket.socket(); s.settimeout(2); s.connect(("127.0.0.1", ${tcpPort}))`));
    expect(out).toMatch(/^refused/);
  });

  it("TCP over IPv6 and by the other spellings of loopback", async () => {
    for (const host of ["::1", "::ffff:127.0.0.1"]) {
      const out = await probe(attempt(`s = socket.socket(socket.AF_INET6); s.settimeout(2); s.connect(("${host}", ${tcpPort}))`));
      expect(out).toMatch(/^refused/);
    }
    for (const host of ["127.1", "2130706433", "0x7f000001", "localhost"]) {
      const out = await probe(attempt(`s = socket.create_connection(("${host}", ${tcpPort}), timeout=2)`));
      expect(out).toMatch(/^refused|gaierror/i);
    }
  });

  // UDP exists inside (for the sandbox's own resolver), in a namespace with nothing but its own loopback.
  it("UDP to a loopback listener on the host reaches the sandbox's own loopback, not the host's", async () => {
    const sent = await probe(attempt(`s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(20): s.sendto(b"x", ("127.0.0.1", ${udpPort}))
s.connect(("127.0.0.1", ${udpPort})); s.send(b"x")`));
    await new Promise((r) => setTimeout(r, 300));
    expect(hits).not.toContain("udp");
    // What was sent went to a port nothing listens on in the sandbox's namespace.
    expect(sent).toMatch(/^REACHED|^refused ECONNREFUSED/);
  });

  it("UDP to anywhere else has no route, by sendto and by connect", async () => {
    const out = await probe(attempt(`s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("10.255.255.1", 53))`));
    expect(out).toBe("refused ENETUNREACH");
    const v6 = await probe(attempt(`s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s.sendto(b"x", ("2001:db8::1", 53))`));
    expect(v6).toBe("refused ENETUNREACH");
    const connected = await probe(attempt(`s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.255.255.1", 53))`));
    expect(connected).toBe("refused ENETUNREACH");
  });

  it("DNS: no name resolves beyond /etc/hosts; the sandbox's resolver says so at once, and vak names the name", async () => {
    const r = await sandboxSh(s.ws, `python3 -c '
import socket, time
t = time.monotonic()
try:
    print(socket.getaddrinfo("example.com", 80))
except OSError as e:
    print("refused", type(e).__name__, round(time.monotonic() - t, 2))
'`);
    expect(r.stdout).toMatch(/^refused gaierror (\d+\.\d+)/);
    expect(Number(/gaierror (\S+)/.exec(r.stdout)![1])).toBeLessThan(1);
    expect(r.stderr).toContain('vak: a lookup of example.com was answered "no such name": this sandbox has no network; --allow-net example.com would reach it');
    // A resolver of the host's, at any address, is not reachable.
    const direct = await probe(attempt(`s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.53", 53)); s.settimeout(1); s.recv(512)`));
    expect(direct).toMatch(/^refused/);
  });

  it("a TCP socket without a grant is refused with a line that says which grant would reach a host", async () => {
    const r = await sandboxSh(s.ws, `python3 -c 'import socket; socket.socket()' 2>/dev/null || echo refused`);
    expect(r.stdout.trim()).toBe("refused");
    expect(r.stderr).toContain("vak: refused socket (a TCP socket): no network grant: --allow-net HOST reaches a host, through the egress gate");
  });

  it("a server cannot listen on TCP, even with a grant, and is told why", async () => {
    const r = await sandboxSh(s.ws, `python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 8080))' 2>/dev/null || echo refused`, ["--allow-net", "127.0.0.1:9"]);
    expect(r.stdout.trim()).toBe("refused");
    expect(r.stderr).toContain("vak: refused bind 127.0.0.1:8080: listening for TCP connections: nothing can connect to a sandbox");
  });

  it("netlink sockets", async () => {
    const out = await probe(attempt(`s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)`));
    expect(out).toMatch(/^refused/);
  });

  it("raw and packet sockets", async () => {
    expect(await probe(attempt(`socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)`))).toMatch(/^refused/);
    expect(await probe(attempt(`socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)`))).toMatch(/^refused/);
  });

  it("an abstract unix socket on the host", async () => {
    const out = await probe(attempt(`s = socket.socket(socket.AF_UNIX); s.connect("\\0${abstractName}")`));
    expect(out).toMatch(/^refused/);
  });

  it("a pathname unix socket outside the grants", async () => {
    const out = await probe(attempt(`s = socket.socket(socket.AF_UNIX); s.connect("${join(s.outside, "host.sock")}")`));
    expect(out).toMatch(/^refused/);
  });

  it("a host service's unix socket inside the writable workspace", async () => {
    const out = await probe(attempt(`s = socket.socket(socket.AF_UNIX); s.connect("host.sock")`));
    expect(out).toMatch(/^refused EACCES/);
  });

  it("a datagram socketpair cannot sendto a host socket path", async () => {
    const out = await probe(attempt(`a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b"x", "host.sock")`));
    expect(out).toMatch(/^refused/);
    const dgram = await probe(attempt(`a = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b"x", "host.sock")`));
    expect(dgram).toMatch(/^refused/);
  });

  it("a unix SOCK_RAW socket (which the kernel makes a datagram socket) is refused too", async () => {
    expect(await probe(attempt(`a = socket.socket(socket.AF_UNIX, socket.SOCK_RAW); a.sendto(b"x", "host.sock")`))).toMatch(/^refused/);
    expect(await probe(attempt(`a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_RAW)`))).toMatch(/^refused/);
  });

  it("none of the host listeners saw a connection or a packet", () => {
    expect(hits).toEqual([]);
  });

  it("unix sockets the sandbox creates itself still work", async () => {
    const out = await probe(`
import socket, os
srv = socket.socket(socket.AF_UNIX); srv.bind("own.sock"); srv.listen()
c = socket.socket(socket.AF_UNIX); c.connect(os.path.abspath("own.sock")); a, _ = srv.accept(); c.send(b"ok"); print(a.recv(2).decode())
x, y = socket.socketpair(); x.send(b"pair"); print(y.recv(4).decode())
`);
    expect(out).toBe("ok\npair");
  });
});
