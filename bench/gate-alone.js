// The egress gate alone, in this process (dist/ modules: run `npm run build:js` first), with the real spool as its record; a TCP listener hands each
// accepted connection to the gate as the relay would. A client process runs small requests (plain or CONNECT)
// and chunked downloads (curl). Prints req/s, MB/s and load.
// Without the sandbox and vak exec's start-up, a CPU profile (node --cpu-prof bench/gate-alone.js) shows the gate's own work.
// N, ROUNDS, MB size it; ONLY=small or ONLY=chunked picks a part; PORT uses a server already running there (another
// process, so that the profile is the gate's only); SINK=none drops the record (what the journal path costs).
import { spawn } from "node:child_process";
import { createServer as createHttp } from "node:http";
import { createServer as createNet } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
const WT = fileURLToPath(new URL("..", import.meta.url));
const { EgressGate } = await import(`${WT}/dist/net/egress-gate.js`);
const { sendClient, socketFd } = await import(`${WT}/dist/net/engine.js`);
const { parseNetGrants } = await import(`${WT}/dist/policy/net-grants.js`);
const { Spool } = await import(`${WT}/dist/journal/spool.js`);
const N = Number(process.env.N ?? 2000), ROUNDS = Number(process.env.ROUNDS ?? 3), MB = Number(process.env.MB ?? 512);
const only = process.env.ONLY ?? "small,chunked";
const home = mkdtempSync(join(tmpdir(), "ph-gb-"));
process.env.XDG_STATE_HOME = join(home, "state");
const chunk = Buffer.alloc(1 << 20, 120);
const server = createHttp((req, res) => {
  if (req.url === "/small") return res.end("ok");
  res.writeHead(200, {});
  let i = 0;
  const write = () => { while (i < MB) { i++; if (!res.write(chunk)) return res.once("drain", write); } res.end(); };
  write();
});
let port;
if (process.env.PORT) port = Number(process.env.PORT);
else { await new Promise((r) => server.listen(0, "127.0.0.1", r)); port = server.address().port; }
const spool = Spool.start({ kind: "exec", title: "bench", workspace: home });
const actor = { component: "exec", identity: userInfo().username };
let soon;
const gate = new EgressGate({
  dir: join(home, "gate"),
  onEvent: (e) => {
    if (process.env.SINK === "none") return;
    const { component, generation, ...payload } = e;
    spool.append("egress", { component, identity: actor.identity }, generation, payload, false);
    soon ??= setTimeout(() => { soon = undefined; spool.sync().catch(() => {}); }, 20);
  },
  durable: () => spool.sync(),
});
await gate.listen();
const token = gate.register({ component: "exec", generation: 1, grants: parseNetGrants([`127.0.0.1:${port}`], []) });
const relay = createNet({ pauseOnConnect: true }, (s) => { sendClient(gate.socketPath, `VAK-TOKEN ${token}`, socketFd(s)); s.destroy(); });
await new Promise((r) => relay.listen(0, "127.0.0.1", r));
const rport = relay.address().port;
const small = join(home, "small.mjs");
writeFileSync(small, `import { connect } from "node:net";
const [mode, port, n, rport] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5])];
const s = connect(mode === "direct" ? port : rport, "127.0.0.1");
await new Promise((r, j) => (s.once("connect", r), s.once("error", j)));
s.setNoDelay(true);
let buf = Buffer.alloc(0); let wake = () => {};
s.on("data", (d) => ((buf = Buffer.concat([buf, d])), wake()));
s.on("error", (e) => { console.error(e.message); process.exit(1); });
const until = async (test) => { for (;;) { const r = test(); if (r !== undefined) return r; await new Promise((w) => (wake = w)); } };
const response = () => until(() => {
  const end = buf.indexOf("\\r\\n\\r\\n"); if (end < 0) return undefined;
  const head = buf.subarray(0, end).toString("latin1");
  const m = /content-length: *([0-9]+)/i.exec(head); const len = m ? Number(m[1]) : 0;
  if (buf.length < end + 4 + len) return undefined;
  if (!head.startsWith("HTTP/1.1 200")) { console.error(head); process.exit(1); }
  buf = buf.subarray(end + 4 + len); return head;
});
if (mode === "connect") {
  s.write("CONNECT 127.0.0.1:" + port + " HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\n\\r\\n");
  await until(() => { const end = buf.indexOf("\\r\\n\\r\\n"); if (end < 0) return undefined; buf = buf.subarray(end + 4); return true; });
}
const target = mode === "plain" ? "http://127.0.0.1:" + port + "/small" : "/small";
const req = Buffer.from("GET " + target + " HTTP/1.1\\r\\nHost: 127.0.0.1:" + port + "\\r\\n\\r\\n");
for (let i = 0; i < 20; i++) (s.write(req), await response());
const t = performance.now();
for (let i = 0; i < n; i++) (s.write(req), await response());
console.log((n / ((performance.now() - t) / 1e3)).toFixed(1));
s.destroy();
`);
function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = ""; c.stdout.on("data", (d) => (out += d));
    c.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${out}`))));
  });
}
const res = {}; const add = (k, v) => (res[k] ??= []).push(Number(v));
const l0 = loadavg();
for (let i = 0; i < ROUNDS; i++) {
  if (only.includes("small")) {
    add("small direct req/s", await run(process.execPath, [small, "direct", String(port), String(N), String(rport)]));
    add("small connect req/s", await run(process.execPath, [small, "connect", String(port), String(N), String(rport)]));
    add("small plain req/s", await run(process.execPath, [small, "plain", String(port), String(N), String(rport)]));
  }
  if (only.includes("chunked")) {
    const curl = ["-s", "-o", "/dev/null", "-w", "%{speed_download}", "--proxy", `http://127.0.0.1:${rport}`];
    add("chunked connect MB/s", (await run("curl", [...curl, "--proxytunnel", `http://127.0.0.1:${port}/chunked`])) / 1e6);
    add("chunked plain MB/s", (await run("curl", [...curl, `http://127.0.0.1:${port}/chunked`])) / 1e6);
  }
}
const l1 = loadavg();
const best = (k) => Math.max(...res[k]);
for (const k of Object.keys(res)) console.log(k.padEnd(24), best(k).toFixed(0).padStart(7), "  all:", res[k].map((x) => x.toFixed(0)).join(" "));
if (res["small plain req/s"]) console.log("small plain/connect", (100 * best("small plain req/s") / best("small connect req/s")).toFixed(0) + "%");
if (res["chunked plain MB/s"]) console.log("chunked plain/connect", (100 * best("chunked plain MB/s") / best("chunked connect MB/s")).toFixed(0) + "%");
console.log("load", l0.map((x) => x.toFixed(2)).join(" "), "->", l1.map((x) => x.toFixed(2)).join(" "));
await gate.close(); relay.close(); server.close(); clearTimeout(soon); await spool.sync(); await spool.sync(); try { spool.close(); } catch {} rmSync(home, { recursive: true, force: true });
