// The container backend against the namespace backend: the same `vak exec -- /bin/true`, as the same
// unprivileged user (the container backend refuses root: a root run measures as nobody), interleaved.
// Skipped, saying why, where no image was built (`vak container build-image`) or no engine answers.
import { spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export async function containerBench({ vak, env, runs }) {
  const cache = env.VAK_BENCH_CONTAINER_CACHE ?? (existsSync("/tmp/vak-test-container-cache/vak/container/image.json") ? "/tmp/vak-test-container-cache" : undefined);
  const record = join(cache ?? join(env.XDG_CACHE_HOME ?? join(env.HOME ?? "/", ".cache")), "vak", "container", "image.json");
  console.log("\ncontainer backend: vak exec --sandbox container against --sandbox namespaces, -- /bin/true");
  if (!existsSync(record)) return console.log(`  not measured: no image record at ${record} (run vak container build-image)`);
  const root = process.getuid() === 0;
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-container-"));
  if (root) chownSync(ws, 65534, 65534);
  const wrap = root ? ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--"] : [];
  const runEnv = { PATH: env.PATH, HOME: ws, LANG: "C.UTF-8", XDG_STATE_HOME: join(ws, ".state"), ...(cache ? { XDG_CACHE_HOME: cache } : {}), ...(env.DOCKER_HOST ? { DOCKER_HOST: env.DOCKER_HOST } : {}) };
  const once = (sandbox) => new Promise((resolve, reject) => {
    const argv = [...wrap, process.execPath, vak, "exec", "--sandbox", sandbox, "--", "/bin/true"];
    const t = process.hrtime.bigint();
    const c = spawn(argv[0], argv.slice(1), { cwd: ws, env: runEnv, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    c.stderr.on("data", (d) => (err += d));
    c.on("close", (code) => (code === 0 ? resolve(Number(process.hrtime.bigint() - t) / 1e6) : reject(new Error(`--sandbox ${sandbox} exited ${code}: ${err.trim().slice(0, 300)}`))));
  });
  try {
    await once("container");
    await once("namespaces");
    const n = Math.max(5, Math.floor(runs / 4));
    const a = [], b = [];
    for (let i = 0; i < n; i++) {
      a.push(await once("namespaces"));
      b.push(await once("container"));
    }
    const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    console.log(`  --sandbox namespaces   median ${med(a).toFixed(0).padStart(6)} ms (baseline, ${n} runs${root ? ", as nobody" : ""})`);
    console.log(`  --sandbox container    median ${med(b).toFixed(0).padStart(6)} ms   +${(med(b) - med(a)).toFixed(0)} ms, x${(med(b) / med(a)).toFixed(1)}`);
  } catch (e) {
    console.log(`  not measured: ${e.message}`);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}
