// Egress gate: throughput through the whole path (a client in the sandbox, the
// gate, the upstream), down and up, over CONNECT and over plain HTTP (its
// bodies spliced: src/net/spliced.ts), for a Content-Length download, an upload,
// a chunked download and many small requests on one keep-alive connection,
// against the same client directly on loopback,
// a download of raw bytes through a spliced tunnel (plain HTTP inside a CONNECT is decided request by request,
// as plain proxy requests are, so the speed of a tunnel is measured with bytes that are not HTTP),
// and through a minimal one-hop splice forwarder (bench/forwarder.c: the floor
// for any proxy here), and the time to open 200 concurrent CONNECT tunnels
// from inside.
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { existsSync, mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeTimes } from "./measure.js";

const MB = Number(process.env.BENCH_EGRESS_MB ?? 512);
const UP_MB = Number(process.env.BENCH_EGRESS_UP_MB ?? 256);
const ROUNDS = Number(process.env.BENCH_EGRESS_ROUNDS ?? 3);
const SMALL_REQUESTS = Number(process.env.BENCH_EGRESS_SMALL ?? 1000);

// N sequential GETs of /small on one keep-alive connection: direct, through the gate as plain HTTP
// (absolute-form), or inside one CONNECT tunnel. Prints requests per second.
const SMALL_SCRIPT = `import { connect } from "node:net";
const [mode, port, n] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const direct = mode === "direct";
const s = connect(direct ? port : 3128, "127.0.0.1");
await new Promise((r, j) => (s.once("connect", r), s.once("error", j)));
s.setNoDelay(true);
let buf = Buffer.alloc(0);
let wake = () => {};
s.on("data", (d) => ((buf = Buffer.concat([buf, d])), wake()));
s.on("error", (e) => { console.error(e.message); process.exit(1); });
const until = async (test) => { for (;;) { const r = test(); if (r !== undefined) return r; await new Promise((w) => (wake = w)); } };
const response = () => until(() => {
  const end = buf.indexOf("\\r\\n\\r\\n");
  if (end < 0) return undefined;
  const head = buf.subarray(0, end).toString("latin1");
  const m = /content-length: *([0-9]+)/i.exec(head);
  const len = m ? Number(m[1]) : 0;
  if (buf.length < end + 4 + len) return undefined;
  if (!head.startsWith("HTTP/1.1 200")) { console.error(head); process.exit(1); }
  buf = buf.subarray(end + 4 + len);
  return head;
});
if (mode === "connect") {
  s.write("CONNECT 127.0.0.1:" + port + " HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\n\\r\\n");
  await until(() => { const end = buf.indexOf("\\r\\n\\r\\n"); if (end < 0) return undefined; buf = buf.subarray(end + 4); return true; });
}
const target = mode === "plain" ? "http://127.0.0.1:" + port + "/small" : "/small";
const req = Buffer.from("GET " + target + " HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\n\\r\\n");
for (let i = 0; i < 20; i++) (s.write(req), await response()); // warm
const t = performance.now();
for (let i = 0; i < n; i++) (s.write(req), await response());
console.log((n / ((performance.now() - t) / 1e3)).toFixed(1));
s.destroy();
`;

// One download by a Node client: raw bytes straight from the raw server (direct), the same through a spliced
// CONNECT tunnel (tunnel: the server speaks first, so nothing of HTTP is read), or HTTP through the gate (plain).
// Prints bytes per second of body, from the connect to the last byte.
const STREAM_SCRIPT = `import { connect } from "node:net";
const [mode, port, mb] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const t = performance.now();
const s = connect(mode === "direct" ? port : 3128, "127.0.0.1");
await new Promise((r, j) => (s.once("connect", r), s.once("error", j)));
if (mode === "tunnel") s.write("CONNECT 127.0.0.1:" + port + " HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\n\\r\\n");
if (mode === "plain") s.write("GET http://127.0.0.1:" + port + "/ HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\n\\r\\n");
let head = mode === "direct" ? Buffer.alloc(0) : undefined;
let body = 0;
const want = mb * 1048576;
await new Promise((resolve, reject) => {
  s.on("data", (d) => {
    if (head === undefined) {
      const end = d.indexOf("\\r\\n\\r\\n");
      if (end < 0) return reject(new Error("an answer's head in pieces: " + d.subarray(0, 100)));
      if (!d.subarray(0, 12).toString().startsWith("HTTP/1.1 200")) return reject(new Error(String(d.subarray(0, 200))));
      head = d.subarray(0, end);
      d = d.subarray(end + 4);
    }
    body += d.length;
    if (body >= want) resolve();
  });
  s.on("error", reject);
  s.on("end", () => (body >= want ? resolve() : reject(new Error("ended after " + body + " bytes"))));
});
console.log((body / ((performance.now() - t) / 1e3)).toFixed(0));
s.destroy();
`;

/** A server that sends MB MiB of raw bytes to whoever connects, then closes. */
function serveRaw() {
  const chunk = Buffer.alloc(1 << 20, 120);
  const server = createNetServer((c) => {
    c.on("error", () => {});
    writeTimes(c, chunk, MB);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function serve() {
  const chunk = Buffer.alloc(1 << 20, 120);
  const server = createServer((req, res) => {
    if (req.url === "/small") return res.end("ok");
    // A download without a length: Node frames it chunked (1 MiB chunks).
    const chunked = req.url === "/chunked";
    if (req.method === "PUT") {
      // An upload: taken and dropped, then a short answer.
      req.on("data", () => {});
      req.on("end", () => res.end("ok"));
      return;
    }
    res.writeHead(200, chunked ? {} : { "content-length": MB << 20 });
    writeTimes(res, chunk, MB);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function run(cmd, args, opts) {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"], ...opts });
    let out = "";
    c.stdout.on("data", (d) => (out += d));
    c.on("error", reject);
    c.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${out}`))));
  });
}

function freePort() {
  return new Promise((resolve) => {
    const s = createNetServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Builds and starts bench/forwarder.c in front of the server; resolves with its port and a stop function. */
async function forwarder(dir, target) {
  const bin = join(dir, "forwarder");
  execFileSync("cc", ["-O2", "-pthread", "-o", bin, fileURLToPath(new URL("forwarder.c", import.meta.url))]);
  const port = await freePort();
  const child = spawn(bin, [String(port), String(target)], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise((resolve, reject) => {
    child.stdout.once("data", resolve);
    child.once("exit", (code) => reject(new Error(`the forwarder exited ${code}`)));
  });
  return { port, stop: () => child.kill("SIGKILL") };
}

export async function egressBench({ vak, env }) {
  const server = await serve();
  const port = server.address().port;
  const raw = await serveRaw();
  const rawPort = raw.address().port;
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-egress-"));
  let floor;
  let host;
  try {
    execFileSync("curl", ["--version"], { stdio: "ignore" });
    floor = await forwarder(ws, port);
    const url = `http://127.0.0.1:${port}/`;
    const curl = ["-s", "-o", "/dev/null", "-w", "%{speed_download}"];
    const direct = [];
    const forwarded = [];
    const gated = [];
    const plain = [];
    const upload = join(ws, "upload.bin");
    truncateSync((writeFileSync(upload, ""), upload), UP_MB << 20); // sparse: reading it costs nothing
    const put = ["-s", "-o", "/dev/null", "-w", "%{speed_upload}", "-T", upload];
    const upDirect = [];
    const upGated = [];
    const upPlain = [];
    const chunkedUrl = `http://127.0.0.1:${port}/chunked`;
    const chDirect = [];
    const chGated = [];
    const chPlain = [];
    // Many small requests on one keep-alive connection: a script that speaks HTTP/1.1 on a raw socket.
    const small = join(ws, "small.mjs");
    writeFileSync(small, SMALL_SCRIPT);
    const N = SMALL_REQUESTS;
    const smallRun = (mode) => {
      const args = [small, mode, String(port), String(N)];
      return mode === "direct" ? run(process.execPath, args, { env }) : run(process.execPath, [vak, "exec", "--allow-net", `127.0.0.1:${port}`, "--", "node", ...args], { env, cwd: ws });
    };
    const stream = join(ws, "stream.mjs");
    writeFileSync(stream, STREAM_SCRIPT);
    const grants = ["--allow-net", `127.0.0.1:${port}`, "--allow-net", `127.0.0.1:${rawPort}`];
    const streamRun = (mode) =>
      mode === "direct"
        ? run(process.execPath, [stream, mode, String(rawPort), String(MB)], { env })
        : run(process.execPath, [vak, "exec", ...grants, "--", "node", stream, mode, String(mode === "tunnel" ? rawPort : port), String(MB)], { env, cwd: ws });
    const stDirect = [];
    const stTunnel = [];
    const stPlain = [];
    const smDirect = [];
    const smGated = [];
    const smPlain = [];
    // The same through the resident host (src/resident/): its gate, its journal's group commit.
    const client = join(vak, "..", "..", "build", "Release", "vak-client");
    const rt = join(ws, "rt");
    mkdirSync(rt, { mode: 0o700 });
    const hostEnv = { ...env, XDG_RUNTIME_DIR: rt, VAK_HOST_IDLE_SECONDS: "600" };
    host = existsSync(client) ? spawn(process.execPath, [vak, "host"], { env: hostEnv, stdio: "ignore" }) : undefined;
    const smHost = [];
    const hostRun = (mode) => run(client, ["exec", "--allow-net", `127.0.0.1:${port}`, "--", "node", small, mode, String(port), String(N)], { env: { ...hostEnv, VAK_RESIDENT: "only" }, cwd: ws });
    const loadBefore = loadavg();
    const exec = (args) => run(process.execPath, [vak, "exec", "--allow-net", `127.0.0.1:${port}`, "--", "curl", ...args], { env, cwd: ws });
    for (let i = 0; i < ROUNDS; i++) {
      direct.push(Number(await run("curl", [...curl, url], { env })));
      forwarded.push(Number(await run("curl", [...curl, `http://127.0.0.1:${floor.port}/`], { env })));
      gated.push(Number(await exec([...curl, "--proxytunnel", url])));
      plain.push(Number(await exec([...curl, url])));
      upDirect.push(Number(await run("curl", [...put, url], { env })));
      upGated.push(Number(await exec([...put, "--proxytunnel", url])));
      upPlain.push(Number(await exec([...put, url])));
      chDirect.push(Number(await run("curl", [...curl, chunkedUrl], { env })));
      chGated.push(Number(await exec([...curl, "--proxytunnel", chunkedUrl])));
      chPlain.push(Number(await exec([...curl, chunkedUrl])));
      stDirect.push(Number(await streamRun("direct")));
      stTunnel.push(Number(await streamRun("tunnel")));
      stPlain.push(Number(await streamRun("plain")));
      smDirect.push(Number(await smallRun("direct")));
      smGated.push(Number(await smallRun("connect")));
      smPlain.push(Number(await smallRun("plain")));
      if (host) smHost.push(Number(await hostRun("plain")), Number(await hostRun("connect")));
    }
    const loadAfter = loadavg();
    const best = (xs) => Math.max(...xs) / 1e6;
    const share = (xs, of) => `${((100 * best(xs)) / best(of)).toFixed(0)}%`;
    const mbs = (xs) => `${best(xs).toFixed(0).padStart(6)} MB/s`;
    console.log(`\negress gate: throughput over loopback (best of ${ROUNDS}, interleaved): ${MB} MiB down, ${UP_MB} MiB up`);
    console.log(`  download, direct curl                        ${mbs(direct)}   (baseline)`);
    console.log(`  download, a minimal splice forwarder         ${mbs(forwarded)}   ${share(forwarded, direct)} of direct (one hop, no checks: the floor)`);
    console.log(`  download in vak exec, CONNECT (HTTP inside)  ${mbs(gated)}   ${share(gated, direct)} of direct, ${share(gated, forwarded)} of the forwarder`);
    console.log(`  download in vak exec, plain HTTP             ${mbs(plain)}   ${share(plain, direct)} of direct, ${share(plain, gated)} of CONNECT`);
    console.log(`  upload, direct curl -T                       ${mbs(upDirect)}   (baseline)`);
    console.log(`  upload in vak exec, CONNECT                  ${mbs(upGated)}   ${share(upGated, upDirect)} of direct`);
    console.log(`  upload in vak exec, plain HTTP               ${mbs(upPlain)}   ${share(upPlain, upDirect)} of direct, ${share(upPlain, upGated)} of CONNECT`);
    console.log(`  chunked download, direct curl                ${mbs(chDirect)}   (baseline)`);
    console.log(`  chunked download in vak exec, CONNECT        ${mbs(chGated)}   ${share(chGated, chDirect)} of direct`);
    console.log(`  chunked download in vak exec, plain HTTP     ${mbs(chPlain)}   ${share(chPlain, chDirect)} of direct, ${share(chPlain, chGated)} of CONNECT`);
    console.log(`  download by a Node client, direct, raw bytes  ${mbs(stDirect)}   (baseline)`);
    console.log(`  ... in vak exec, raw bytes, spliced tunnel   ${mbs(stTunnel)}   ${share(stTunnel, stDirect)} of direct`);
    console.log(`  ... in vak exec, plain HTTP through the gate ${mbs(stPlain)}   ${share(stPlain, stDirect)} of direct, ${share(stPlain, stTunnel)} of the tunnel (target: at least 80% of a tunnel)`);
    console.log("  (plain HTTP inside a CONNECT is decided request by request, as a plain request is: the tunnel lines above carry HTTP)");
    const rps = (xs) => `${best(xs).toFixed(0).padStart(6)} req/s`;
    const perReq = (xs) => `${(1e3 / best(xs)).toFixed(3)} ms each`;
    const rate = (xs) => xs.map((x) => x * 1e6); // best() divides by 1e6
    console.log(`  ${N} small requests, one keep-alive connection, direct   ${rps(rate(smDirect))}   ${perReq(rate(smDirect))} (baseline)`);
    console.log(`  ... in vak exec, inside one CONNECT tunnel             ${rps(rate(smGated))}   ${perReq(rate(smGated))}, ${share(rate(smGated), rate(smDirect))} of direct`);
    console.log(`  ... in vak exec, plain HTTP through the gate           ${rps(rate(smPlain))}   ${perReq(rate(smPlain))}, ${share(rate(smPlain), rate(smDirect))} of direct, ${share(rate(smPlain), rate(smGated))} of CONNECT`);
    if (host) {
      const hp = smHost.filter((_, i) => i % 2 === 0), hc = smHost.filter((_, i) => i % 2 === 1);
      console.log(`  ... through the resident host, inside one CONNECT tunnel ${rps(rate(hc))}   ${perReq(rate(hc))}`);
      console.log(`  ... through the resident host, plain HTTP              ${rps(rate(hp))}   ${perReq(rate(hp))}, ${share(rate(hp), rate(hc))} of its CONNECT`);
    } else console.log("  (the resident host's client is not built: no figure through the host)");
    console.log("  target: at least 80% of direct");
    const la = (l) => l.map((x) => x.toFixed(1)).join(" ");
    console.log(`  load average (1, 5, 15 min): ${la(loadBefore)} before, ${la(loadAfter)} after (2 cores)`);

    const script = join(ws, "tunnels.mjs");
    writeFileSync(
      script,
      `import { connect } from "node:net";
const t = performance.now();
await Promise.all(Array.from({ length: 200 }, () => new Promise((resolve, reject) => {
  const s = connect(3128, "127.0.0.1", () => s.write("CONNECT 127.0.0.1:${port} HTTP/1.1\\r\\n\\r\\n"));
  s.once("data", (d) => (String(d).startsWith("HTTP/1.1 200") ? resolve(s) : reject(new Error(String(d)))));
  s.on("error", reject);
})));
console.log((performance.now() - t).toFixed(1));
process.exit(0);
`,
    );
    const times = [];
    for (let i = 0; i < 3; i++) times.push(Number(await run(process.execPath, [vak, "exec", "--allow-net", `127.0.0.1:${port}`, "--", "node", script], { env, cwd: ws })));
    console.log(`  200 concurrent CONNECT tunnels opened and held: median ${times.sort((a, b) => a - b)[1].toFixed(1)} ms`);
  } finally {
    host?.kill("SIGTERM");
    floor?.stop();
    server.close();
    raw.close();
    rmSync(ws, { recursive: true, force: true });
  }
}

// Run alone: node bench/egress.js (after npm run build); BENCH_EGRESS_MB, BENCH_EGRESS_ROUNDS, BENCH_EGRESS_SMALL size it.
if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split("/").pop())) {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  await egressBench({ vak: fileURLToPath(new URL("../bin/vak.cjs", import.meta.url)), env });
}
