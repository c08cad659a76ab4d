// The answer to a request carrying a gate-held secret is searched for the value in JavaScript
// (src/net/reflected.ts) instead of spliced: a plain-HTTP Content-Length download through `vak exec`
// with and without a --secret in its request, interleaved, as a ratio of the spliced one.
// Run alone: node bench/reflected.js (after npm run build:js); BENCH_REFLECTED_MB, BENCH_REFLECTED_ROUNDS size it.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadAverage, writeTimes } from "./measure.js";

const MB = Number(process.env.BENCH_REFLECTED_MB ?? 256);
const ROUNDS = Number(process.env.BENCH_REFLECTED_ROUNDS ?? 3);

const chunk = Buffer.alloc(1 << 20, 120);
const server = createServer((_req, res) => {
  res.writeHead(200, { "content-length": MB << 20 });
  writeTimes(res, chunk, MB);
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const port = server.address().port;
const vak = fileURLToPath(new URL("../bin/vak.cjs", import.meta.url));
const ws = mkdtempSync(join(tmpdir(), "vak-bench-reflected-"));
const env = { ...process.env, REAL_TOKEN: "sk-bench-0123456789abcdef0123456789" };
delete env.NODE_EXTRA_CA_CERTS;
const exec = (flags, header) =>
  new Promise((resolve, reject) => {
    const script = `curl -s -o /dev/null -w %{speed_download} ${header} http://127.0.0.1:${port}/`;
    const c = spawn(process.execPath, [vak, "exec", "--allow-net", `127.0.0.1:${port}`, ...flags, "--", "/bin/sh", "-c", script], { cwd: ws, env, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    c.stdout.on("data", (d) => (out += d));
    c.on("close", (code) => (code === 0 ? resolve(Number(out) / 1e6) : reject(new Error(`vak exec exited ${code}`))));
  });
const spliced = () => exec([], "");
const searched = () => exec(["--secret", `TOKEN=env:REAL_TOKEN@127.0.0.1:${port}`], '-H "Authorization: Bearer $TOKEN"');
try {
  const before = loadAverage();
  await spliced(), await searched(); // warm-up
  const a = [], b = [];
  for (let i = 0; i < ROUNDS; i++) a.push(await spliced()), b.push(await searched());
  const best = (xs) => Math.max(...xs);
  console.log(`\nsearched answers: a ${MB} MiB plain-HTTP download in vak exec (best of ${ROUNDS}, interleaved)`);
  console.log(`  spliced (no secret in the request)     ${best(a).toFixed(0).padStart(6)} MB/s   (baseline)`);
  console.log(`  searched (a --secret in the request)   ${best(b).toFixed(0).padStart(6)} MB/s   ${((100 * best(b)) / best(a)).toFixed(0)}% of spliced`);
  console.log(`  load average (1, 5, 15 min): ${before} before, ${loadAverage()} after (2 cores)`);
} finally {
  server.close();
  rmSync(ws, { recursive: true, force: true });
}
