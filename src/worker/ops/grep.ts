import { spawnSync } from "node:child_process";
import { closeSync, constants, existsSync, fstatSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_RESULT_BYTES } from "../../protocol/worker-protocol.js";
import { cut, type OpResult } from "./result.js";
import { globToRegExp, walk } from "./walk.js";
import { openNoFollow } from "../fsx.js";

/** A regular file's bytes, opened with no link on its path; undefined if it is over the bound. */
function readSmall(file: string): Buffer | undefined {
  const fd = openNoFollow(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_FILE_BYTES) return undefined;
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

const MAX_FILE_BYTES = 2 * 1024 * 1024;
const RG = ["/usr/bin/rg", "/usr/local/bin/rg", "/bin/rg"].find((p) => existsSync(p));

interface GrepOp {
  pattern: string;
  path: string;
  glob?: string | undefined;
  ignoreCase?: boolean | undefined;
  maxMatches?: number | undefined;
}

function compile(op: GrepOp): RegExp | OpResult {
  try {
    return new RegExp(op.pattern, op.ignoreCase ? "i" : "");
  } catch (e) {
    return { error: { code: "bad-request", message: `not a valid regular expression: ${(e as Error).message}` } };
  }
}

/** Lines matching a regular expression, as path:line:text. Uses ripgrep when the machine has it. */
export function grep(op: GrepOp): OpResult {
  const re = compile(op);
  if (!(re instanceof RegExp)) return re;
  const max = op.maxMatches ?? 1000;
  if (RG) {
    const args = ["--line-number", "--no-heading", "--color", "never", "--max-filesize", String(MAX_FILE_BYTES), "--max-count", String(max), "--regexp", op.pattern];
    if (op.ignoreCase) args.push("--ignore-case");
    if (op.glob) args.push("--glob", op.glob);
    const r = spawnSync(RG, [...args, "--", "."], { cwd: op.path, maxBuffer: MAX_RESULT_BYTES * 2, encoding: "utf8" });
    if (r.status === 2 && !r.stdout) return { error: { code: "bad-request", message: (r.stderr || "ripgrep failed").trim().slice(0, 1000) } };
    const lines = r.stdout.split("\n").filter(Boolean).slice(0, max).map((l) => l.replace(/^\.\//, ""));
    return { ...cut(lines.join("\n")), data: { matches: lines.length, engine: "ripgrep" } };
  }
  return grepWithJavaScript(op);
}

/** The fallback: a walk that skips binary files and files over the size bound. */
export function grepWithJavaScript(op: GrepOp): OpResult {
  const re = compile(op);
  if (!(re instanceof RegExp)) return re;
  const max = op.maxMatches ?? 1000;
  const only = op.glob ? globToRegExp(op.glob.includes("/") ? op.glob : `**/${op.glob}`) : undefined;
  const out: string[] = [];
  for (const rel of walk(op.path)) {
    if (only && !only.test(rel)) continue;
    const file = join(op.path, rel);
    try {
      const text = readSmall(file);
      if (!text) continue;
      if (text.subarray(0, 8192).includes(0)) continue;
      text.toString("utf8").split("\n").forEach((line, i) => {
        if (out.length < max && re.test(line)) out.push(`${rel}:${i + 1}:${line}`);
      });
    } catch {
      // unreadable: skip it, as grep does
    }
    if (out.length >= max) break;
  }
  return { ...cut(out.join("\n")), data: { matches: out.length, engine: "javascript" } };
}
