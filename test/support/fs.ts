import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh directory tree for one test: `root` holds `ws` (the workspace) and `outside`. */
export interface Scratch {
  root: string;
  ws: string;
  outside: string;
  cleanup(): void;
}

export function scratch(opts: { git?: boolean } = {}): Scratch {
  const root = mkdtempSync(join(tmpdir(), "vak-test-"));
  const ws = join(root, "ws");
  const outside = join(root, "outside");
  mkdirSync(ws);
  mkdirSync(outside);
  if (opts.git) {
    const git = (...a: string[]) => execFileSync("git", a, { cwd: ws, stdio: "ignore" });
    git("init", "-q", "-b", "main");
    writeFileSync(join(ws, "README"), "hello\n");
    git("add", "README");
    git("-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-qm", "init");
  }
  return { root, ws, outside, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** Every file under dir, relative, for "nothing was left behind" checks. */
export function listTree(dir: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    out.push(rel);
    if (e.isDirectory()) out.push(...listTree(join(dir, e.name), rel));
  }
  return out.sort();
}

/** Pids of host processes whose command line contains marker. */
export function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, "utf8").replace(/\0/g, " ");
      if (cmd.includes(marker)) pids.push(Number(e));
    } catch {
      // gone already
    }
  }
  return pids;
}
