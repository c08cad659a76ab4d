import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scratch, type Scratch } from "../support/fs.js";
import { sandboxSh } from "../support/vak.js";

// The sandbox's own resolver (native/resolver.c) on 127.0.0.1:53: every
// lookup fails at once, and vak names the name. It reads what the command
// sends it, so it is attacked here like any parser of hostile input; and it is
// a process in the sandbox's pid namespace, which the command must not be able
// to stop or take over. Every packet stays in the sandbox's own namespace.
describe("name lookups inside the sandbox", () => {
  let s: Scratch;
  beforeAll(() => {
    s = scratch();
  });
  afterAll(() => s.cleanup());

  const timed = (label: string, cmd: string) => `t0=$(date +%s%N); ${cmd} >/dev/null 2>&1; echo "${label} rc=$? ms=$(( ($(date +%s%N) - t0) / 1000000 ))"`;

  it("getent, Python and Node fail in well under 2 s with no network, and vak names each host and the grant", async () => {
    const r = await sandboxSh(s.ws, [
      timed("getent", "getent hosts registry.npmjs.org"),
      timed("python", `python3 -c 'import socket; socket.getaddrinfo("pypi.org", 443)'`),
      timed("node", `node -e 'require("dns").lookup("crates.io", (e) => process.exit(e ? 1 : 0))'`),
      timed("node-resolve", `node -e 'require("dns").resolve4("example.org", (e) => process.exit(e ? 1 : 0))'`),
    ].join("; "));
    for (const label of ["getent", "python", "node", "node-resolve"]) {
      const m = new RegExp(`${label} rc=(\\d+) ms=(\\d+)`).exec(r.stdout);
      expect(m, r.stdout + r.stderr).not.toBeNull();
      expect(Number(m![1]), label).not.toBe(0);
      expect(Number(m![2]), label).toBeLessThan(2000);
    }
    for (const [host, grant] of [["registry.npmjs.org", "--profile npm"], ["pypi.org", "--profile python"], ["crates.io", "--profile rust"], ["example.org", ""]])
      expect(r.stderr).toContain(`vak: a lookup of ${host} was answered "no such name": this sandbox has no network; --allow-net ${host} would reach it${grant ? ` (or ${grant})` : ""}`);
  });

  it("malformed queries (short, a response, compression pointers, oversized labels and names, other opcodes) get an error or nothing, and the resolver keeps answering", async () => {
    const r = await sandboxSh(s.ws, `python3 -c '
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.connect(("127.0.0.1", 53))
def ask(pkt):
    s.send(pkt)
    try: return s.recv(4096)
    except socket.timeout: return None
q = lambda name, flags=0x0100, qd=1: struct.pack(">HHHHHH", 0x1234, flags, qd, 0, 0, 0) + name + b"\\x00\\x01\\x00\\x01"
cases = {
  "short": b"\\x12\\x34\\x01",
  "response": q(b"\\x01a\\x00", flags=0x8100),
  "pointer": q(b"\\xc0\\x0c"),
  "pointer-loop": struct.pack(">HHHHHH", 1, 0x100, 1, 0, 0, 0) + b"\\xc0\\x0c\\x00\\x01\\x00\\x01",
  "label-64": q(b"\\x40" + b"a" * 64 + b"\\x00"),
  "name-300": q(b"".join(b"\\x3f" + b"b" * 63 for _ in range(5)) + b"\\x00"),
  "truncated": q(b"\\x05abc"),
  "no-question": q(b"", qd=0)[:12],
  "two-questions": q(b"\\x01a\\x00", qd=2),
  "status-opcode": q(b"\\x01a\\x00", flags=0x1000),
}
for k, pkt in cases.items():
    a = ask(pkt)
    print(k, "silent" if a is None else "rcode=%d qd=%d an=%d id=%s" % (a[3] & 15, a[5], a[7], a[:2].hex()))
a = ask(q(b"\\x07example\\x03com\\x00"))
print("after", "rcode=%d qd=%d an=%d" % (a[3] & 15, a[5], a[7]))
'`);
    const line = (k: string) => new RegExp(`^${k} (.*)$`, "m").exec(r.stdout)?.[1];
    expect(line("short")).toBe("silent");
    expect(line("response")).toBe("silent");
    for (const k of ["pointer", "pointer-loop", "label-64", "name-300", "truncated", "no-question", "two-questions"]) expect(line(k), k).toMatch(/^rcode=1 qd=0 an=0/);
    expect(line("status-opcode")).toMatch(/^rcode=4 qd=0 an=0/);
    expect(line("after")).toBe("rcode=3 qd=1 an=0");
  });

  it("every query type (A, AAAA, ANY, TXT, HTTPS, AXFR, with EDNS) on 127.0.0.1 and ::1 is answered at once; TCP, raw sockets and every route out are refused", async () => {
    const r = await sandboxSh(s.ws, `python3 -c '
import socket, struct, time
def q(qtype, edns):
    pkt = struct.pack(">HHHHHH", 0x4242, 0x0100, 1, 0, 0, 1 if edns else 0) + b"\\x07example\\x03com\\x00" + struct.pack(">HH", qtype, 1)
    return pkt + (b"\\x00" + struct.pack(">HHIH", 41, 4096, 0, 0) if edns else b"")
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    for qtype in (1, 28, 255, 16, 65, 252):
        for edns in (False, True):
            s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1); s.connect((addr, 53)); t = time.time(); s.send(q(qtype, edns))
            a = s.recv(4096)
            print("udp %s %d %d rcode=%d an=%d ns=%d ar=%d slow=%d" % (addr, qtype, edns, a[3] & 15, a[7], a[9], a[11], time.time() - t > 0.2))
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    try: socket.socket(fam, socket.SOCK_STREAM).connect((addr, 53)); print("TCP CONNECTED", addr)
    except OSError as e: print("tcp", addr, "refused")
try: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP); print("RAW OPEN")
except OSError: print("raw refused")
for dst in ("10.0.0.1", "169.254.169.254", "8.8.8.8"):
    try: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", (dst, 53)); print("SENT", dst)
    except OSError as e: print("unreachable", dst, e.errno)
'`);
    const udp = r.stdout.split("\n").filter((l) => l.startsWith("udp "));
    expect(udp, r.stdout + r.stderr).toHaveLength(24);
    for (const l of udp) expect(l).toMatch(/ rcode=3 an=0 ns=0 ar=0 slow=0$/);
    expect(r.stdout).not.toMatch(/CONNECTED|RAW OPEN|SENT/);
    expect(r.stdout.match(/^unreachable /gm)).toHaveLength(3);
  });

  it("a looked-up name that is no host name (spaces, flags, controls) is quoted and never offered as a grant", async () => {
    const r = await sandboxSh(s.ws, `python3 -c '
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1); s.connect(("127.0.0.1", 53))
for name in (b"x.com --full-access --allow-net=evil", b"x.com\\ny", b"ok.test"):
    s.send(struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l for l in name.split(b".")) + b"\\x00\\x00\\x01\\x00\\x01"); s.recv(512)
'`);
    expect(r.stderr).not.toContain("--full-access --allow-net=evil would reach it");
    expect(r.stderr).toContain(`a lookup of "x.com --full-access --allow-net=evil" inside the sandbox was answered "no such name": it is not a host name, and no grant can name it`);
    expect(r.stderr).toContain(`a lookup of "x.com\\ny" inside the sandbox`);
    expect(r.stderr).toContain("--allow-net ok.test would reach it");
  });

  it("a flood of distinct names leaves a bounded report and a bounded set of lines", async () => {
    const r = await sandboxSh(s.ws, `python3 -c '
import socket
for i in range(3000):
    try: socket.getaddrinfo("host%d.flood.test" % i, 80)
    except OSError: pass
print("done")
'`);
    expect(r.stdout).toContain("done");
    expect(r.stderr.match(/vak: a lookup of host\d+\.flood\.test/g)!.length).toBeLessThanOrEqual(12);
    expect(r.stderr).toMatch(/… and \d+ more refusals of other kinds/);
  }, 120_000);

  it("the command cannot signal, trace or take over the resolver, nor bind its port", async () => {
    const r = await sandboxSh(s.ws, `
for p in /proc/[0-9]*; do
  pid=\${p#/proc/}
  [ "$pid" = "$$" ] && continue
  kill -9 "$pid" 2>/dev/null && echo "KILLED $pid ($(cat $p/comm 2>/dev/null))"
done
python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try: s.bind(("127.0.0.1", 53)); print("BOUND")
except OSError as e: print("bind", e.errno)
try: s.bind(("0.0.0.0", 53)); print("BOUND ANY")
except OSError as e: print("bind any", e.errno)
try: socket.getaddrinfo("still-answering.test", 80)
except OSError: print("still answered")
'`);
    expect(r.stdout).not.toContain("KILLED");
    expect(r.stdout).not.toContain("BOUND");
    expect(r.stdout).toContain("still answered");
    expect(r.stderr).toContain("still-answering.test");
  });
});
