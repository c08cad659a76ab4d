import type { LaunchPlan } from "../policy/plan.js";
import { type GateLink, launch, type LaunchResult, type RunningSandbox } from "../sandbox/launcher.js";
import { MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, MAX_RESULT_BYTES, parseMessage, ProtocolError, type Request, type Response, ResponseSchema, TRUNCATED } from "../protocol/worker-protocol.js";

/** How one op ended, as the broker reports it. */
export type WorkerOutcome =
  | { ok: true; output: string; truncated: boolean; data?: Record<string, unknown> | undefined }
  | { ok: false; code: string; message: string };

const MAX_STDERR = 64 * 1024;

/** Collects up to max bytes from a stream; calls over() once when more arrives. */
function collect(stream: NodeJS.ReadableStream | null, max: number, over: () => void): { text: () => string; size: () => number } {
  const chunks: Buffer[] = [];
  let size = 0;
  let tripped = false;
  stream?.on("data", (d: Buffer) => {
    size += d.length;
    if (size <= max) chunks.push(d);
    else {
      const room = max - (size - d.length);
      if (room > 0) chunks.push(d.subarray(0, room));
      if (!tripped) {
        tripped = true;
        over();
      }
    }
  });
  return { text: () => Buffer.concat(chunks).toString("utf8"), size: () => size };
}

/**
 * A sandboxed worker process: started (perhaps ahead of time, for the pool),
 * then given exactly one request. It lives in its own process group and
 * sandbox; cancel() stops it and everything it started.
 */
export class WorkerProcess {
  private readonly sb: RunningSandbox;
  readonly started = Date.now();
  private used = false;
  /** Set when the broker stops this worker from outside (close, policy change). */
  private stopped = false;

  constructor(
    readonly plan: LaunchPlan,
    readonly generation: number,
    gate?: GateLink,
  ) {
    this.sb = launch(plan, ["pipe", "pipe", "pipe"], gate, { detached: true });
    // A worker that dies before its request (cancelled, drained) must not crash the host with EPIPE.
    this.sb.stdin?.on("error", () => {});
  }

  get pid(): number {
    return this.sb.pid;
  }

  /** Stops the worker and everything it started; its op reports "cancelled". */
  cancel(): void {
    this.stopped = true;
    this.sb.cancel();
  }

  get done(): Promise<LaunchResult> {
    return this.sb.result;
  }

  /**
   * Sends the one request a worker ever gets, and reads its one response. The
   * sandbox is stopped the moment a whole response line is in: nothing the
   * worker does after answering can count, and the caller need not wait for
   * a process to wind down. A worker that ends without a whole line, writes
   * past its line or past the size bound, or answers garbage, fails closed.
   */
  async run(req: Request, signal?: AbortSignal): Promise<WorkerOutcome> {
    if (this.used) throw new Error("a worker runs exactly one op");
    this.used = true;
    const text = JSON.stringify(req) + "\n";
    // Refused here with its size, before the worker would refuse it without being able to name the request.
    if (Buffer.byteLength(text) > MAX_REQUEST_BYTES) {
      this.sb.cancel();
      return { ok: false, code: "too-large", message: `the ${req.op.kind} op is ${Buffer.byteLength(text)} bytes as sent to its worker, more than ${MAX_REQUEST_BYTES}; send less at once` };
    }
    const err = collect(this.sb.stderr, MAX_STDERR, () => {});
    const line = new Promise<{ text: string; extra: boolean } | "overflow" | "eof">((resolve) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const stdout = this.sb.stdout;
      if (!stdout) return resolve("eof");
      stdout.on("data", (d: Buffer) => {
        const nl = d.indexOf(10);
        if (nl >= 0) {
          chunks.push(d.subarray(0, nl));
          resolve({ text: Buffer.concat(chunks).toString("utf8"), extra: nl + 1 < d.length });
          stdout.removeAllListeners("data");
          stdout.resume();
          return;
        }
        size += d.length;
        if (size > MAX_RESPONSE_BYTES) return resolve("overflow");
        chunks.push(d);
      });
      stdout.on("end", () => resolve("eof"));
    });
    const aborted = new Promise<"aborted">((resolve) => {
      if (signal?.aborted) resolve("aborted");
      signal?.addEventListener("abort", () => resolve("aborted"), { once: true });
      void this.sb.result.then(() => this.stopped && resolve("aborted"));
    });
    this.sb.stdin?.end(text);
    const got = await Promise.race([line, aborted]);
    // Whatever happened, the worker's life is over now (this is not a cancel of the op).
    this.sb.cancel();
    if (got === "aborted") {
      await this.sb.result;
      return { ok: false, code: "cancelled", message: "cancelled; the worker and everything it started were stopped" };
    }
    if (got === "overflow") return { ok: false, code: "worker-failed", message: `the worker wrote more than ${MAX_RESPONSE_BYTES} bytes without ending its response, and was stopped` };
    if (got === "eof") {
      const result = await this.sb.result;
      if (this.stopped || signal?.aborted) return { ok: false, code: "cancelled", message: "cancelled; the worker and everything it started were stopped" };
      const failed = problem(result);
      if (failed) return failed;
      return { ok: false, code: "worker-failed", message: `the worker ${result.code === 0 ? "ended" : `exited ${result.code}`} without a response${stderrNote(err.text())}` };
    }
    if (got.extra) return { ok: false, code: "worker-failed", message: "the worker wrote more than its one response line" };
    let resp: Response;
    try {
      resp = parseMessage(ResponseSchema, got.text, "the worker's response", MAX_RESPONSE_BYTES);
    } catch (e) {
      return { ok: false, code: "worker-failed", message: `${(e as ProtocolError).message}${stderrNote(err.text())}` };
    }
    // A request the worker could not read is answered with id "?": its error says why.
    if (resp.id === "?" && !resp.ok) return { ok: false, code: resp.error.code === "bad-request" ? "bad-request" : "worker-failed", message: `the worker could not read the request: ${resp.error.message}` };
    if (resp.id !== req.id) return { ok: false, code: "worker-failed", message: "the worker answered another request" };
    if (!resp.ok) return { ok: false, code: resp.error.code, message: resp.error.message };
    if (Buffer.byteLength(resp.output) > MAX_RESULT_BYTES) return { ok: false, code: "worker-failed", message: `the worker's result is larger than ${MAX_RESULT_BYTES} bytes` };
    return { ok: true, output: resp.output, truncated: resp.truncated, data: resp.data };
  }

  /** For exec: the command itself is the worker; its output is the result, bounded. */
  async runCommand(signal?: AbortSignal, input?: string): Promise<WorkerOutcome> {
    if (this.used) throw new Error("a worker runs exactly one op");
    this.used = true;
    if (input === undefined) this.sb.stdin?.end();
    else this.sb.stdin?.end(input);
    let overflow = false;
    const stop = () => {
      overflow = true;
      this.sb.cancel();
    };
    const out = collect(this.sb.stdout, MAX_RESULT_BYTES, stop);
    const err = collect(this.sb.stderr, MAX_RESULT_BYTES, stop);
    const abort = () => this.sb.cancel();
    signal?.addEventListener("abort", abort, { once: true });
    // Aborted while its sandbox was being set up: the event has passed, and the command must not run to its end.
    if (signal?.aborted) abort();
    try {
      const result = await this.sb.result;
      if (signal?.aborted || this.stopped) return { ok: false, code: "cancelled", message: "cancelled; the command and everything it started were stopped" };
      const failed = problem(result);
      if (failed) return failed;
      const stdout = out.text();
      const stderr = err.text();
      let output = stdout + (stderr ? `${stdout && !stdout.endsWith("\n") ? "\n" : ""}[stderr]\n${stderr}` : "");
      if (overflow) output += `${TRUNCATED}[the command kept writing and was stopped]\n`;
      const denied = result.denied.map((d) => `${d.op} ${d.path}: ${d.reason}`);
      return {
        ok: true, output, truncated: overflow,
        data: { exitCode: overflow ? null : result.code, timedOut: result.timedOut, denied, limits: result.limits ?? null },
      };
    } finally {
      signal?.removeEventListener("abort", abort);
    }
  }
}

function stderrNote(stderr: string): string {
  const s = stderr.trim();
  return s ? ` (stderr: ${s.slice(0, 500)})` : "";
}

/** What went wrong with the sandbox itself, if anything. */
function problem(r: LaunchResult): { ok: false; code: string; message: string } | undefined {
  if (r.malformed.length) return { ok: false, code: "worker-failed", message: "the launcher's report was unreadable" };
  if (r.setupError) return { ok: false, code: "sandbox-setup", message: `could not set up the sandbox (${r.setupError.step}): ${r.setupError.message}` };
  if (r.guardDied) return { ok: false, code: "worker-failed", message: "the write guard died; the worker was stopped" };
  if (r.execError) return { ok: false, code: "worker-failed", message: r.execError.message };
  if (r.timedOut) return { ok: false, code: "timeout", message: "timed out; the worker and everything it started were stopped" };
  return undefined;
}
