import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { openJournal } from "../journal/open.js";
import { McpRecord } from "../mcp/record.js";
import { PinStore } from "../mcp/pins.js";
import { StderrRelay } from "../mcp/stderr.js";
import { connect, type EndReason } from "../mcp/worker.js";
import type { NetGrants } from "../policy/net-grants.js";
import { ENV_NAME } from "../policy/env.js";
import { VakError } from "../policy/errors.js";
import type { Grants } from "../policy/grants.js";
import { decide, type SandboxKind } from "../policy/plan.js";
import { hostFacts } from "../sandbox/host.js";
import { envSecrets } from "../secrets/env-secrets.js";
import type { Limits } from "../policy/limits.js";
import { type ExecOptions, refuseProviderKeys } from "./exec.js";
import { EXIT_REFUSED } from "./exit.js";
import { fmt, processOutput, protocolStdout } from "./output.js";
import { visible } from "../text/visible.js";

export interface McpOptions extends ExecOptions {
  name?: string;
  denyTool?: string[];
  ask?: string[];
  maxMessage?: number;
}

const STOP_SIGNALS: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
/** The largest message either side may send by default: room for images and resources, bounded. */
export const DEFAULT_MAX_MESSAGE = 8 * 1024 * 1024;

/** The ceilings `vak mcp` takes (a server runs for the connection: no --timeout, and its output is the protocol). */
function limitsOf(opts: McpOptions): Limits {
  const l: Limits = {};
  if (opts.maxProcs) l.maxProcs = opts.maxProcs;
  if (opts.maxMemory) l.maxMemoryBytes = opts.maxMemory;
  if (opts.maxFileSize) l.maxFileBytes = opts.maxFileSize;
  return l;
}

/** The server's identity for pins and the record: --name, else its command line. */
export function serverName(command: readonly string[], name?: string): string {
  const n = name ?? command.join(" ");
  if (!n || n.length > 300 || /[\u0000-\u001f\u007f]/.test(n))
    throw new VakError("bad-input", `--name: a server name is 1 to 300 printable characters${name === undefined ? " (the command line is too long to be one: pass --name)" : ""}`);
  return n;
}

/** `vak mcp [grants] -- CMD [ARGS...]`: the server in the sandbox for the life of the connection, every message checked. */
export async function mcpServe(command: string[], opts: McpOptions): Promise<number> {
  if (opts.fullAccess || opts.mode === "full-access")
    throw new VakError("unsupported", "vak mcp always runs the server in the sandbox; grant what it needs instead (--allow-read, --allow-write, --allow-net)");
  if (command.length === 0) throw new VakError("bad-input", "no server command given; usage: vak mcp [options] -- CMD [ARGS...]");
  const server = serverName(command, opts.name);
  for (const name of opts.allowEnv ?? [])
    if (!ENV_NAME.test(name)) throw new VakError("bad-input", `--allow-env ${name}: not an environment variable name (letters, digits and _)`);
  if (opts.allowEnv?.length) await refuseProviderKeys(opts.allowEnv);
  const secrets = await envSecrets(opts.secret ?? []);
  if (secrets.some((x) => x.hosts))
    throw new VakError("unsupported", "--secret NAME=REF@HOST: vak mcp gives secrets to the server's environment only; drop the @HOST");
  const grants: Grants = { read: opts.allowRead ?? [], write: opts.allowWrite ?? [], denyRead: opts.denyRead ?? [], denyWrite: opts.denyWrite ?? [], noLinks: [], env: opts.allowEnv ?? [] };
  let net: NetGrants | undefined;
  if (opts.allowNet?.length || opts.denyNet?.length) {
    const { parseNetGrants, RuleError } = await import("../policy/net-grants.js");
    try {
      net = parseNetGrants(opts.allowNet ?? [], opts.denyNet ?? []);
    } catch (e) {
      if (e instanceof RuleError) throw new VakError("bad-input", e.message);
      throw e;
    }
  }
  const sandbox = opts.sandbox as SandboxKind;
  const made: string[] = [];
  try {
    let workspace = opts.workspace;
    const cwd = process.cwd();
    if (workspace === undefined && (cwd === "/" || cwd === homedir())) {
      // Clients often start servers in / or the home directory: neither is a workspace. The server gets an empty one.
      workspace = mkdtempSync(join(tmpdir(), "vak-mcp-"));
      made.push(workspace);
      processOutput().err.line(fmt`vak: mcp ${server}: started in ${cwd}, which is not a workspace; the server gets an empty one (pass --workspace DIR to give it one)`);
    }
    let scratch: { tmp: string; home: string } | undefined;
    if (sandbox === "reduced") {
      const root = mkdtempSync(join(tmpdir(), "vak-scratch-"));
      made.push(root);
      mkdirSync(join(root, "tmp"), { mode: 0o700 });
      mkdirSync(join(root, "home"), { mode: 0o700 });
      scratch = { tmp: join(root, "tmp"), home: join(root, "home") };
    }
    const plan = decide(
      { mode: (opts.mode ?? "read-only") as "read-only" | "workspace-write", sandbox, workspace: workspace ?? cwd, cwd: workspace ? undefined : cwd, grants, limits: limitsOf(opts), command, scratch, net },
      hostFacts(),
    );
    for (const x of secrets) plan.env[x.name] = x.value;
    return await serve(server, plan, opts, secrets);
  } finally {
    for (const d of made) rmSync(d, { recursive: true, force: true });
  }
}

async function serve(server: string, plan: ReturnType<typeof decide>, opts: McpOptions, secrets: { name: string; ref: string; value: string }[]): Promise<number> {
  const journal = await openJournal();
  for (const x of secrets) journal.redactor.add(x.value);
  const redact = <T>(v: T): T => journal.redactor.value(v);
  const err = processOutput(journal.redactor).err;
  const say = (text: string) => err.line(fmt`vak: mcp ${server}: ${text}`);
  const ask = opts.ask?.includes("all") ? ("all" as const) : new Set(opts.ask ?? []);
  const record = await McpRecord.start(journal, {
    server, plan, tools: { deny: opts.denyTool ?? [], ask: ask === "all" ? "all" : [...ask] },
    secrets: secrets.map((x) => ({ ref: x.ref, recipient: `env ${x.name}` })),
  });
  let gate: { link: { dir: string; token: string }; close(): Promise<void> } | undefined;
  if (plan.network.kind === "gate")
    gate = await (await import("./exec-egress.js")).startGate(plan.network.grants, (e) => {
      record.egress(e);
      if (e.decision === "denied" && e.count === undefined) say(`refused ${e.method === "-" ? "a connection" : `${e.method} ${e.asked}`}: ${e.reason}`);
      if (record.failed) throw record.failed;
    }, () => record.durable());

  const out = protocolStdout();
  const conn = connect({
    plan, gate: gate?.link, clientIn: process.stdin, clientOut: out, maxMessage: opts.maxMessage ?? DEFAULT_MAX_MESSAGE,
    // The relay redacts and neutralises the server's text and prefixes it with the server's name; the output prints the line as it made it.
    stderr: new StderrRelay({ name: `mcp ${visible(server).slice(0, 60)}`, write: (s) => err.relayed(s), redact: (s) => journal.redactor.text(s), neutralise: visible }),
    relay: {
      policy: { server, deny: new Set(opts.denyTool ?? []), ask }, pins: new PinStore(), command: plan.command, record, warn: say,
      reach: { paths: [...plan.grants.read, ...plan.grants.write], denied: plan.grants.denyRead }, neutralise: visible, redact,
      ...(secrets.length ? { scrub: <T>(v: T): T => journal.redactor.value(v, 0, (t) => journal.redactor.knownOnly(t)) } : {}),
    },
  });
  record.onFailure = (e) => {
    say(`${e.message}; the server was stopped`);
    conn.stop("record");
  };
  let signalled = false;
  const onSignal = () => {
    if (signalled) return;
    signalled = true;
    conn.stop("signal");
  };
  for (const s of STOP_SIGNALS) process.on(s, onSignal);
  let ended: { result: Awaited<typeof conn.ended>["result"]; why: EndReason };
  try {
    ended = await conn.ended;
  } finally {
    for (const s of STOP_SIGNALS) process.off(s, onSignal);
  }
  await gate?.close();
  const { result, why } = ended;
  let code = why === "server" ? result.code : 0;
  if (result.setupError) {
    say(`could not set up the sandbox (${result.setupError.step}): ${result.setupError.message}`);
    code = EXIT_REFUSED;
  } else if (result.execError) {
    say(result.execError.message);
    code = result.code;
  } else if (why === "server") say(`the server exited (status ${result.code})`);
  for (const d of result.denied.slice(0, 5)) say(`refused ${d.op} ${d.path}: ${d.reason}`);
  if (result.denied.length > 5) say(`… and ${result.denied.length - 5} more refusals`);
  if (record.failed) code = EXIT_REFUSED;
  const drops = record.dropCounts();
  if (drops.length) say(`dropped ${drops.map((d) => `${d.count} × ${d.from}: ${d.problem}`).slice(0, 5).join("; ")}`);
  await record.finish(result, code, { ended: why });
  await journal.close().catch(() => undefined);
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, 1000);
    out.end(() => {
      clearTimeout(t);
      resolve();
    });
  });
  return code;
}
