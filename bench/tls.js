// TLS at the egress gate: an HTTPS download from inside `vak exec` when the
// gate terminates TLS (a read: grant: it decrypts, checks each request, and
// encrypts again to the server) against the same download through a spliced
// tunnel (a grant for every method: the gate sees nothing) and made directly,
// in the same run; and the time a first request to a host adds when the gate
// terminates (its handshake with the client, the leaf, its own handshake
// upstream), against a first request through a spliced tunnel. The server is
// on loopback, signed by a CA made here.
import "reflect-metadata";
import { spawn } from "node:child_process";
import { webcrypto } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import * as x509 from "@peculiar/x509";
import { writeTimes } from "./measure.js";

const MB = Number(process.env.BENCH_TLS_MB ?? 256);
const ROUNDS = Number(process.env.BENCH_TLS_ROUNDS ?? 15);
const DOWNLOADS = Number(process.env.BENCH_TLS_DOWNLOADS ?? 5);
const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
const pem = (label, der) => `-----BEGIN ${label}-----\n${Buffer.from(der).toString("base64").replace(/(.{64})/g, "$1\n").replace(/\n$/, "")}\n-----END ${label}-----\n`;

async function certs() {
  x509.cryptoProvider.set(webcrypto);
  const caKeys = await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: "01", name: "CN=vak bench CA", signingAlgorithm: ALG, keys: caKeys, notAfter: new Date(Date.now() + 86_400_000), extensions: [new x509.BasicConstraintsExtension(true, 0, true)] });
  const keys = await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: "02", subject: "CN=127.0.0.1", issuer: ca.subject, signingAlgorithm: ALG, publicKey: keys.publicKey, signingKey: caKeys.privateKey,
    notAfter: new Date(Date.now() + 86_400_000), extensions: [new x509.SubjectAlternativeNameExtension([{ type: "ip", value: "127.0.0.1" }])],
  });
  return { ca: ca.toString("pem"), cert: leaf.toString("pem"), key: pem("PRIVATE KEY", await webcrypto.subtle.exportKey("pkcs8", keys.privateKey)) };
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

// GNU time, where it is installed: the CPU a whole run took (vak and its gate, the launcher, curl), which a
// loaded machine disturbs far less than a throughput; the difference between two modes is the gate's.
const TIME = ["/usr/bin/time", "/bin/time"].find((p) => existsSync(p));
function runCpu(cmd, args, opts) {
  if (!TIME) return run(cmd, args, opts).then((out) => ({ out, cpu: NaN }));
  return new Promise((resolve, reject) => {
    const c = spawn(TIME, ["-f", "vak-bench-cpu %U %S", cmd, ...args], { stdio: ["ignore", "pipe", "pipe"], ...opts });
    let out = "";
    let err = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (err += d));
    c.on("error", reject);
    c.on("close", (code) => {
      const m = /vak-bench-cpu ([0-9.]+) ([0-9.]+)/.exec(err);
      if (code !== 0) return reject(new Error(`${cmd} exited ${code}: ${out}${err.slice(-2000)}`));
      resolve({ out, cpu: m ? (Number(m[1]) + Number(m[2])) * 1000 : NaN });
    });
  });
}
const load = () => loadavg().map((x) => x.toFixed(2)).join(" ");

export async function tlsBench({ vak, env }) {
  const { ca, cert, key } = await certs();
  const chunk = Buffer.alloc(1 << 20, 120);
  const server = createServer({ key, cert, ALPNProtocols: ["http/1.1"] }, (req, res) => {
    if (req.url === "/small") return res.end("ok");
    res.writeHead(200, { "content-length": MB << 20 });
    writeTimes(res, chunk, MB);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const port = server.address().port;
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-tls-"));
  const caFile = join(ws, "ca.pem");
  writeFileSync(caFile, ca);
  try {
    const url = `https://127.0.0.1:${port}/`;
    const speed = ["-s", "-o", "/dev/null", "-w", "%{speed_download}"];
    const vakArgs = (grant, args) => [vak, "exec", "--ca-file", caFile, "--allow-net", grant, "--", "curl", ...args];
    const exec = (grant, ...args) => run(process.execPath, vakArgs(grant, args), { env, cwd: ws });
    const execCpu = (grant, ...args) => runCpu(process.execPath, vakArgs(grant, args), { env, cwd: ws });
    const direct = [];
    const spliced = [];
    const terminated = [];
    const cpu = { direct: [], spliced: [], terminated: [] };
    const loadBefore = load();
    for (let i = 0; i < DOWNLOADS; i++) {
      const d = await runCpu("curl", [...speed, "--cacert", caFile, "--noproxy", "*", url], { env });
      direct.push(Number(d.out));
      cpu.direct.push(d.cpu);
      const s = await execCpu(`127.0.0.1:${port}`, ...speed, url);
      spliced.push(Number(s.out));
      cpu.spliced.push(s.cpu);
      const t = await execCpu(`read:127.0.0.1:${port}`, ...speed, url);
      terminated.push(Number(t.out));
      cpu.terminated.push(t.cpu);
    }
    const best = (xs) => Math.max(...xs) / 1e6;
    const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    // Each round's own ratio (its three downloads ran back to back): the median of those moves less with the load than the best of each.
    const ratio = med(terminated.map((t, i) => t / spliced[i]));
    const verdict = (ok) => (ok ? "met" : "missed");
    console.log(`\nTLS at the gate: an HTTPS download of ${MB} MiB over loopback (best of ${DOWNLOADS}, interleaved; load average ${loadBefore} before, ${load()} after)`);
    console.log(`  direct curl                                   ${best(direct).toFixed(0).padStart(6)} MB/s   (baseline)`);
    console.log(`  curl in vak exec, spliced tunnel               ${best(spliced).toFixed(0).padStart(6)} MB/s   ${((100 * best(spliced)) / best(direct)).toFixed(0)}% of direct`);
    console.log(`  curl in vak exec, TLS terminated at the gate   ${best(terminated).toFixed(0).padStart(6)} MB/s   ${((100 * best(terminated)) / best(direct)).toFixed(0)}% of direct, ${((100 * best(terminated)) / best(spliced)).toFixed(0)}% of spliced (best); median of the rounds' own ratios ${(100 * ratio).toFixed(0)}%`);
    console.log(`  target: terminated at least 50% of spliced: ${verdict(ratio >= 0.5)} (median of rounds), ${verdict(best(terminated) >= 0.5 * best(spliced))} (best of each)`);
    if (TIME) {
      console.log(`  CPU of the whole run (median): direct curl ${med(cpu.direct).toFixed(0)} ms, spliced ${med(cpu.spliced).toFixed(0)} ms, terminated ${med(cpu.terminated).toFixed(0)} ms`);
      console.log(`  the gate's CPU for terminating: +${((med(cpu.terminated) - med(cpu.spliced)) / MB).toFixed(2)} ms per MiB (decrypting, checking, encrypting again; median of rounds' own differences +${(med(cpu.terminated.map((t, i) => t - cpu.spliced[i])) / MB).toFixed(2)})`);
    }

    // The first request of a run to a host: curl's own measure, from its start to the last byte of a tiny answer.
    const first = ["-s", "-o", "/dev/null", "-w", "%{time_total}", `${url}small`];
    const s = [];
    const t = [];
    for (let i = 0; i < ROUNDS; i++) {
      s.push(Number(await exec(`127.0.0.1:${port}`, ...first)) * 1000);
      t.push(Number(await exec(`read:127.0.0.1:${port}`, ...first)) * 1000);
    }
    const median = med;
    console.log(`\nTLS at the gate: the first request of a run to a host, curl's time_total (median of ${ROUNDS}, interleaved; load average ${load()})`);
    console.log(`  spliced tunnel                  ${median(s).toFixed(2).padStart(7)} ms   (baseline)`);
    const paired = median(t.map((x, i) => x - s[i]));
    console.log(`  TLS terminated at the gate      ${median(t).toFixed(2).padStart(7)} ms   +${(median(t) - median(s)).toFixed(2)} ms (the gate's handshakes and the leaf; median of the paired differences +${paired.toFixed(2)} ms)`);
    console.log(`  target: at most 10 ms added: ${paired <= 10 ? "met" : "missed"} (median of the paired differences)`);

    // Start-up: a run whose grants need no termination makes no key and writes no bundle; one that does pays for both.
    const start = (grant) => {
      const t0 = process.hrtime.bigint();
      return run(process.execPath, [vak, "exec", "--allow-net", grant, "--", "/bin/true"], { env, cwd: ws }).then(() => Number(process.hrtime.bigint() - t0) / 1e6);
    };
    const plainStart = [];
    const tlsStart = [];
    for (let i = 0; i < ROUNDS; i++) {
      plainStart.push(await start(`127.0.0.1:${port}`));
      tlsStart.push(await start(`read:127.0.0.1:${port}`));
    }
    console.log(`\nTLS at the gate: vak exec -- /bin/true with a network grant (median of ${ROUNDS}, interleaved)`);
    console.log(`  a grant that needs no termination  ${median(plainStart).toFixed(2).padStart(7)} ms   (baseline: no key made, nothing written)`);
    console.log(`  a read: grant (CA made, bundle)    ${median(tlsStart).toFixed(2).padStart(7)} ms   +${(median(tlsStart) - median(plainStart)).toFixed(2)} ms`);
  } finally {
    server.close();
    rmSync(ws, { recursive: true, force: true });
  }
}
