// The worker: runs inside a sandbox with one component's grants, reads exactly
// one request from stdin, performs that one operation, writes one response to
// stdout and exits (see scripts/worker-boot.cjs). It holds no policy, no keys,
// no journal, no session: only what the sandbox lets it reach.
import { readSync, writeSync } from "node:fs";
import { unhandled } from "../protocol/unhandled.js";
import { MAX_REQUEST_BYTES, parseMessage, PROTOCOL_VERSION, type Request, RequestSchema, type Response } from "../protocol/worker-protocol.js";
import { ChangedError, NotAsShownError } from "./fsx.js";
import { edit } from "./ops/edit.js";
import { glob } from "./ops/glob.js";
import { grep } from "./ops/grep.js";
import { list } from "./ops/list.js";
import { read } from "./ops/read.js";
import type { OpResult } from "./ops/result.js";
import { write } from "./ops/write.js";

function readRequest(): string {
  const chunks: Buffer[] = [];
  let total = 0;
  const buf = Buffer.alloc(65536);
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buf, 0, buf.length, null);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EAGAIN") continue;
      throw e;
    }
    if (n === 0) break;
    total += n;
    if (total > MAX_REQUEST_BYTES) throw new Error(`the request is larger than ${MAX_REQUEST_BYTES} bytes`);
    chunks.push(Buffer.from(buf.subarray(0, n)));
  }
  return Buffer.concat(chunks).toString("utf8").trim();
}

function perform(req: Request): OpResult {
  const op = req.op;
  switch (op.kind) {
    case "read": return read(op);
    case "list": return list(op);
    case "glob": return glob({ pattern: op.pattern, path: op.path ?? "/" });
    case "grep": return grep({ ...op, path: op.path ?? "/" });
    case "write": return write(op, req.base);
    case "edit": return edit(op, req.base);
    case "exec":
    case "tool":
      return { error: { code: "bad-request", message: `${op.kind} is run by the launcher, not by a worker` } };
    case "mcp":
      return { error: { code: "bad-request", message: "an MCP call is made by the host's MCP client, not by a worker" } };
    case "fetch":
      return { error: { code: "bad-request", message: "fetch is made by the host under the component's network grants, not by a worker" } };
    default:
      return unhandled(op, "op kind");
  }
}

function errorResult(e: unknown, path?: string): OpResult {
  if (e instanceof ChangedError || e instanceof NotAsShownError) return { error: { code: "changed", message: e.message } };
  const err = e as NodeJS.ErrnoException;
  const code = err.code === "ENOENT" ? "not-found" : err.code === "EACCES" || err.code === "EPERM" || err.code === "EROFS" ? "denied" : "io";
  // The worker opens names through directory descriptors (fsx.ts): say the path the op named, not /proc/self/fd/N/NAME.
  const message = path === undefined ? err.message : err.message.replace(/'\/proc\/self\/fd\/\d+(\/[^']*)?'/g, `'${path}'`);
  return { error: { code, message: err.code ? `${err.code}: ${message.replace(/^[A-Z]+: /, "")}` : String(message ?? e) } };
}

function respondText(r: Response): Buffer {
  return Buffer.from(JSON.stringify(r) + "\n");
}

function respond(r: Response): void {
  const line = respondText(r);
  let done = 0;
  while (done < line.length) done += writeSync(1, line, done, line.length - done);
}

/** One request in, one response out: the whole of a worker's life. */
export function handle(text: string): Response {
  let id = "?";
  try {
    const req = parseMessage(RequestSchema, text, "the request", MAX_REQUEST_BYTES);
    id = req.id;
    let result: OpResult;
    try {
      result = perform(req);
    } catch (e) {
      result = errorResult(e, "path" in req.op && typeof req.op.path === "string" ? req.op.path : undefined);
    }
    return "error" in result ? { v: PROTOCOL_VERSION, id, ok: false, error: result.error } : { v: PROTOCOL_VERSION, id, ok: true, ...result };
  } catch (e) {
    return { v: PROTOCOL_VERSION, id, ok: false, error: { code: "bad-request", message: (e as Error).message } };
  }
}

/**
 * Runs the paths a request takes once, on the worker's own code, while the
 * worker waits in the pool: the first real request then finds schemas and
 * functions compiled. Touches nothing but the read-only runtime directory.
 */
export function warmUp(runtimeDir: string): void {
  const samples: Request["op"][] = [
    { kind: "read", path: `${runtimeDir}/worker-boot.cjs`, offset: 1, limit: 5 },
    { kind: "list", path: runtimeDir },
    { kind: "glob", pattern: "*.cjs", path: runtimeDir },
  ];
  for (const op of samples) respondText(handle(JSON.stringify({ v: PROTOCOL_VERSION, id: "warm", op })));
  // The other kinds are only parsed: they would change files.
  for (const op of [
    { kind: "write", path: "/x", content: "" },
    { kind: "edit", path: "/x", old: "a", new: "b" },
    { kind: "grep", pattern: "x" },
  ])
    RequestSchema.safeParse({ v: PROTOCOL_VERSION, id: "warm", op });
  handle("{");
}

/** Reads the request from stdin, answers on stdout, and sets the exit status. */
export function serve(): void {
  let response: Response;
  try {
    response = handle(readRequest());
  } catch (e) {
    response = { v: PROTOCOL_VERSION, id: "?", ok: false, error: { code: "bad-request", message: (e as Error).message } };
  }
  respond(response);
  process.exitCode = response.ok || response.error.code !== "bad-request" ? 0 : 2;
}
