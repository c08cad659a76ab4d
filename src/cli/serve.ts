import { realpathSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { parse } from "smol-toml";
import { AgentSession } from "../agent/agent-session.js";
import type { Journal } from "../journal/journal.js";
import { openJournal } from "../journal/open.js";
import { resolveModel } from "../model/providers.js";
import { loadUserConfig, userConfigPath } from "../policy/config.js";
import { VakError } from "../policy/errors.js";
import { isWithin } from "../policy/paths.js";
import { MAX_CONFIG_BYTES } from "../policy/config-text.js";
import { readPlainFile } from "../policy/plain-file.js";
import { type HostedSession, hostAgent, hostWorkload, type SessionHooks } from "../server/hosted.js";
import { startServer } from "../server/server.js";
import { loadSpec } from "../workload/spec.js";
import { WorkloadSession } from "../workload/workload-session.js";
import type { CreateSession } from "../server/wire.js";
import { type AgentFlags, sessionOptionsWith } from "./agent-options.js";
import { visible } from "../text/visible.js";
import { fmt, own, processOutput } from "./output.js";

/**
 * `vak serve`: the browser client, in this process, which hosts the sessions
 * it starts. Sessions get the grant flags `vak serve` was given (the browser
 * chooses only the mode, the model and a directory inside the workspace);
 * where it listens and who may reach it is the user's `[server]` config
 * alone.
 */
export interface ServeFlags extends AgentFlags {
  port?: number;
  json?: boolean;
}

/** A repository's .vak/config.toml that sets [server] is said to be ignored: [server] is user-tier only. */
export function repositoryServerNotice(workspace: string): string | undefined {
  const path = join(workspace, ".vak", "config.toml");
  try {
    // A regular file of a config's size only (a repository's file: a FIFO or gigabytes would hold the server up).
    const bytes = readPlainFile(path, MAX_CONFIG_BYTES);
    if (!bytes) return undefined;
    const data = parse(bytes.toString("utf8")) as Record<string, unknown>;
    if (!("server" in data)) return undefined;
  } catch {
    return undefined;
  }
  return `vak serve: ${path} sets [server]; ignored: where vak listens, which hosts it answers and the terminal are set in your own config only (${userConfigPath()})`;
}

/** A path the browser named, inside the workspace `vak serve` runs in (after links are resolved), or a refusal. */
function inside(root: string, asked: string | undefined, what: string): string {
  const p = asked === undefined ? root : isAbsolute(asked) ? asked : resolve(root, asked);
  let real: string;
  try {
    real = realpathSync(p);
  } catch (e) {
    throw new VakError("bad-input", `${what} ${asked}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "does not exist" : (e as Error).message}`);
  }
  if (!isWithin(real, root)) throw new VakError("bad-input", `${what} ${asked}: outside the workspace vak serve was started in (${root})`);
  return real;
}

/** Makes the sessions the browser asks for, with the flags `vak serve` was given. */
export function sessionFactory(flags: ServeFlags, journal: Journal, root: string) {
  return (body: CreateSession, hooks: SessionHooks): HostedSession => {
    const ceiling = flags.mode === "read-only" ? "read-only" : "workspace-write";
    if (ceiling === "read-only" && body.mode !== "read-only") throw new VakError("bad-input", "this server was started with --mode read-only: its sessions are read-only");
    if (body.kind === "agent") {
      const workspace = inside(root, body.workspace, "workspace");
      const { options } = sessionOptionsWith({ ...flags, mode: body.mode, model: body.model ?? flags.model, workspace }, journal);
      const title = body.title ?? (body.prompt ? body.prompt.slice(0, 200) : "web session");
      const s = new AgentSession({ ...options, title, onEvent: hooks.onEvent, onApproval: hooks.onApproval, onApprovalSettled: hooks.onApprovalSettled, onPolicy: hooks.onPolicy });
      return hostAgent(s, title, workspace, ceiling);
    }
    const spec = inside(root, body.spec, "spec");
    const plan = loadSpec(spec, { mode: body.mode });
    const config = loadUserConfig();
    const model = resolveModel(body.model ?? flags.model ?? plan.harness.model, config);
    const s = new WorkloadSession(plan, {
      model: model.client, journal, mode: body.mode, secrets: model.key ? [model.key] : [], secretCommands: config.secret_commands,
      sandbox: flags.sandbox === "reduced" ? "reduced" : "namespaces",
      onEvent: hooks.onEvent, onApproval: hooks.onApproval, onApprovalSettled: hooks.onApprovalSettled,
    });
    return hostWorkload(s);
  };
}

export async function serveCommand(flags: ServeFlags): Promise<number> {
  const config = loadUserConfig();
  let root: string;
  try {
    root = realpathSync(flags.workspace ?? process.cwd());
  } catch (e) {
    throw new VakError("bad-input", `--workspace ${flags.workspace}: ${(e as Error).message}`);
  }
  const notice = repositoryServerNotice(root);
  const journal = await openJournal({ config });
  const { out, err } = processOutput(journal.redactor);
  // The notice names the repository's file and what it asks for: a line of Vak's with the repository's text in it, through the output.
  if (notice) err.relayed(visible(journal.redactor.text(notice)));
  const filter = (s: string) => visible(journal.redactor.text(s));
  // The server's log lines are its own, with what it was sent already through the filter.
  const log = (line: string) => err.relayed(filter(line));
  let server;
  try {
    server = await startServer({
      config: config.server, port: flags.port, journal, filter, log,
      factory: sessionFactory(flags, journal, root),
      info: { workspace: root, model: flags.model ?? config.model.default ?? null, mode: flags.mode, version: 1 },
    });
  } catch (e) {
    await journal.close().catch(() => undefined);
    throw e;
  }
  // The URL and the token are Vak's own (the token is not a secret the redactor should hide from the one who asked for it).
  if (flags.json) out.line(own(JSON.stringify({ url: server.url, token: server.token, loginUrl: server.loginUrl })));
  else {
    out.line(own(server.loginUrl ? `vak serve: open ${server.loginUrl}` : `vak serve: open ${server.url} and log in with the token: ${server.token}`));
    if (!server.exposure.loopback) out.line(fmt`  exposed on ${server.exposure.bindHost}:${own(String(server.port))} as ${server.exposure.trustedHosts.join(", ")}`);
    out.line(own("  Ctrl-C stops the server and every session it hosts."));
  }
  await new Promise<void>((done) => {
    const stop = () => done();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  await server.close();
  await journal.close();
  return 0;
}
