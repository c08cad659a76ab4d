import { Argument, Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { isVakError, VakError } from "../policy/errors.js";
import { closeSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { decide } from "../policy/plan.js";
import { resolveGrants } from "./exec-grants.js";
import { hostFacts } from "../sandbox/host.js";
import { execCommand, type ExecContext, type ExecOptions } from "./exec.js";
import { keepOutOfDumps, nativeSpawner, withholdInherited } from "../sandbox/native-spawn.js";
import { Redactor } from "../secrets/redact.js";
import { EXIT_REFUSED } from "./exit.js";
import { upgradeError } from "./upgraded.js";
import { parseDuration, parseSeconds, parseSize, UnitError } from "../policy/units.js";
import { likelyCommand, routeArgv } from "./argv.js";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../policy/install.js";
import { exitWhenFlushed, fmt, Output, own, processOutput } from "./output.js";

export { exitWhenFlushed };

/** List flags repeat or take commas: --allow-read a,b --allow-read c. */
const list = (value: string, previous: string[] = []) => previous.concat(value.split(",").filter((s) => s !== ""));
/** --secret NAME=REF[@HOST,HOST…]: one per flag, or comma-separated, where a piece without "=" is one more host of the one before. */
const secretList = (value: string, previous: string[] = []) => {
  const out = [...previous];
  for (const piece of value.split(",").filter((s) => s !== "")) {
    if (!piece.includes("=") && out.length && out[out.length - 1]!.includes("@")) out[out.length - 1] += `,${piece}`;
    else out.push(piece);
  }
  return out;
};

function positiveInt(flag: string) {
  return (value: string) => {
    if (!/^\d+$/.test(value) || Number(value) <= 0 || !Number.isSafeInteger(Number(value)))
      throw new InvalidArgumentError(`${flag} needs a positive whole number, got '${value}'`);
    return Number(value);
  };
}

function port(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) > 65535) throw new InvalidArgumentError(`--port needs a port number (0 picks a free one), got '${v}'`);
  return Number(v);
}

/** A byte limit: 1048576, 50M, 1G, 10K (powers of 1024; see src/policy/units.ts). */
function size() {
  return (value: string) => {
    try {
      return parseSize(value);
    } catch (e) {
      if (e instanceof UnitError) throw new InvalidArgumentError(e.message);
      throw e;
    }
  };
}

/** A time limit: seconds, or 90s, 10m, 1h30m; in milliseconds, or whole seconds where the kernel counts seconds. */
function duration(whole: "ms" | "s") {
  return (value: string) => {
    try {
      return whole === "ms" ? parseDuration(value) : parseSeconds(value);
    } catch (e) {
      if (e instanceof UnitError) throw new InvalidArgumentError(e.message);
      throw e;
    }
  };
}

/**
 * `vak exec --mode`: full access is not a mode you pick from a list (it is
 * no sandbox at all), so help does not offer it; asked for anyway, it is
 * refused with the flag that does it.
 */
function execMode(value: string): string {
  if (value === "full-access") throw new InvalidArgumentError("full access is its own flag: pass --full-access to run without a sandbox");
  if (value !== "read-only" && value !== "workspace-write") throw new InvalidArgumentError(`'${value}': the modes are read-only and workspace-write`);
  return value;
}

const SIZE_HELP = "K, M, G = KiB, MiB, GiB";

const EXEC_HELP = `
Sizes: a number of bytes, or with K, M, G, T (powers of 1024; KiB, MiB… too): 50M, 1.5G.
  KB, MB, GB are refused: some tools mean 1000 by them, others 1024.
Durations: seconds, or with ms, s, m, h, d: 90s, 10m, 1h30m.
A limit that ends the command says so on stderr (which one, its value, how to raise it).

Exit status: the command's own; 124 when --timeout ended it; 125 when Vak refused (a bad
flag or grant, --max-output exceeded) or could not set up the sandbox; 126/127 as a shell;
152/153 when --max-cpu or --max-file-size killed it (128 + SIGXCPU/SIGXFSZ).`;

/** The grant flags `vak exec`, `vak run` and `vak` share. */
function grantFlags(c: Command): Command {
  return c
    .option("--workspace <dir>", "the workspace (default: the current directory)")
    .option("--allow-read <paths>", "also readable (repeat or comma-separate)", list)
    .option("--allow-write <paths>", "also writable", list)
    .option("--deny-read <paths>", "never readable, even inside a grant", list)
    .option("--deny-write <paths>", "never writable, even inside a grant", list)
    .option("--allow-net <hosts>", "reachable through the egress gate: host, host:port, host:*, *.suffix, an IP; read:host for GET/HEAD/OPTIONS only", list)
    .option("--deny-net <hosts>", "never reachable, even if an --allow-net covers it", list)
    .option("--profile <names>", "apply a profile: yours ([profiles.NAME] in ~/.config/vak/config.toml) or a preset (git, npm, python, rust, codex, claude, …); repeat", list)
    .addOption(new Option("--sandbox <kind>", "namespaces; reduced where user namespaces are unavailable; container to run the same sandbox inside Docker or Podman (after `vak container build-image`)").choices(["namespaces", "reduced", "container"]).default("namespaces"));
}

/** Vak's version, from its package.json (not read on `vak exec`'s path). */
function version(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;
}

const ROOT_HELP = `
Start the agent with a first message:
  vak "fix the failing test"             a first word that is a command's name runs that command;
  vak -- exec the tests and fix them     after --, everything is the message

Exit status: each command's --help says; vak exec: the command's own, 124 timeout, 125 refused.`;

const RUN_HELP = `
Exit status:
  0    the agent finished, and Vak refused none of its tool calls
  1    it did not finish: a model error, or --max-turns reached
  3    it finished, but Vak refused one or more tool calls (outside the grants, or not
       approved); the summary lists them, and --json has them with their codes
  125  Vak refused to start (a bad flag or spec, no model, an unreadable config)
  130  cancelled (Ctrl-C)
A tool call that failed on its own (a file not found, a command that exited non-zero)
does not change the status.`;

const COMPLETION_HELP = `
Install:
  bash   echo 'eval "$(vak completion bash)"' >> ~/.bashrc
  zsh    echo 'eval "$(vak completion zsh)"' >> ~/.zshrc        (after compinit)
  fish   vak completion fish > ~/.config/fish/completions/vak.fish
The script is made from Vak's own command definitions, so it always matches this version.`;

type ExecRun = (command: string[], opts: ExecOptions) => Promise<number>;

/** The CLI; for `vak exec`, only that command is defined (building the others costs start-up time it does not need). */
export function program(onlyExec = false, escaped: { message?: string[] | undefined } = {}, run: ExecRun = execCommand): Command {
  const p = new Command("vak")
    .description("Run AI agents and their tools with deny-by-default grants, on the record.")
    .exitOverride()
    // Help is Vak's own text; an error quotes what was typed, which is shown neutralised.
    .configureOutput({
      writeOut: (s) => processOutput().out.prompt(own(s)),
      writeErr: (s) => processOutput().err.prompt(own(s)),
      outputError: (s) => processOutput().err.line(fmt`vak: ${s.replace(/^error: /, "").replace(/\n$/, "")}`),
    })
    .showSuggestionAfterError(true)
    .enablePositionalOptions();

  grantFlags(p.command("exec")
    .description("run a command in the sandbox: vak exec [options] -- CMD [ARGS...]")
    .argument("<command...>", "the command and its arguments")
    .addOption(new Option("--mode <mode>", "read-only or workspace-write (default: workspace-write, or what [exec] and profiles say)").choices(["read-only", "workspace-write"]).argParser(execMode))
    .option("--full-access", "run WITHOUT a sandbox: an explicit trust decision, never a fallback"))
    .option("--allow-env <names>", "host environment variables to pass", list)
    .option("--secret <name=ref>", "a secret: NAME=secret:X (or env:X, cmd:X) puts the value in NAME; NAME=REF@HOST[,HOST…] puts a placeholder in NAME that the gate replaces with the value in request headers to those hosts only, over HTTPS too (repeat)", secretList)
    .option("--ca-file <paths>", "also trust this CA (PEM) for upstream servers, at the gate and inside the sandbox (repeat)", list)
    .option("--endpoint <var=url>", "VAR=https://api.example.com: a plain-HTTP base URL in VAR inside, which the gate forwards over verified TLS to that URL only (with the secrets for its host); for clients that cannot be given a CA", list)
    .option("--timeout <duration>", "stop the whole sandbox after this long (exit 124): seconds, or 90s, 10m, 1h30m", duration("ms"))
    .option("--max-output <size>", `stop the sandbox once stdout and stderr together exceed this (bytes; ${SIZE_HELP})`, size())
    .option("--max-procs <n>", "processes and threads at once", positiveInt("--max-procs"))
    .option("--max-memory <size>", `memory for the whole sandbox (bytes; ${SIZE_HELP})`, size())
    .option("--max-file-size <size>", `largest file the command may write (bytes; ${SIZE_HELP})`, size())
    .option("--max-cpu <duration>", "CPU time per process, in whole seconds (30, 2m)", duration("s"))
    .option("--json", "print a one-line JSON summary on stderr at the end (with --print-plan: the plan as JSON on stdout)")
    .option("--print-plan", "print the whole resolved plan and where each grant came from; run nothing, record nothing")
    .option("--dry-run", "the same as --print-plan")
    .option("--explain", "after the run, list what the command tried to reach and could not (paths outside its view, refused hosts, PATH entries and variables left out), each with what would grant it; grants nothing")
    .addHelpText("after", EXEC_HELP)
    .passThroughOptions()
    .action(async (command: string[], opts) => {
      // exec is imported statically: it is the start-up-critical path.
      p.setOptionValue("exitCode", await run(command, opts as ExecOptions));
    });

  if (onlyExec) return p;
  const done = (code: number): void => void p.setOptionValue("exitCode", code);

  // The agent: `vak run "…"` and `vak` share their flags.
  const agentFlags = (c: Command) =>
    grantFlags(
      c
        .option("--model <provider:model>", "the model: openai:…, anthropic:…, ollama:…, a [providers.NAME] of your config, or scripted:FILE")
        .addOption(new Option("--mode <mode>", "read-only or workspace-write (default: workspace-write, or what a --profile says)").choices(["read-only", "workspace-write"])),
    )
      .option("--approve <kinds>", "approve these ahead of time: write, exec (inside the grants only)", list)
      .option("--max-turns <n>", "model turns per instruction (default 50)", positiveInt("--max-turns"));
  agentFlags(p.command("run").description("run the agent on one instruction, print the transcript and what was refused").argument("<instruction>", "what the agent should do"))
    .option("--spec <file>", "run a workload spec (its components' grants; the flags above then only set the model and mode)")
    .option("--json", "print a one-line JSON summary on stderr at the end")
    .addHelpText("after", RUN_HELP)
    .action(async (instruction: string, opts) => done(await (await import("./run.js")).runCommand(instruction, opts)));
  agentFlags(p)
    .option("--serve", "also serve the browser client, watching this same session (see vak serve)")
    .option("--port <n>", "with --serve: the port (default: [server] port, or any free one)", port)
    .version(version(), "-V, --version", "print Vak's version")
    .argument("[message...]", "a first message for the agent (put -- before it if it starts with a command's name)")
    .addHelpText("after", ROOT_HELP)
    .action(async (words: string[], opts) => {
      const message = escaped.message ?? words;
      const meant = escaped.message ? undefined : likelyCommand(words, p.commands.map((c) => c.name()));
      if (meant) throw new VakError("bad-input", `'${words[0]}' is not a command; did you mean \`vak ${meant}\`? (\`vak help\` lists them; to send it to the agent as a message, write \`vak -- ${words[0]}\`)`);
      done(await (await import("./run.js")).interactiveCommand(opts, message.length ? message.join(" ") : undefined));
    });
  agentFlags(p.command("serve").description("the browser client: sessions, approvals, what each can reach, every call (loopback only unless [server] says otherwise)"))
    .option("--port <n>", "the port (default: [server] port, or any free one)", port)
    .option("--json", "print one line, {\"url\":…,\"token\":…}, on stdout once listening")
    .action(async (opts) => done(await (await import("./serve.js")).serveCommand(opts)));
  p.command("check")
    .description("validate a workload spec and print what each component can reach")
    .argument("<spec>", "a workload spec (TOML)")
    .addOption(new Option("--mode <mode>", "your mode: no component may exceed it").choices(["read-only", "workspace-write"]).default("workspace-write"))
    .option("--json", "machine-readable")
    .action(async (spec: string, opts) => done((await import("./check.js")).checkCommand(spec, opts)));
  const secret = p.command("secret").description("secrets by reference: the host injects them; values are never shown");
  secret.command("set").description("store a secret (the value is read without echo, or from stdin)").argument("<name>", "its name; refer to it as secret:NAME")
    .action(async (name: string) => done(await (await import("./secret.js")).secretSet(name)));
  secret.command("list").description("names, sources and who used them; never values").option("--json", "machine-readable")
    .action(async (opts) => done(await (await import("./secret.js")).secretList(opts)));
  secret.command("rm").description("remove a stored secret").argument("<name>", "its name")
    .action(async (name: string) => done((await import("./secret.js")).secretRemove(name)));
  p.command("demo")
    .description("a scripted adversarial session on a throwaway workspace: every attack refused and shown, then the record")
    .action(async () => done(await (await import("./demo.js")).demoCommand()));
  const journal = p.command("journal").description("the append-only, hash-chained record of every session");
  journal.command("list").description("the sessions in the journal, oldest first")
    .option("--limit <n>", "only the newest n", positiveInt("--limit"))
    .addOption(new Option("--kind <kind>", "only sessions of this kind").choices(["exec", "agent", "workload", "mcp", "journal"]))
    .option("--since <when>", "started at or after: an age (2h, 30m, 7d), a date (2026-01-31) or an ISO time")
    .option("--until <when>", "started at or before: an age, a date (its whole day) or an ISO time")
    .option("--json", "machine-readable")
    .action(async (opts) => done(await (await import("./journal.js")).journalList(opts)));
  journal.command("show").description("one session: an agent's or a workload's as a transcript, others as a timeline")
    .argument("<id>", "a session id, the start of one, or last")
    .option("--events", "every event as a timeline, for an agent's session too").option("--json", "machine-readable")
    .action(async (id: string, opts) => done(await (await import("./journal.js")).journalShow(id, opts)));
  journal.command("tail").description("follow the journal as it is written: one session until it ends, or every session")
    .argument("[id]", "a session id, the start of one, or last (default: every session, from now)")
    .option("--all", "every session, from now on (the default without an id)")
    .action(async (id: string | undefined, opts) => done(await (await import("./journal-tail.js")).journalTail(id, opts)));
  journal.command("export").description("one session as JSON Lines, one event a line").argument("<id>", "a session id, the start of one, or last")
    .action(async (id: string) => done(await (await import("./journal.js")).journalExport(id)));
  journal.command("search").description("full-text search over arguments, results and reasons").argument("<query>", "words, or an FTS5 query")
    .option("--session <id>", "only this session").option("--json", "machine-readable")
    .action(async (q: string, opts) => done(await (await import("./journal.js")).journalSearch(q, opts)));
  journal.command("verify").description("walk the hash chain; exit 1 at the first broken link").option("--json", "machine-readable")
    .action(async (opts) => done(await (await import("./journal.js")).journalVerify(opts)));
  journal.command("ingest").description("take spooled runs into the hash chain now (done in the background anyway)")
    .action(async () => done(await (await import("./journal.js")).journalIngest()));
  journal.command("prune").description("remove events older than a date (the prune itself is journaled)")
    .option("--before <date>", "a date, a time, or an age such as 90d; default: [journal] retention_days")
    .action(async (opts) => done(await (await import("./journal.js")).journalPrune(opts)));
  journal.command("init-db").description("create the PostgreSQL journal's schema, triggers and writer role (with the database owner's connection)")
    .option("--admin-url <url>", "the owner's postgres:// URL without a password, or env:NAME / secret:NAME; default: [journal] admin_url")
    .option("--role <name>", "the writer role to create and grant (SELECT and INSERT only)", "vak_writer")
    .option("--grant-to <role...>", "login roles hosts connect as, to be given the writer role")
    .option("--json", "machine-readable")
    .action(async (opts) => done(await (await import("./journal-admin.js")).journalInitDb(opts)));
  journal.command("migrate").description("copy a SQLite journal into PostgreSQL, verifying the chain on both sides")
    .option("--to <url>", "a postgres:// URL without a password, or env:NAME / secret:NAME; default: [journal] url")
    .option("--from <path>", "the SQLite journal; default: the one in Vak's state directory")
    .option("--json", "machine-readable")
    .action(async (opts) => done(await (await import("./journal-admin.js")).journalMigrate(opts)));

  const mcp = grantFlags(p.command("mcp")
    .description("run a stdio MCP server in the sandbox for any MCP client: vak mcp [options] -- CMD [ARGS...]")
    .argument("[command...]", "the server's command and its arguments")
    .addOption(new Option("--mode <mode>", "read-only (the default) or workspace-write").choices(["read-only", "workspace-write"]).default("read-only")))
    .option("--name <name>", "the server's name: its tool pins, its record, `vak mcp trust NAME` (default: the command line)")
    .option("--deny-tool <tools>", "tools hidden from the client and refused", list)
    .option("--ask <tools>", "tools whose every call is put to you first, through the client (or: all)", list)
    .option("--allow-env <names>", "host environment variables to pass", list)
    .option("--secret <name=ref>", "a secret in the server's environment: NAME=secret:X, NAME=env:X or NAME=cmd:X (repeat)", list)
    .option("--max-procs <n>", "processes and threads at once", positiveInt("--max-procs"))
    .option("--max-memory <size>", `memory for the whole sandbox (bytes; ${SIZE_HELP})`, size())
    .option("--max-file-size <size>", `largest file the server may write (bytes; ${SIZE_HELP})`, size())
    .option("--max-message <size>", `largest message either side may send (default 8M; ${SIZE_HELP})`, size())
    .passThroughOptions()
    .action(async (command: string[], opts) => done(await (await import("./mcp.js")).mcpServe(command, opts)));
  mcp.command("trust")
    .description("review and accept the changed or new tool definitions of a server")
    .argument("[name]", "the server's name (--name, else its command line); without it, list servers with changes waiting")
    .option("--yes", "accept without asking").option("--json", "machine-readable")
    .action(async (name: string | undefined, opts) => done(await (await import("./mcp-trust.js")).mcpTrust(name, opts)));
  mcp.command("proposals")
    .description("MCP servers this repository proposes (.mcp.json, .cursor/mcp.json, .vscode/mcp.json, .vak/config.toml) and whether you approved them")
    .option("--workspace <dir>", "the repository (default: the current directory)").option("--json", "machine-readable")
    .action(async (opts) => done((await import("./mcp-proposals.js")).mcpProposals(opts)));
  mcp.command("approve")
    .description("approve one exact definition of a server the repository proposes (bound to its hash)")
    .argument("<name>", "the server's name in the repository's config")
    .option("--workspace <dir>", "the repository (default: the current directory)").option("--yes", "approve without asking")
    .action(async (name: string, opts) => done(await (await import("./mcp-proposals.js")).mcpApprove(name, opts)));
  mcp.command("wrap")
    .description("rewrite the stdio servers of an MCP client's config to run through vak mcp (read-only), keeping a backup")
    .requiredOption("--config <file>", "Claude Desktop, Cursor, Claude Code or VS Code MCP config (mcpServers / servers)")
    .option("--dry-run", "show the new config; write nothing")
    .action(async (opts) => done((await import("./mcp-wrap.js")).mcpWrap(opts)));
  mcp.command("unwrap")
    .description("restore a config that vak mcp wrap rewrote, from its backup")
    .requiredOption("--config <file>", "the config that was wrapped")
    .action(async (opts) => done((await import("./mcp-wrap.js")).mcpUnwrap(opts)));

  p.command("completion")
    .description("print a completion script for your shell: eval \"$(vak completion bash)\", or see --help")
    .addArgument(new Argument("<shell>", "bash, zsh or fish").choices(["bash", "zsh", "fish"]))
    .addHelpText("after", COMPLETION_HELP)
    .action(async (shell: "bash" | "zsh" | "fish") => done((await import("./completion.js")).completionCommand(shell, p)));

  p.command("trust")
    .description("review a repository's .vak/config.toml and trust this exact content (any change makes it untrusted again)")
    .argument("[dir]", "the workspace (default: the current directory)")
    .option("--yes", "trust it without asking (for scripts: review the printed content first)")
    .option("--sha256 <hash>", "trust it only if its content is still this (the hash `vak trust` printed with what you reviewed)")
    .option("--revoke", "stop trusting it")
    .option("--list", "the repository configs you trust")
    .action(async (dir: string | undefined, opts) => done(await (await import("./trust.js")).trustCommand(dir, opts)));

  const container = p.command("container").description("the container backend (--sandbox container): Docker or Podman around the same sandbox");
  container.command("build-image")
    .description("build the sandbox image from this host's own files (no registry), tagged by its content, and the engine's seccomp profiles")
    .addOption(new Option("--engine <engine>", "docker or podman (default: whichever is on PATH, docker first)").choices(["docker", "podman"]))
    .option("--package <names>", "more Debian packages of this host to put in the image, with what they depend on", list)
    .option("--json", "machine-readable")
    .action(async (opts) => done(await (await import("./container.js")).containerBuildImage(opts)));
  container.command("status").description("which image --sandbox container runs, or why none").option("--json", "machine-readable")
    .action(async (opts) => done((await import("./container.js")).containerStatus(opts)));

  p.command("doctor")
    .description("report what this machine's kernel can enforce, and try the sandbox for real")
    .option("--json", "machine-readable output")
    .action(async (opts) => {
      const { doctorCommand } = await import("./doctor.js");
      p.setOptionValue("exitCode", await doctorCommand(opts));
    });
  p.command("audit")
    .description("say whether this machine's Vak is safe to use (sandbox, control files, secrets, broad rules, the record, the installation, exposure, trust), and how to fix what is not")
    .option("--json", "one JSON object (the schema is in src/audit/README.md)")
    .option("--fix", "apply the safe mechanical fixes only (modes narrowed to 0600/0700, write bits removed), each journaled")
    .option("--deep", "also probe the running vak serve on loopback with a foreign Host and Origin")
    .action(async (opts) => {
      const { auditCommand } = await import("./audit.js");
      p.setOptionValue("exitCode", await auditCommand(opts));
    });
  return p;
}

/**
 * For the build's code cache only (scripts/code-cache.cjs): plans a sandbox for
 * a scratch repository, so that the cache holds the code `vak exec`'s planning
 * runs (the held-path walk, the git config reader), and runs /bin/true in one
 * the way `vak exec --profile git --profile node` does (recorded in a scratch
 * state directory), so that it holds what launching and recording run too.
 */
export async function warmUp(dir: string): Promise<void> {
  decide({ mode: "workspace-write", sandbox: "namespaces", workspace: dir, grants: { read: [], write: [], denyRead: [], denyWrite: [], noLinks: [], env: [] }, limits: {}, command: ["/bin/true"] }, hostFacts());
  // And what composes a run's grants from a config and presets (their TOML, the checks, the expansions).
  const config = join(dir, "xdg-config", "vak");
  mkdirSync(config, { recursive: true });
  writeFileSync(join(config, "config.toml"), `[exec]\nprofiles = ["git"]\ntimeout = 600\ndeny_read = ["~/.ssh"]\n\n[profiles.warm]\nextends = ["npm"]\nallow_env = ["LANG", "LC_*"]\nset_env = { WARM = "1" }\n`);
  // The git preset's config copies (strip-git-config.ts), whatever this machine's own git config is.
  writeFileSync(join(dir, ".gitconfig"), `[user]\n\tname = Warm\n\temail = warm@example.invalid ; a comment\n[credential]\n\thelper = store\n[http "https://h.invalid/"] extraheader = x\n[url "https://t@h.invalid/"]\n\tinsteadOf = https://h.invalid/\n[include]\n\tpath = warm.inc\n`);
  writeFileSync(join(dir, "warm.inc"), "[core]\n\tabbrev = 12\n");
  await resolveGrants({ workspace: dir, profile: ["warm", "python", "git"], allowRead: [dir] }, { execDefaults: true, env: { ...process.env, XDG_CONFIG_HOME: join(dir, "xdg-config") }, home: dir });
  // And one whole run of the typical command line, so that the cache also holds what recording, launching and
  // reading the report run (lazily compiled, they were ~8 ms of a short command): its record goes to a scratch
  // state directory, its output nowhere. Where no sandbox can start here, what ran up to that point is cached.
  const state = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = join(dir, "xdg-state");
  const nul = openSync("/dev/null", "r+");
  try {
    const env = { ...process.env, XDG_CONFIG_HOME: join(dir, "no-config") };
    const quiet = new Output({ write: () => true }, new Redactor());
    const ctx: ExecContext = { cwd: dir, env, stdio: [nul, nul, nul], errFd: nul, err: quiet, onStop: () => () => undefined, spawner: nativeSpawner() };
    await execCommand(["/bin/true"], { profile: ["git", "node"], sandbox: "namespaces" }, ctx).catch(() => undefined);
  } finally {
    closeSync(nul);
    if (state === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = state;
  }
}

/**
 * `vak exec ARGS` parsed exactly as the CLI parses it, for the resident host
 * (src/resident/); undefined when it would not parse or asks for help (the
 * in-process CLI then says why, so the host sends such a request back).
 */
export async function parseExec(argv: readonly string[]): Promise<{ command: string[]; opts: ExecOptions } | undefined> {
  if (argv[0] !== "exec") return undefined;
  let got: { command: string[]; opts: ExecOptions } | undefined;
  const p = program(true, {}, async (command, opts) => {
    got = { command, opts };
    return 0;
  });
  // Nothing is printed by the host: a request that does not parse goes back to the client's own CLI.
  for (const c of [p, ...p.commands]) c.configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined });
  try {
    await p.parseAsync([...argv], { from: "user" });
  } catch {
    return undefined;
  }
  return got;
}

/** Runs the CLI; resolves to the process exit status (bin/vak.cjs exits with it once output is flushed: exitWhenFlushed). */
export async function main(argv: string[]): Promise<number> {
  // Not for --full-access, which runs the command as its caller would, with what it was handed (make's jobserver).
  const end = argv.indexOf("--");
  if (!(argv[0] === "exec" && (end < 0 ? argv : argv.slice(0, end)).includes("--full-access"))) withholdInherited();
  keepOutOfDumps();
  const escaped: { message?: string[] | undefined } = {};
  const p = program(argv[0] === "exec", escaped);
  try {
    if (argv[0] !== "exec") {
      const takesValue = new Set(p.options.filter((o) => o.required || o.optional).flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f))));
      const routed = routeArgv(argv, takesValue);
      argv = routed.argv;
      escaped.message = routed.message;
    }
    await p.parseAsync(argv, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.code === "commander.help") return 0;
      return EXIT_REFUSED;
    }
    // Vak upgraded or rebuilt under this process: a chunk of its bundle it asked for is gone.
    e = upgradeError(e) ?? e;
    // Errors may quote what a model, a file or a server chose: they are shown neutralised and redacted, like everything else.
    if (isVakError(e)) processOutput().err.line(fmt`vak: ${e.message}`);
    else processOutput().err.line(fmt`vak: internal error: ${e instanceof Error ? e.stack : String(e)}`);
    return EXIT_REFUSED;
  }
  const code = p.getOptionValue("exitCode");
  return typeof code === "number" ? code : 0;
}
