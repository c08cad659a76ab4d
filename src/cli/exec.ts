import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { VakError } from "../policy/errors.js";
import { ENV_NAME } from "../policy/env.js";
import type { Grants, Mode } from "../policy/grants.js";
import type { Limits } from "../policy/limits.js";
import { decide, type LaunchPlan, type SandboxKind } from "../policy/plan.js";
import { hostFacts } from "../sandbox/host.js";
import { vakDirs } from "../policy/state.js";
import { launch, type GateLink, type LaunchResult } from "../sandbox/launcher.js";
import type { NetGrants } from "../policy/net-grants.js";
import type { EgressEvent } from "../net/egress-gate.js";
import type { GrantFlags } from "./agent-options.js";
import type { ExecNet, ExecSecret } from "./exec-net.js";
import { ExecRecord, type SecretUse } from "./exec-record.js";
import { EXIT_REFUSED, EXIT_TIMEOUT } from "./exit.js";
import { OwnLines } from "./line-start.js";
import { limitLine, limitsHit, type LimitHit } from "./limit-lines.js";

export interface ExecOptions extends GrantFlags {
  allowEnv?: string[];
  secret?: string[];
  caFile?: string[];
  endpoint?: string[];
  /** In milliseconds (the flag takes 600, 90s, 10m). */
  timeout?: number;
  maxOutput?: number;
  maxProcs?: number;
  maxMemory?: number;
  maxFileSize?: number;
  maxCpu?: number;
  json?: boolean;
}

/** Signals that ask the sandbox to stop; a second one, or silence for this long, kills it. */
const STOP_SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
const KILL_AFTER_MS = 2000;
const MAX_DENIAL_LINES = 5;
/** Egress events kept in memory for the summary; all of them are in the journal. */
const MAX_EGRESS_KEPT = 1000;

/** The run's egress events as the summary shows them: the first MAX_EGRESS_KEPT, and counts. */
interface EgressSeen {
  kept: EgressEvent[];
  omitted: number;
  /** Refusals, counting those a summary event stands for. */
  refused: number;
}

function modeOf(opts: ExecOptions): Mode {
  if (opts.mode === "full-access" && !opts.fullAccess)
    throw new VakError("bad-input", "full access is its own flag: pass --full-access to run without a sandbox");
  return opts.fullAccess ? "full-access" : (opts.mode as Mode);
}

function limitsOf(opts: ExecOptions): Limits {
  const l: Limits = {};
  if (opts.timeout) l.timeoutMs = opts.timeout;
  if (opts.maxOutput) l.maxOutputBytes = opts.maxOutput;
  if (opts.maxProcs) l.maxProcs = opts.maxProcs;
  if (opts.maxMemory) l.maxMemoryBytes = opts.maxMemory;
  if (opts.maxFileSize) l.maxFileBytes = opts.maxFileSize;
  if (opts.maxCpu) l.maxCpuSeconds = opts.maxCpu;
  return l;
}

/** --secret NAME=REF[@HOST,…]: resolved on the host now; a missing one stops the run before anything starts. */
async function secretsOf(opts: ExecOptions): Promise<ExecSecret[]> {
  if (!opts.secret?.length) return [];
  return (await import("../secrets/env-secrets.js")).envSecrets(opts.secret);
}

/** Whether the user's config has an [egress] table, looked for without loading the config's schema (zod costs ~60 ms). */
function egressConfigured(): boolean {
  try {
    return /^\s*\[egress\]/m.test(readFileSync(join(vakDirs().config, "config.toml"), "utf8"));
  } catch {
    return false;
  }
}

export async function execCommand(command: string[], opts: ExecOptions): Promise<number> {
  const secrets = await secretsOf(opts);
  const mode = modeOf(opts);
  for (const name of opts.allowEnv ?? [])
    if (!ENV_NAME.test(name)) throw new VakError("bad-input", `--allow-env ${name}: not an environment variable name (letters, digits and _)`);
  const grants: Grants = {
    read: opts.allowRead ?? [], write: opts.allowWrite ?? [], denyRead: opts.denyRead ?? [],
    denyWrite: opts.denyWrite ?? [], env: opts.allowEnv ?? [],
  };
  const sandbox: SandboxKind = mode === "full-access" ? "none" : (opts.sandbox as SandboxKind);
  let net: NetGrants | undefined;
  if (opts.allowNet?.length || opts.denyNet?.length) {
    // The network code (http, dns, ipaddr) loads only when a command asks for the network.
    const { parseNetGrants, RuleError } = await import("../policy/net-grants.js");
    try {
      net = parseNetGrants(opts.allowNet ?? [], opts.denyNet ?? []);
    } catch (e) {
      if (e instanceof RuleError) throw new VakError("bad-input", e.message);
      throw e;
    }
  }
  const gateHeld = secrets.filter((x) => x.hosts);
  if ((gateHeld.length || opts.endpoint?.length || opts.caFile?.length) && !net?.allow.length)
    throw new VakError("bad-input", "a secret held by the gate (NAME=REF@HOST), --endpoint and --ca-file need a network grant: add --allow-net HOST");
  // Secrets held by the gate, provider endpoints, and TLS at the gate load only for runs that use them.
  let netx: ExecNet | undefined;
  if (net?.allow.length && (gateHeld.length || opts.endpoint?.length || opts.caFile?.length || process.env.NODE_EXTRA_CA_CERTS || egressConfigured() || (await import("../policy/net-grants.js")).needsInspection(net))) {
    const { prepareExecNet } = await import("./exec-net.js");
    const { loadUserConfig } = await import("../policy/config.js");
    netx = await prepareExecNet({ net, secrets, endpoints: opts.endpoint ?? [], caFiles: opts.caFile ?? [], config: loadUserConfig().egress, hostEnv: process.env as Record<string, string> });
  }
  let scratch: { tmp: string; home: string } | undefined;
  if (sandbox === "reduced") {
    // No private mounts without namespaces: TMPDIR and HOME are fresh host directories, removed afterwards.
    const root = mkdtempSync(join(tmpdir(), "vak-scratch-"));
    mkdirSync(join(root, "tmp"), { mode: 0o700 });
    mkdirSync(join(root, "home"), { mode: 0o700 });
    scratch = { tmp: join(root, "tmp"), home: join(root, "home") };
  }
  try {
    const plan = decide(
      { mode, sandbox, workspace: opts.workspace ?? process.cwd(), cwd: opts.workspace ? undefined : process.cwd(), grants, limits: limitsOf(opts), command, scratch, net, runtime: netx?.runtime },
      hostFacts(),
    );
    if (netx && plan.sandbox === "none")
      throw new VakError("bad-input", "--full-access has no egress gate: a secret held by the gate, --endpoint and --ca-file need the sandbox");
    // A secret is in this command's environment for its life, and nowhere else; one the gate holds is a placeholder here.
    for (const x of secrets) if (!x.hosts) plan.env[x.name] = x.value;
    if (netx) Object.assign(plan.env, netx.env);
    const used = secrets.filter((x) => !x.hosts).map((x) => ({ ref: x.ref, recipient: `env ${x.name}` }));
    for (const x of gateHeld) used.push({ ref: x.ref, recipient: `placeholder in env ${x.name}; the gate puts the value in request headers for ${x.hosts!.join(", ")}` });
    if (plan.sandbox === "none") return await runUnsandboxed(plan, opts, used);
    return await runSandboxed(plan, opts, used, netx);
  } finally {
    if (scratch) rmSync(dirname(scratch.tmp), { recursive: true, force: true });
    netx?.close();
  }
}

async function runUnsandboxed(plan: LaunchPlan, opts: ExecOptions, secrets: SecretUse[]): Promise<number> {
  const record = ExecRecord.start(plan, secrets);
  process.stderr.write("vak: --full-access: running WITHOUT a sandbox, by your explicit decision\n");
  const [cmd, ...args] = plan.command;
  const child = spawn(cmd!, args, { stdio: "inherit", cwd: plan.cwd, env: plan.env });
  const code = await new Promise<number>((resolve) => {
    child.on("error", (e) => {
      process.stderr.write(`vak: ${cmd}: ${e.message}\n`);
      resolve((e as NodeJS.ErrnoException).code === "ENOENT" ? 127 : 126);
    });
    child.on("close", (c, s) => resolve(c ?? 128 + (s ? 9 : 0)));
  });
  record.finish(undefined, code);
  if (opts.json) new OwnLines(undefined).line(JSON.stringify({ exit: code, mode: plan.mode, sandbox: "none" }));
  return code;
}

async function runSandboxed(plan: LaunchPlan, opts: ExecOptions, secrets: SecretUse[], netx?: ExecNet): Promise<number> {
  // Nothing runs unrecorded: the policy and the plan are committed first.
  const record = ExecRecord.start(plan, secrets);
  const egress: EgressSeen = { kept: [], omitted: 0, refused: 0 };
  let gate: { link: GateLink; close(): Promise<void> } | undefined;
  try {
    if (plan.network.kind === "gate")
      gate = await (await import("./exec-egress.js")).startGate(plan.network.grants, (e) => {
        if (egress.kept.length < MAX_EGRESS_KEPT) egress.kept.push(e);
        else egress.omitted += 1;
        if (e.decision === "denied") egress.refused += e.count ?? 1;
        record.egress(e);
        // Fail closed: a request whose decision cannot be recorded is not sent (the gate drops it).
        if (record.failed) throw record.failed;
      }, () => record.sync(), netx?.gate);
    return await runWithGate(plan, opts, egress, gate, record, netx);
  } finally {
    await gate?.close();
  }
}

async function runWithGate(plan: LaunchPlan, opts: ExecOptions, egress: EgressSeen, gate: { link: GateLink; close(): Promise<void> } | undefined, record: ExecRecord, netx?: ExecNet): Promise<number> {
  const started = process.hrtime.bigint();
  // stdio is vak's own: the launcher keeps the terminal out of the sandbox (a pty of its own in
  // between) and counts every byte of output against --max-output (native/terminal.c).
  const sb = launch(plan, ["inherit", "inherit", "inherit"], gate?.link, { maxOutput: plan.limits.maxOutputBytes });
  // While the launcher builds the sandbox, this thread only waits: the gate's TLS is readied then.
  netx?.tls?.warm();
  record.onFailure = () => sb.kill("SIGKILL");

  let stopping = false;
  let killTimer: NodeJS.Timeout | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) return sb.kill("SIGKILL");
    stopping = true;
    sb.kill(sig);
    killTimer = setTimeout(() => sb.kill("SIGKILL"), KILL_AFTER_MS);
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);

  let result: LaunchResult;
  try {
    result = await sb.result;
  } finally {
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
    if (killTimer) clearTimeout(killTimer);
  }
  // The sandbox is gone: closing the gate records how its last requests ended, and the refusal counts, before the record closes.
  await gate?.close();
  const outputExceeded = result.outputExceeded;
  // The launcher wrote the command's output itself: vak knows its last byte only where a file can tell.
  const own = new OwnLines(undefined);
  const signaled = result.reports.find((x) => x.event === "signaled");
  const hits = limitsHit(plan.limits, plan.defaultMaxProcs, {
    code: result.code, signal: signaled?.event === "signaled" ? signaled.signal : undefined, timedOut: result.timedOut, outputExceeded,
    procsHit: result.limits?.procs_hit ?? 0, oomKills: result.limits?.oom_kills ?? 0, memoryCgroup: result.limits?.memory_cgroup ?? false,
  });
  let code = explain(plan, result, outputExceeded, egress, own, hits);
  if (record.failed) {
    own.line(`vak: ${record.failed.message}; the sandbox was stopped`);
    code = EXIT_REFUSED;
  }
  record.finish(result, code, { outputExceeded, limitsHit: hits.map(({ limit, flag, value, ended, what }) => ({ limit, flag, value, ended, what })) });
  if (opts.json) {
    own.line(
      JSON.stringify({
        exit: code,
        mode: plan.mode,
        sandbox: plan.sandbox,
        workspace: plan.workspace,
        durationMs: Number((process.hrtime.bigint() - started) / 1_000_000n),
        timedOut: result.timedOut,
        outputExceeded,
        setupError: result.setupError ?? null,
        denied: result.denied.map(({ op, path, reason }) => ({ op, path, reason })),
        limits: result.limits ? { procs: result.limits.procs, procsHit: result.limits.procs_hit, oomKills: result.limits.oom_kills, memoryCgroup: result.limits.memory_cgroup } : null,
        limitsHit: hits,
        grants: plan.grants,
        network: plan.network.kind === "gate" ? { allow: plan.network.grants.allow.map((r) => r.text), deny: plan.network.grants.deny.map((r) => r.text) } : null,
        egress: egress.kept,
        egressOmitted: egress.omitted,
      }),
    );
  }
  return code;
}

/** Prints what the sandbox refused and why the run ended, and picks the exit status. */
function explain(plan: LaunchPlan, r: LaunchResult, outputExceeded: boolean, egress: EgressSeen, own: OwnLines, hits: LimitHit[]): number {
  const err = (s: string) => own.line(`vak: ${s}`);
  if (r.malformed.length) {
    err(`the sandbox launcher sent ${r.malformed.length} unreadable report line(s); treating the run as failed`);
    return EXIT_REFUSED;
  }
  if (r.setupError) {
    const reduced = r.setupError.step === "namespaces" ? "; to run with Landlock, seccomp and the write guard only, pass --sandbox reduced" : "";
    err(`could not set up the sandbox (${r.setupError.step}): ${r.setupError.message}${reduced}`);
    return EXIT_REFUSED;
  }
  if (r.guardDied) {
    err("the write guard died while the command ran; the sandbox was stopped, and the run is not to be trusted");
    return EXIT_REFUSED;
  }
  for (const d of r.denied.slice(0, MAX_DENIAL_LINES)) err(`refused ${d.op} ${d.path}: ${d.reason}${hint(plan, d.reason, d.path)}`);
  if (r.denied.length > MAX_DENIAL_LINES) err(`… and ${r.denied.length - MAX_DENIAL_LINES} more refusals`);
  const shown = egress.kept.filter((e) => e.decision === "denied" && e.count === undefined).slice(0, MAX_DENIAL_LINES);
  for (const e of shown) err(`refused ${e.method === "-" ? "a connection" : `${e.method} ${e.asked}`}: ${e.reason}`);
  if (egress.refused > shown.length) err(`… and ${egress.refused - shown.length} more egress refusals`);
  if (r.execError) {
    err(r.execError.message);
    return r.code;
  }
  // Every limit that ended the command, or refused something while it ran, has its line: which, its value, how to raise it.
  for (const h of hits) err(limitLine(h, plan.limits, plan.defaultMaxProcs));
  if (outputExceeded) return EXIT_REFUSED;
  if (r.timedOut) return EXIT_TIMEOUT;
  return r.code;
}

function hint(plan: LaunchPlan, reason: string, path: string): string {
  // An absolute rule the plan holds for a reason no name says: say the reason.
  const abs = /^protected path (\/.*)$/.exec(reason)?.[1];
  const held = abs ? plan.held.find((h) => h.path === abs) : undefined;
  if (held) return ` (${held.why})`;
  if (/\/\.git\/worktrees\/[^/]+\/(commondir|gitdir)$/.test(path))
    return " (git worktree add cannot run inside: its pointers would redirect the host's git. Make a clone on the host instead, `git clone --shared REPO DIR`, and run vak exec --workspace DIR --allow-read REPO/.git/objects)";
  if (reason.includes("read-only") && plan.mode === "read-only") return " (use --mode workspace-write to allow writes)";
  if (reason.includes("read-only")) return ` (grant it with --allow-write ${path})`;
  return "";
}
