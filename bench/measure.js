// What the benches share: timing a process, medians, interleaved rounds, the load average.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Wall-clock ms of one run of cmd, which must exit 0. opts: env, cwd, stdio (default "ignore"). */
export function time(cmd, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const t = process.hrtime.bigint();
    const child = spawn(cmd, args, { stdio: opts.stdio ?? "ignore", env: opts.env, cwd: opts.cwd });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) return reject(new Error(`${cmd} ${args.join(" ")} exited ${code}`));
      resolve(Number(process.hrtime.bigint() - t) / 1e6);
    });
  });
}

export const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: q(0.5), p90: q(0.9) };
};

/** Each candidate once per round, in turn, for runs rounds (after one warm-up round); NaN samples are left out. */
export async function interleaved(cands, runs) {
  for (const c of cands) await c.run();
  const samples = cands.map(() => []);
  for (let i = 0; i < runs; i++) for (const [j, c] of cands.entries()) samples[j].push(await c.run());
  return cands.map((c, j) => ({ name: c.name, ...stats(samples[j].filter((x) => !Number.isNaN(x))) }));
}

/** The 1, 5 and 15 minute load averages, as uptime prints them. */
export const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** Writes chunk n times to an HTTP response, waiting for drain, then ends it: the benches' download servers. */
export function writeTimes(res, chunk, n) {
  let i = 0;
  const write = () => {
    while (i < n) {
      i++;
      if (!res.write(chunk)) return res.once("drain", write);
    }
    res.end();
  };
  write();
}
