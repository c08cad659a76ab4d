// Egress gate: throughput through the whole path (a client in the sandbox, the
// gate, the upstream) against the same client fetching directly on loopback,
// and through a minimal one-hop splice forwarder (bench/forwarder.c: the floor
// for any proxy here), and the time to open 200 concurrent CONNECT tunnels
// from inside.
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MB = Number(process.env.BENCH_EGRESS_MB ?? 512);

function serve() {
  const chunk = Buffer.alloc(1 << 20, 120);
  const server = createServer((req, res) => {
    if (req.url === "/small") return res.end("ok");
    res.writeHead(200, { "content-length": MB << 20 });
    let i = 0;
    const write = () => {
      while (i < MB) {
        i++;
        if (!res.write(chunk)) return res.once("drain", write);
      }
      res.end();
    };
    write();
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
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-egress-"));
  let floor;
  try {
    execFileSync("curl", ["--version"], { stdio: "ignore" });
    floor = await forwarder(ws, port);
    const url = `http://127.0.0.1:${port}/`;
    const curl = ["-s", "-o", "/dev/null", "-w", "%{speed_download}"];
    const direct = [];
    const forwarded = [];
    const gated = [];
    const plain = [];
    for (let i = 0; i < 3; i++) {
      direct.push(Number(await run("curl", [...curl, url], { env })));
      forwarded.push(Number(await run("curl", [...curl, `http://127.0.0.1:${floor.port}/`], { env })));
      gated.push(Number(await run(process.execPath, [vak, "exec", "--allow-net", `127.0.0.1:${port}`, "--", "curl", ...curl, "--proxytunnel", url], { env, cwd: ws })));
      plain.push(Number(await run(process.execPath, [vak, "exec", "--allow-net", `127.0.0.1:${port}`, "--", "curl", ...curl, url], { env, cwd: ws })));
    }
    const best = (xs) => Math.max(...xs) / 1e6;
    console.log(`\negress gate: throughput, ${MB} MiB over loopback (best of 3, interleaved)`);
    console.log(`  direct curl                                  ${best(direct).toFixed(0).padStart(6)} MB/s   (baseline)`);
    const pct = (xs) => `${((100 * best(xs)) / best(direct)).toFixed(0)}% of direct`;
    console.log(`  curl through a minimal splice forwarder      ${best(forwarded).toFixed(0).padStart(6)} MB/s   ${pct(forwarded)} (one hop, no checks: the floor)`);
    console.log(`  curl in vak exec, CONNECT through the gate   ${best(gated).toFixed(0).padStart(6)} MB/s   ${pct(gated)}, ${((100 * best(gated)) / best(forwarded)).toFixed(0)}% of the forwarder`);
    console.log(`  curl in vak exec, plain HTTP through the gate ${best(plain).toFixed(0).padStart(6)} MB/s   ${pct(plain)} (each request parsed and re-framed)`);
    console.log("  target: at least 80% of direct");

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
    floor?.stop();
    server.close();
    rmSync(ws, { recursive: true, force: true });
  }
}
