import { fstatSync, mkdtempSync, readFileSync, rmSync, mkdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { VakError } from "../policy/errors.js";
import { type Composition, describeSource, type Granted } from "../policy/compose.js";
import { keyError } from "../policy/profile.js";
import { ENV_NAME } from "../policy/env.js";
import { userConfigPath } from "../policy/config-paths.js";
import { exists } from "../policy/paths.js";
import { providerKeyProblem, providerKeys } from "../model/provider-keys.js";
import type { Mode } from "../policy/grants.js";
import { decide, decideSliced, type LaunchPlan, type PlanInput, type SandboxKind } from "../policy/plan.js";
import { hostFacts } from "../sandbox/host.js";
import { vakDirs } from "../policy/state.js";
import { containerPreflight } from "../sandbox/container.js";
import { nativeSpawner } from "../sandbox/native-spawn.js";
import { launch, launchHeld, type GateLink, type HeldSandbox, type LaunchResult, type RunningSandbox, type Spawner } from "../sandbox/launcher.js";
import type { Report } from "../sandbox/report.js";
import type { NetGrants } from "../policy/net-grants.js";
import type { EgressEvent } from "../net/egress-gate.js";
import type { Journal } from "../journal/journal.js";
import type { Payload } from "../journal/events.js";
import type { GrantFlags } from "./agent-options.js";
import type { ExecNet, ExecSecret } from "./exec-net.js";
import { createStatePaths, resolveGrants } from "./exec-grants.js";
import { ExecRecord, type SecretUse } from "./exec-record.js";
import { upgradeError } from "./upgraded.js";
import type { WalkCache } from "../policy/walk-cache.js";
import { EXIT_REFUSED, EXIT_TIMEOUT } from "./exit.js";
import { droppedPathHint, outsidePathHints, type PresetEntry, programHints } from "./exec-hints.js";
import type { ResolvedGrants } from "./exec-grants.js";
import type { Explain } from "./exec-explain.js";
import type { Redactor } from "../secrets/redact.js";
import { Refusals } from "./exec-refusals.js";
import { jobserverFds, withFds } from "./jobserver.js";
import { OwnLines } from "./line-start.js";
import { limitLine, limitsHit, type LimitHit } from "./limit-lines.js";
import { fmt, own, processOutput, type Output, secretsRedactor, type Text } from "./output.js";

export interface ExecOptions extends GrantFlags {
  allowEnv?: string[];
  secret?: string[];
  caFile?: string[];
  endpoint?: string[];
  profile?: string[];
  printPlan?: boolean;
  explain?: boolean;
  dryRun?: boolean;
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
/** Egress events kept in memory for the summary; all of them are in the journal. */
const MAX_EGRESS_KEPT = 1000;

/** The run's egress events as the summary shows them: the first MAX_EGRESS_KEPT, and counts. */
interface EgressSeen {
  kept: EgressEvent[];
  omitted: number;
  /** Refusals, counting those a summary event stands for. */
  refused: number;
}

function fullAccessOf(opts: ExecOptions): boolean {
  if (opts.mode === "full-access" && !opts.fullAccess)
    throw new VakError("bad-input", "full access is its own flag: pass --full-access to run without a sandbox");
  return Boolean(opts.fullAccess);
}

/** --secret NAME=REF[@HOST,…]: resolved on the host now; a missing one stops the run before anything starts. */
async function secretsOf(specs: readonly string[], ctx: ExecContext): Promise<ExecSecret[]> {
  if (!specs.length) return [];
  return (await import("../secrets/env-secrets.js")).envSecrets(specs, { env: ctx.env, cwd: ctx.cwd });
}

/**
 * The providers the user's config names, for their key variables. Read from
 * the TOML alone when every [providers.NAME] table is a table whose
 * api_key_env is absent or a string; only otherwise does the whole config load
 * with its schema (which then says what is wrong). The schema's zod costs
 * every `vak exec --profile git` (its preset passes variables) tens of ms.
 */
async function configuredProviders(): Promise<{ providers: Readonly<Record<string, { api_key_env?: string | undefined }>> }> {
  const path = userConfigPath(process.env);
  // No config (what a preset passing variables usually meets): no TOML parser to load.
  if (!exists(path)) return { providers: {} };
  const { parseToml, readConfigText } = await import("../policy/profiles-file.js");
  const text = readConfigText(path);
  const providers = text === undefined ? undefined : parseToml(text, path).providers;
  if (providers === undefined) return { providers: {} };
  const table = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (table(providers) && Object.values(providers).every((p) => table(p) && (p.api_key_env === undefined || typeof p.api_key_env === "string")))
    return { providers: providers as Record<string, { api_key_env?: string }> };
  const { loadUserConfig } = await import("../policy/config.js");
  return loadUserConfig(path);
}

/**
 * The user's [egress] settings. With no config file at all, its defaults, without loading the config's schema:
 * zod and the schemas cost ~15 ms of the start of every run whose gate terminates TLS. Any other file, or an
 * error other than its absence, goes through loadUserConfig as before (checked whole, errors and all).
 */
async function userEgress(): Promise<{ ca_files: string[]; upstream_proxy?: string | undefined }> {
  try {
    statSync(userConfigPath());
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { ca_files: [] };
  }
  const { loadUserConfig } = await import("../policy/config.js");
  return loadUserConfig().egress;
}

/** Whether the user's config has an [egress] table, looked for without loading the config's schema (zod costs ~60 ms). */
function egressConfigured(): boolean {
  try {
    return /^\s*\[egress\]/m.test(readFileSync(join(vakDirs().config, "config.toml"), "utf8"));
  } catch {
    return false;
  }
}

/**
 * --allow-env does not pass a model provider's key (by its variable, or by a
 * variable that holds its value): a key goes to a command only as a declared
 * secret, which is recorded by reference and redacted (--secret NAME=env:NAME).
 * The user's config is read for its providers only when there is one.
 */
export async function refuseProviderKeys(names: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const keys = providerKeys(await configuredProviders(), env);
  for (const name of names) {
    const problem = providerKeyProblem(name, env[name], keys);
    if (problem) throw new VakError("bad-input", `--allow-env ${name} is refused, since ${problem}; a key goes to a command only as a secret, on the record and redacted: --secret ${name}=env:${name}`);
  }
}

/**
 * Nor does a set_env (a profile's, a trusted repository config's) whose value holds one: `${OPENAI_API_KEY}`
 * there copies the key as surely as --allow-env would. A literal value under a key's name (a local server's
 * dummy key) is the config's own and passes.
 */
async function refuseProviderKeysSet(set: ReadonlyMap<string, Granted>, env: NodeJS.ProcessEnv): Promise<void> {
  const keys = providerKeys(await configuredProviders(), env);
  for (const [name, g] of set) {
    const problem = providerKeyProblem(name, g.value, { vars: [], values: keys.values });
    if (problem) throw new VakError("bad-input", `set_env ${name} (${describeSource(g.source)}) is refused, since ${problem}; a key goes to a command only as a secret, on the record and redacted: --secret ${name}=env:VARIABLE`);
  }
}

/** A network rule that does not parse, said where it was written: a profile's file, line and key rather than a flag the user never gave. */
function netRuleError(message: string, c: Composition): VakError {
  for (const [key, flag] of [["allow_net", "--allow-net"], ["deny_net", "--deny-net"]] as const)
    for (const g of c.lists[key]) {
      if (g.source.kind !== "profile" || !(message.startsWith(`${flag} ${g.value}:`) || message.startsWith(`${g.value}:`))) continue;
      const p = g.source.profile;
      return keyError(p.file, p.line(key), [...p.table, key], message.replace(`${flag} `, ""));
    }
  return new VakError("bad-input", message);
}

/**
 * Where one `vak exec` comes from: this process (its cwd, environment, stdio
 * and signals), or a client of the resident host (src/resident/), whose
 * descriptors the host received. The plan and the record are the same either way.
 */
export interface ExecContext {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The command's stdin, stdout and stderr: this process's own, or descriptors. */
  stdio: [StdioSlot, StdioSlot, StdioSlot];
  /** Where Vak's own lines go: the descriptor OwnLines looks at, and the output module's stream on it (redacted, neutralised). */
  errFd: number;
  err: Output;
  /** Calls stop(signal) when the user asks the command to stop; returns what unsubscribes it. */
  onStop(stop: (signal: NodeJS.Signals) => void): () => void;
  /**
   * A terminal of the resident host's client (src/resident/terminal.ts): whether it is in the foreground (the
   * launcher cannot ask a terminal that is not its own), the client's pid (whose process group must stay the
   * foreground for the launcher to read what is typed), and when its window changes (SIGWINCH reaches the
   * client, not the launcher). In-process there is none: the launcher sees its own terminal and its signals.
   */
  terminal?: { foreground: boolean; client: number; onResize(resize: () => void): () => void } | undefined;
  /**
   * The resident host's journal, held open: the run is recorded into it directly (its group commit), durable
   * before the command starts as in-process, with no spool file. In-process there is none: the spool.
   */
  journal?: Journal | undefined;
  /** Starts the launcher without a fork of this process (the resident host's addon); else Node's spawn. */
  spawner?: Spawner | undefined;
  /** The resident host that serves the run, as the run's session.started names it (src/resident/orphans.ts). */
  servedBy?: Payload | undefined;
  /**
   * The held-path walk's directories from the runs before (src/policy/walk-cache.ts): the resident host's, kept
   * in its memory. In-process there is none: every directory is read (a file of them cost as much to read and
   * check as the listings it saved, measured).
   */
  walkCache?: WalkCache | undefined;
}

type StdioSlot = "inherit" | number;

/** This process as the context: `vak exec` in-process, as without a host. */
export function processContext(): ExecContext {
  return {
    cwd: process.cwd(),
    env: process.env,
    stdio: ["inherit", "inherit", "inherit"],
    errFd: 2,
    spawner: nativeSpawner(),
    err: processOutput().err,
    onStop(stop) {
      for (const s of STOP_SIGNALS) process.on(s, stop);
      return () => {
        for (const s of STOP_SIGNALS) process.off(s, stop);
      };
    },
  };
}

export async function execCommand(command: string[], opts: ExecOptions, ctx: ExecContext = processContext()): Promise<number> {
  const fullAccess = fullAccessOf(opts);
  // The workspace defaults to the caller's cwd, and a relative --workspace is relative to it (the resident
  // host's client's cwd, not the host's own); "~", an absolute path and "" (refused) are left as given.
  const ws = opts.workspace;
  const workspace = ws === undefined ? ctx.cwd : ws === "" || ws === "~" || ws.startsWith("~/") || isAbsolute(ws) ? ws : resolve(ctx.cwd, ws);
  const r = await resolveGrants({ ...opts, workspace }, { execDefaults: true, env: ctx.env });
  const mode: Mode = fullAccess ? "full-access" : r.mode;
  for (const name of r.grants.env)
    if (!ENV_NAME.test(name)) throw new VakError("bad-input", `--allow-env ${name}: not an environment variable name (letters, digits and _)`);
  if (r.grants.env.length) await refuseProviderKeys(r.grants.env, ctx.env);
  if (r.composition.setEnv.size) await refuseProviderKeysSet(r.composition.setEnv, ctx.env);
  const sandbox: SandboxKind = mode === "full-access" ? "none" : (opts.sandbox as SandboxKind);
  let net: NetGrants | undefined;
  if (r.allowNet.length || r.denyNet.length) {
    // The network code (http, dns, ipaddr) loads only when a command asks for the network.
    const { parseNetGrants, RuleError } = await import("../policy/net-grants.js");
    try {
      net = parseNetGrants(r.allowNet, r.denyNet);
    } catch (e) {
      if (e instanceof RuleError) throw netRuleError(e.message, r.composition);
      throw e;
    }
  }
  // Whether the gate terminates TLS or holds endpoints for this run (besides secrets it holds): its CA, trust
  // bundles and upstream settings are then prepared (exec-net.ts).
  const gateTls = Boolean(net?.allow.length && (opts.endpoint?.length || opts.caFile?.length || ctx.env.NODE_EXTRA_CA_CERTS || egressConfigured() || (await import("../policy/net-grants.js")).needsInspection(net)));
  const dryRun = Boolean(opts.printPlan || opts.dryRun);
  // Secrets are resolved only for a real run: a dry run shows their references.
  const secrets = dryRun ? [] : await secretsOf(r.secrets, ctx);
  if (!dryRun) createStatePaths(r.composition.create);
  const gateHeld = secrets.filter((x) => x.hosts);
  if ((gateHeld.length || opts.endpoint?.length || opts.caFile?.length) && !net?.allow.length)
    throw new VakError("bad-input", "a secret held by the gate (NAME=REF@HOST), --endpoint and --ca-file need a network grant: add --allow-net HOST");
  // Secrets held by the gate, provider endpoints, and TLS at the gate load only for runs that use them (never for a dry run).
  let netx: ExecNet | undefined;
  if (!dryRun && net?.allow.length && (gateHeld.length || gateTls)) {
    const { prepareExecNet } = await import("./exec-net.js");
    netx = await prepareExecNet({ net, secrets, endpoints: opts.endpoint ?? [], caFiles: opts.caFile ?? [], config: await userEgress(), hostEnv: ctx.env as Record<string, string>, cwd: ctx.cwd });
  }
  let scratch: { tmp: string; home: string } | undefined;
  if (sandbox === "reduced" && !dryRun) {
    // No private mounts without namespaces: TMPDIR and HOME are fresh host directories, removed afterwards.
    const root = mkdtempSync(join(tmpdir(), "vak-scratch-"));
    mkdirSync(join(root, "tmp"), { mode: 0o700 });
    mkdirSync(join(root, "home"), { mode: 0o700 });
    scratch = { tmp: join(root, "tmp"), home: join(root, "home") };
  }
  try {
    const input: PlanInput = {
      mode, sandbox, workspace: r.workspace, cwd: opts.workspace ? undefined : ctx.cwd, limits: r.limits, command,
      // A dry run creates nothing: what a profile would create is listed, not granted.
      grants: dryRun ? { ...r.grants, write: r.grants.write.filter((p) => !r.composition.create.some((x) => x.path === p)) } : r.grants,
      scratch: scratch ?? (sandbox === "reduced" ? { tmp: "/nonexistent/tmp", home: "/nonexistent/home" } : undefined), net,
      files: r.files, named: r.named, setEnv: r.setEnv, runtime: netx?.runtime,
    };
    const host = { ...hostFacts(ctx.env), walkCache: ctx.walkCache };
    // The resident host serves every terminal of the user in one process: its held-path walk goes in slices there.
    // In-process, nothing else waits on this process: one piece, the cheaper.
    const plan = ctx.servedBy ? await decideSliced(input, host) : decide(input, host);
    if (dryRun) {
      const { planView, printPlan } = await import("./exec-plan.js");
      const view = planView(plan, r);
      if (opts.json) processOutput().out.json(view);
      else printPlan(view, processOutput().out);
      return 0;
    }
    for (const n of r.notes) ctx.err.line(fmt`vak: ${n}`);
    const hints = await import("./exec-hints.js");
    let index: PresetEntry[] | undefined;
    const presets = () => (index ??= hints.presetIndex());
    let envLines: string[] = [];
    if (plan.sandbox !== "none") {
      const applied = r.composition.applied.map((p) => p.name);
      const program = hints.programHints(plan, ctx.env, presets);
      envLines = hints.droppedEnvHints(plan, applied, ctx.env, presets());
      for (const line of [...envLines, ...(program.before ? [program.before] : [])]) ctx.err.line(fmt`vak: ${line}`);
    }
    if (netx && plan.sandbox === "none")
      throw new VakError("bad-input", "--full-access has no egress gate: a secret held by the gate, --endpoint and --ca-file need the sandbox");
    // A secret is in this command's environment for its life, and nowhere else; one the gate holds is a placeholder here.
    for (const x of secrets) if (!x.hosts) plan.env[x.name] = x.value;
    // From here on every line about the run and its record know the secrets' values (and their spellings):
    // a path or a host the command chose can carry one (`cat /x/$TOKEN`, a lookup of `$TOKEN.example`).
    const redactor = secretsRedactor(secrets.map((x) => x.value));
    const run: ExecContext = { ...ctx, err: ctx.err.also(redactor) };
    // A host tool's state that already holds what its tool would follow: refused, named, on the record.
    if (plan.sandbox !== "none" && plan.grants.noLinks.length) await (await import("./exec-state.js")).refuseStateEntries(plan, r.composition, run, redactor);
    if (netx) Object.assign(plan.env, netx.env);
    const used = secrets.filter((x) => !x.hosts).map((x) => ({ ref: x.ref, recipient: `env ${x.name}` }));
    for (const x of gateHeld) used.push({ ref: x.ref, recipient: `placeholder in env ${x.name}; the gate puts the value in request headers for ${x.hosts!.join(", ")}` });
    if (plan.sandbox === "none") return await runUnsandboxed(plan, opts, used, run, redactor);
    // Refused before anything is recorded: root, no image, a stale one (the run would not start anyway).
    if (plan.sandbox === "container") containerPreflight();
    // --explain's collector loads only when asked for.
    const explainer = opts.explain ? new (await import("./exec-explain.js")).Explain(plan, ctx.env.HOME || undefined) : undefined;
    return await runSandboxed(plan, opts, used, run, { r, presets, explain: explainer, envLines, env: ctx.env, redactor }, netx);
  } finally {
    if (scratch) rmSync(dirname(scratch.tmp), { recursive: true, force: true });
    netx?.close();
  }
}

async function runUnsandboxed(plan: LaunchPlan, opts: ExecOptions, secrets: SecretUse[], ctx: ExecContext, redactor: Redactor): Promise<number> {
  const record = await ExecRecord.start(plan, secrets, redactor, ctx.journal, ctx.servedBy);
  ctx.err.line(own("vak: --full-access: running WITHOUT a sandbox, by your explicit decision"));
  const [cmd, ...args] = plan.command;
  // make's jobserver, handed on as without Vak (jobserver.ts).
  const stdio = withFds(ctx.stdio, jobserverFds(plan.env));
  const child = process.getBuiltinModule("node:child_process").spawn(cmd!, args, { stdio, cwd: plan.cwd, env: plan.env });
  const code = await new Promise<number>((resolve) => {
    child.on("error", (e) => {
      ctx.err.line(fmt`vak: ${cmd}: ${e.message}`);
      resolve((e as NodeJS.ErrnoException).code === "ENOENT" ? 127 : 126);
    });
    child.on("close", (c, s) => resolve(c ?? 128 + (s ? 9 : 0)));
  });
  await record.finish(undefined, code);
  if (opts.json) new OwnLines(ctx.errFd, ctx.err).json({ exit: code, mode: plan.mode, sandbox: "none" });
  return code;
}

/** Is vak's stderr something whose last byte it cannot read (a pipe, a socket, a terminal)? The monitor then keeps it (line-start.ts). */
function unseen(fd: number): boolean {
  try {
    const st = fstatSync(fd);
    return st.isFIFO() || st.isSocket() || st.isCharacterDevice();
  } catch {
    return false;
  }
}

/** What the lines about refusals and missing grants need: where each grant came from, and the presets' index. */
interface HintSources {
  r: ResolvedGrants;
  presets: () => PresetEntry[];
  /** --explain: what the run reached for, summed up at the end. */
  explain?: Explain | undefined;
  /** The variables the allowlist dropped that the command may read, as said before the run. */
  envLines: string[];
  /** The caller's environment (the resident host's client's, not the host's own). */
  env: NodeJS.ProcessEnv;
  /** Knows the values of the secrets the command was given: for the run's record (ctx.err redacts them too). */
  redactor: Redactor;
}

async function runSandboxed(plan: LaunchPlan, opts: ExecOptions, secrets: SecretUse[], ctx: ExecContext, sources: HintSources, netx?: ExecNet): Promise<number> {
  // Nothing runs unrecorded: the policy and the plan are committed before the command starts. The launcher's own
  // sandboxes are built meanwhile, the command held before its exec until the commit returned (launchHeld).
  const { record, durable } = ExecRecord.open(plan, secrets, sources.redactor, ctx.journal, ctx.servedBy);
  if (plan.sandbox === "container") await durable;
  const egress: EgressSeen = { kept: [], omitted: 0, refused: 0 };
  // Refusals print as they happen, each on a line of its own (and no empty line before it).
  const lines = new OwnLines(ctx.errFd, ctx.err);
  const refusals = new Refusals(plan, sources.r, sources.presets, (line) => {
    sources.explain?.alsoSaid(line);
    lines.line(fmt`vak: ${line}`);
  });
  let gate: { link: GateLink; close(): Promise<void> } | undefined;
  try {
    if (plan.network.kind === "gate") {
      try {
        gate = await (await import("./exec-egress.js")).startGate(plan.network.grants, (e) => {
          if (egress.kept.length < MAX_EGRESS_KEPT) egress.kept.push(e);
          else egress.omitted += 1;
          if (e.decision === "denied") egress.refused += e.count ?? 1;
          refusals.egress(e);
          record.egress(e);
          // Fail closed: a request whose decision cannot be recorded is not sent (the gate drops it).
          if (record.failed) throw record.failed;
        }, () => record.sync(), netx?.gate);
      } catch (caught) {
        // The run's start is on the record, so its end is too: nothing ran (its engine missing, or its code gone
        // with an upgrade under this process).
        const e = upgradeError(caught) ?? caught;
        await record.finish(undefined, EXIT_REFUSED, { error: (e as Error).message }).catch(() => undefined);
        throw e;
      }
    }
    return await runWithGate(plan, opts, egress, gate, record, durable, refusals, lines, sources, ctx, netx);
  } finally {
    await gate?.close();
  }
}

async function runWithGate(
  plan: LaunchPlan, opts: ExecOptions, egress: EgressSeen, gate: { link: GateLink; close(): Promise<void> } | undefined, record: ExecRecord, durable: Promise<void>,
  refusals: Refusals, own: OwnLines, sources: HintSources, ctx: ExecContext, netx?: ExecNet,
): Promise<number> {
  const started = process.hrtime.bigint();
  let seen = 0;
  const onReport = (rep: Report) => {
    seen += 1;
    if (rep.event === "denied") refusals.denied(rep);
    else if (rep.event === "dns") refusals.dns(rep.name);
    else if (rep.event === "missing") sources.explain?.missing(rep.op, rep.path, rep.more);
  };
  // stdio is vak's own: the launcher keeps the terminal out of the sandbox (a pty of its own in
  // between) and counts every byte of output against --max-output (native/terminal.c).
  const how = { maxOutput: plan.limits.maxOutputBytes, onReport, explain: sources.explain !== undefined, foreground: ctx.terminal?.foreground ? ctx.terminal.client : undefined, spawner: ctx.spawner, lineWord: unseen(ctx.errFd) };
  let sb: RunningSandbox;
  let held: HeldSandbox | undefined;
  // The gate's TLS (every upstream root parsed, the first leaves) is ready before the command starts, so that its
  // first request does not wait for it; for a held command it is made while the launcher builds the sandbox.
  if (plan.sandbox === "container") {
    await netx?.tls?.warm();
    sb = launch(plan, ctx.stdio, gate?.link, how);
  } else {
    // The start's fdatasync (or the journal's commit) is on its thread already (ExecRecord.open), and the launcher
    // starts by posix_spawn, which blocks this thread for its exec only.
    sb = held = launchHeld(plan, ctx.stdio, gate?.link, how);
  }
  record.onFailure = () => sb.kill("SIGKILL");
  own.follow(sb.lineWord);

  let stopping = false;
  let killTimer: NodeJS.Timeout | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) return sb.kill("SIGKILL");
    stopping = true;
    sb.kill(sig);
    killTimer = setTimeout(() => sb.kill("SIGKILL"), KILL_AFTER_MS);
  };
  const unsubscribe = ctx.onStop(onSignal);
  // The monitor reads the terminal's new size itself (native/terminal.c): the signal only says when.
  const unresize = ctx.terminal?.onResize(() => sb.kill("SIGWINCH"));

  let result: LaunchResult;
  try {
    if (held) {
      try {
        await netx?.tls?.warm();
        await durable;
      } catch (e) {
        // The start could not be recorded (or the gate's TLS not made): the held command never runs (its word's end
        // closed), the sandbox is taken down.
        held.never();
        held.kill("SIGKILL");
        await sb.result.catch(() => undefined);
        throw e;
      }
      held.start();
    }
    result = await sb.result;
  } finally {
    unsubscribe();
    unresize?.();
    if (killTimer) clearTimeout(killTimer);
  }
  // The sandbox is gone: closing the gate records how its last requests ended, and the refusal counts, before the record closes.
  await gate?.close();
  const outputExceeded = result.outputExceeded;
  // What the watcher did not see yet (the last moments of the run), then how many more of each.
  for (const rep of result.reports.slice(seen)) onReport(rep);
  const signaled = result.reports.find((x) => x.event === "signaled");
  const hits = limitsHit(plan.limits, plan.defaultMaxProcs, {
    code: result.code, signal: signaled?.event === "signaled" ? signaled.signal : undefined, timedOut: result.timedOut, outputExceeded,
    procsHit: result.limits?.procs_hit ?? 0, oomKills: result.limits?.oom_kills ?? 0, memoryCgroup: result.limits?.memory_cgroup ?? false,
  });
  let code = explain(plan, result, outputExceeded, own, refusals, sources, hits);
  if (sources.explain) for (const l of sources.explain.lines(sources.presets(), sources.envLines)) own.line(fmt`vak: ${l}`);
  if (record.failed) {
    own.line(fmt`vak: ${record.failed.message}; the sandbox was stopped`);
    code = EXIT_REFUSED;
  }
  await record.finish(result, code, { outputExceeded, limitsHit: hits.map(({ limit, flag, value, ended, what }) => ({ limit, flag, value, ended, what })) });
  if (opts.json) {
    own.json(
      {
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
      },
    );
  }
  return code;
}

/** Prints what the sandbox refused and why the run ended, and picks the exit status. */
function explain(plan: LaunchPlan, r: LaunchResult, outputExceeded: boolean, lines: OwnLines, refusals: Refusals, sources: HintSources, hits: LimitHit[]): number {
  // What the command chose (its paths, its hosts) and what the launcher reports are shown neutralised.
  const err = (t: Text) => lines.line(fmt`vak: ${t}`);
  if (r.malformed.length) {
    err(fmt`the sandbox launcher sent ${r.malformed.length} unreadable report line(s); treating the run as failed`);
    return EXIT_REFUSED;
  }
  if (r.setupError) {
    const inside = plan.sandbox === "container" && (r.setupError.step === "namespaces" || r.setupError.step === "view");
    const reduced = inside
      ? " (inside the container: does the host's AppArmor or SELinux policy refuse mounts or user namespaces there? see the README's container backend section)"
      : r.setupError.step === "namespaces" ? "; to run with Landlock, seccomp and the write guard only, pass --sandbox reduced" : "";
    err(fmt`could not set up the sandbox (${r.setupError.step}): ${r.setupError.message}${reduced}`);
    return EXIT_REFUSED;
  }
  if (r.guardDied) {
    err(own("the write guard died while the command ran; the sandbox was stopped, and the run is not to be trusted"));
    return EXIT_REFUSED;
  }
  refusals.finish();
  if (r.execError) {
    err(fmt`${r.execError.message}`);
    // A program outside the view: which grant would show it.
    if (r.execError.errno === 2) {
      const h = programHints(plan, sources.env, sources.presets).notFound;
      if (h) err(fmt`${h}`);
    }
    return r.code;
  }
  if (r.code === 127) {
    const h = droppedPathHint(plan, sources.presets());
    if (h) err(fmt`${h}`);
  }
  // A script or a module it was given that it could not see (`node /elsewhere/m.js`): which grant would show it.
  if (r.code !== 0 && plan.sandbox !== "none") for (const h of outsidePathHints(plan, sources.presets())) err(fmt`${h}`);
  // Every limit that ended the command, or refused something while it ran, has its line: which, its value, how to raise it.
  for (const h of hits) err(fmt`${limitLine(h, plan.limits, plan.defaultMaxProcs)}`);
  if (outputExceeded) return EXIT_REFUSED;
  if (r.timedOut) return EXIT_TIMEOUT;
  return r.code;
}

