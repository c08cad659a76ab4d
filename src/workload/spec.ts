import { readFileSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, resolve } from "node:path";
import { parse } from "smol-toml";
import { z } from "zod";
import { TOOLS } from "../broker/registry.js";
import { grantsHost, parseNetGrants, RuleError, type NetGrants } from "../policy/net-grants.js";
import { checkEnvRecipient, type SecretRecipient } from "../secrets/grant.js";
import { parseRef } from "../secrets/store.js";
import { STORE_NAME } from "../stores/kv.js";
import { canonicalJson, sha256 } from "../approvals/digest.js";
import { ENV_NAME } from "../policy/env.js";
import { VakError } from "../policy/errors.js";
import type { Limits } from "../policy/limits.js";
import { isWithin } from "../policy/paths.js";
import { resolveExisting, vakStateDirs } from "../policy/state.js";
import { isProblem, resolveCommand } from "./command-paths.js";
import { compose } from "../policy/compose.js";
import { loadPreset, presetNames } from "../policy/presets.js";
import { PROFILE_NAME } from "../policy/profile.js";
import { loadUserProfiles } from "../policy/profiles-file.js";
import { loadUserConfig } from "../policy/config.js";
import { providerKeyProblem, providerKeys, type ProviderKeys } from "../model/provider-keys.js";

/**
 * A workload spec: the harness (a model and its instructions, holding no
 * grant) and tool components, each with its own grants. Every component
 * starts with nothing; each grant is a deliberate addition. The same shape is
 * accepted as TOML (`vak run --spec`, `vak check`) and as an object
 * (`createHost`). A spec that cannot be held exactly is refused, naming the
 * file, line and field, before anything starts.
 */
const BUILTINS = TOOLS.map((t) => t.name) as [string, ...string[]];
const GRANT_KEYS = ["read", "write", "deny_read", "deny_write", "net", "deny_net", "env", "secrets", "stores", "builtin", "command", "mcp", "profiles"];

const Secret = z.union([
  z.object({ ref: z.string(), env: z.string() }).strict(),
  // The placeholder form: env holds a placeholder; the gate puts the value in request headers to these hosts only.
  z.object({ ref: z.string(), env: z.string(), hosts: z.array(z.string()).min(1) }).strict(),
  // The header form: the gate adds it on plain-HTTP requests to these hosts; env, if given, holds a placeholder.
  z.object({ ref: z.string(), header: z.string().regex(/^[A-Za-z0-9-]+$/, "a header name"), hosts: z.array(z.string()).min(1), env: z.string().optional() }).strict(),
]);

const Component = z
  .object({
    description: z.string().max(1000).optional(),
    builtin: z.array(z.enum(BUILTINS)).min(1).optional(),
    command: z.array(z.string().min(1)).min(1).optional(),
    /** An MCP server's argv: the component is the server, a sandboxed worker for the session, with the grants below. */
    mcp: z.array(z.string().min(1)).min(1).optional(),
    /** JSON Schema of a command tool's input (an object). */
    input: z.record(z.string(), z.unknown()).optional(),
    /** Profiles (yours, or presets) whose grants this component also gets: read, write, deny, net, env, secrets, limits. */
    profiles: z.array(z.string().regex(PROFILE_NAME, "a profile name")).default([]),
    read: z.array(z.string()).default([]),
    write: z.array(z.string()).default([]),
    deny_read: z.array(z.string()).default([]),
    deny_write: z.array(z.string()).default([]),
    net: z.array(z.string()).default([]),
    deny_net: z.array(z.string()).default([]),
    env: z.array(z.string().regex(ENV_NAME, "an environment variable name")).default([]),
    secrets: z.array(Secret).default([]),
    stores: z.array(z.string().regex(STORE_NAME, "a store name (lower-case letters, digits, - and _)")).default([]),
    limits: z
      .object({
        timeout_seconds: z.number().int().positive().optional(),
        max_output: z.number().int().positive().optional(),
        max_procs: z.number().int().positive().optional(),
        max_memory: z.number().int().positive().optional(),
        max_file_size: z.number().int().positive().optional(),
      })
      .strict()
      .optional(),
    approval: z.object({ write: z.enum(["ask", "allow"]).optional(), exec: z.enum(["ask", "allow"]).optional() }).strict().optional(),
  })
  .strict();

export const WorkloadSpecSchema = z
  .object({
    version: z.literal(1),
    name: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, "a workload name (lower-case letters, digits, - and _)"),
    /** The project the components' paths are relative to; relative to the spec file. */
    workspace: z.string().default("."),
    harness: z
      .object({
        model: z.string().optional(),
        instructions: z.string().max(100_000).default(""),
        max_turns: z.number().int().positive().max(1000).optional(),
      })
      .strict()
      .default({ instructions: "" }),
    tools: z.record(z.string().regex(/^[a-z][a-z0-9-]{0,30}$/, "a component name (lower-case letters, digits and -)"), Component),
  })
  .strict();
export type WorkloadSpecInput = z.input<typeof WorkloadSpecSchema>;

export interface ComponentPlan {
  name: string;
  description: string;
  builtin: string[];
  /** The argv, with each path in it canonical (command-paths.ts). */
  command?: string[] | undefined;
  /** An MCP server's argv (src/mcp/): its tools are this component's, named component__tool. Its paths canonical too. */
  mcp?: string[] | undefined;
  /** The files and folders the command's argv names, bound read-only into the component's sandbox. */
  commandPaths: string[];
  input?: Record<string, unknown> | undefined;
  /** Canonical paths. */
  read: string[];
  write: string[];
  denyRead: string[];
  denyWrite: string[];
  /** Its profiles' state_dirs and state_files (among write): a host tool's state, where no link is made. */
  noLinks: string[];
  env: string[];
  net?: NetGrants | undefined;
  netText: string[];
  denyNetText: string[];
  secrets: { ref: string; recipient: SecretRecipient }[];
  stores: string[];
  limits: Limits;
  approval: { write: "ask" | "allow"; exec: "ask" | "allow" };
}

export interface WorkloadPlan {
  name: string;
  /** The stores' namespace: the name and where the spec lives, so two workloads never share one. */
  id: string;
  source: string;
  workspace: string;
  harness: { model?: string | undefined; instructions: string; maxTurns?: number | undefined };
  components: ComponentPlan[];
  /** The spec's content hash: an approval of the spec is bound to it. */
  hash: string;
  /** The spec file's text, when it came from a file (an edit is shown as a diff of it). */
  text?: string | undefined;
}

type Where = (path: (string | number)[]) => string;

/** The line a field is on, found by walking the TOML's tables and keys. */
function lineFinder(file: string, text: string): Where {
  const lines = text.split("\n");
  return (path) => {
    const [first, second, third] = path.map(String);
    const table = first === "tools" && second ? `tools.${second}` : path.length > 1 ? first : "";
    const key = first === "tools" && second ? third : path.length > 1 ? second : first;
    let current = "";
    let tableLine: number | undefined;
    for (let i = 0; i < lines.length; i++) {
      const header = /^\s*\[([^\]]+)\]\s*(#.*)?$/.exec(lines[i]!);
      if (header) {
        current = header[1]!.replace(/["'\s]/g, "");
        if (current === table) tableLine = i + 1;
        continue;
      }
      if (current === table && key && new RegExp(`^\\s*["']?${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}["']?\\s*=`).test(lines[i]!)) return `${file}:${i + 1}`;
    }
    return tableLine ? `${file}:${tableLine}` : file;
  };
}

function fail(where: Where, path: (string | number)[], message: string): never {
  throw new VakError("bad-input", `${where(path)}: ${path.join(".")}: ${message}`);
}

/** Reads and checks a spec file (TOML). */
export function loadSpec(file: string, opts: { mode?: "read-only" | "workspace-write"; providerKeys?: ProviderKeys; env?: NodeJS.ProcessEnv } = {}): WorkloadPlan {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw new VakError("bad-input", `${file}: cannot be read (${(e as Error).message})`);
  }
  let data: unknown;
  try {
    data = parse(text);
  } catch (e) {
    throw new VakError("bad-input", `${file}: not valid TOML: ${(e as Error).message.split("\n")[0]}`);
  }
  return checkSpec(data, { ...opts, source: realpathSync(file), where: lineFinder(file, text), base: dirname(realpathSync(file)), text });
}

/**
 * Checks a spec (from a file or an object) against the user's mode and turns
 * it into exact, canonical grants per component.
 */
export function checkSpec(
  data: unknown,
  opts: { mode?: "read-only" | "workspace-write"; source?: string; where?: Where; base?: string; text?: string; providerKeys?: ProviderKeys; env?: NodeJS.ProcessEnv } = {},
): WorkloadPlan {
  const where: Where = opts.where ?? (() => opts.source ?? "spec");
  const harness = (data as { harness?: Record<string, unknown> } | undefined)?.harness;
  if (harness && typeof harness === "object")
    for (const k of Object.keys(harness))
      if (GRANT_KEYS.includes(k)) fail(where, ["harness", k], "the harness holds no grant; give it to a tool component, which the harness can only ask to use it");
  const r = WorkloadSpecSchema.safeParse(data);
  if (!r.success) {
    const i = r.error.issues[0]!;
    const path = i.path as (string | number)[];
    const keys = (i as { keys?: string[] }).keys;
    fail(where, keys?.length ? [...path, keys[0]!] : path, i.message);
  }
  const spec = r.data;
  const mode = opts.mode ?? "workspace-write";
  const base = opts.base ?? process.cwd();
  const workspace = canonical(isAbsolute(spec.workspace) ? spec.workspace : resolve(base, spec.workspace), where, ["workspace"], true);
  if (Object.keys(spec.tools).length === 0) fail(where, ["tools"], "a workload needs at least one tool component");

  // The host's provider keys (the built-in providers' variables and every configured one's): no component may be handed one.
  const env = opts.env ?? process.env;
  const keys = opts.providerKeys ?? providerKeys(loadUserConfig(), env);
  const keyStays = "; the key stays with the host, and no component may be given it (a component that needs a key of its own gets it as a secret under another name)";

  const components: ComponentPlan[] = [];
  for (const [name, raw] of Object.entries(spec.tools)) {
    const at = (...p: (string | number)[]) => ["tools", name, ...p];
    const withP = raw.profiles.length ? withProfiles(raw, workspace, (m) => fail(where, at("profiles"), m)) : { spec: raw, state: [] };
    const c = withP.spec;
    if ([c.builtin, c.command, c.mcp].filter((x) => x !== undefined).length !== 1)
      fail(where, at(), "give exactly one of builtin (a list of built-in tools), command (an external command) or mcp (an MCP server's command)");
    if (c.mcp && c.secrets.some((s) => "header" in s)) fail(where, at("secrets"), "an MCP server gets its secrets in its environment; the header form is for command components");
    if (c.command && !c.input) fail(where, at("input"), "a command tool needs the JSON Schema of its input");
    if (c.input && c.input.type !== "object") fail(where, at("input"), 'the input schema must be of type "object"');
    if (c.input)
      try {
        z.fromJSONSchema(c.input as Parameters<typeof z.fromJSONSchema>[0]);
      } catch (e) {
        fail(where, at("input"), `not a JSON Schema Vak can check: ${(e as Error).message}`);
      }
    const grantable = (p: string, real: string, path: (string | number)[]) => {
      if (real === "/" || real === homedir() || real === resolveExisting(homedir())) fail(where, path, `${p} would grant ${real === "/" ? "the whole file system" : "your whole home directory"}; name a narrower folder`);
      for (const s of vakStateDirs()) if (isWithin(real, s) || isWithin(s, real)) fail(where, path, `${p} covers Vak's own state (${s}); no component may be granted it`);
    };
    const paths = (list: string[], field: string, mustExist: boolean) =>
      list.map((p, i) => {
        if (p.includes("*")) fail(where, at(field, i), `${p}: wildcards are not grants; name the folder`);
        const abs = isAbsolute(p) ? p : p.startsWith("~/") ? resolve(homedir(), p.slice(2)) : resolve(workspace, p);
        const real = canonical(abs, where, at(field, i), mustExist);
        grantable(p, real, at(field, i));
        return real;
      });
    // The command's own files: resolved against the workspace and bound read-only, since the component runs in an empty folder.
    const argvField = c.command ? "command" : c.mcp ? "mcp" : undefined;
    const resolved = argvField ? resolveCommand((c.command ?? c.mcp)!, workspace) : { argv: [], paths: [] };
    if (isProblem(resolved)) fail(where, at(argvField!, resolved.index), resolved.message);
    for (const p of resolved.paths) grantable(p, p, at(argvField!));
    const read = paths(c.read, "read", true);
    const write = paths(c.write, "write", true);
    if (write.length && mode === "read-only") fail(where, at("write"), "the session is read-only; this component's write grant is wider than your mode allows");
    const writesTools = (c.builtin ?? []).filter((t) => t === "write_file" || t === "edit_file");
    if (writesTools.length && !write.length) fail(where, at("builtin"), `${writesTools.join(", ")} needs a write grant to be of any use; add write = [...] or drop it`);
    if ((c.builtin ?? []).includes("web_fetch") && !c.net.length) fail(where, at("builtin"), "web_fetch needs a net grant to be of any use: it reaches only the hosts in net = [...]; add them (read:HOST for reading only) or drop it");
    let net: NetGrants | undefined;
    try {
      net = c.net.length ? parseNetGrants(c.net, c.deny_net) : undefined;
    } catch (e) {
      if (e instanceof RuleError) fail(where, at("net"), e.message);
      throw e;
    }
    for (const [i, v] of c.env.entries()) {
      const problem = providerKeyProblem(v, env[v], keys);
      if (problem) fail(where, at("env", i), `${problem}${keyStays}`);
    }
    const secrets = c.secrets.map((s, i) => {
      let ref;
      try {
        ref = parseRef(s.ref);
      } catch (e) {
        fail(where, at("secrets", i, "ref"), (e as Error).message);
      }
      if (ref.kind === "env") {
        const problem = providerKeyProblem(ref.name, env[ref.name], keys);
        if (problem) fail(where, at("secrets", i, "ref"), `${problem}${keyStays}`);
      }
      const covered = (hosts: readonly string[]) => {
        for (const [j, h] of hosts.entries())
          if (!net || !grantsHost(net, h)) fail(where, at("secrets", i, "hosts", j), `${h} is not in this component's net grants; a secret can only go where the component may go`);
      };
      if (!("header" in s)) {
        try {
          checkEnvRecipient(s.env);
        } catch (e) {
          fail(where, at("secrets", i, "env"), (e as Error).message);
        }
        if ("hosts" in s) {
          covered(s.hosts);
          return { ref: ref.text, recipient: { kind: "placeholder" as const, name: s.env, hosts: s.hosts } };
        }
        return { ref: ref.text, recipient: { kind: "env" as const, name: s.env } };
      }
      covered(s.hosts);
      if (s.env !== undefined)
        try {
          checkEnvRecipient(s.env);
        } catch (e) {
          fail(where, at("secrets", i, "env"), (e as Error).message);
        }
      return { ref: ref.text, recipient: { kind: "header" as const, header: s.header, hosts: s.hosts, placeholderEnv: s.env } };
    });
    const l = c.limits ?? {};
    components.push({
      name,
      description: c.description ?? (c.command ? `the ${name} tool` : c.mcp ? `the MCP server ${name}` : `${name}: ${c.builtin!.join(", ")}`),
      builtin: c.builtin ?? [],
      command: c.command ? resolved.argv : undefined,
      mcp: c.mcp ? resolved.argv : undefined,
      commandPaths: resolved.paths,
      input: c.input,
      read, write,
      denyRead: paths(c.deny_read, "deny_read", false),
      denyWrite: paths(c.deny_write, "deny_write", false),
      noLinks: paths(withP.state, "profiles", false),
      env: c.env,
      net, netText: c.net, denyNetText: c.deny_net,
      secrets,
      stores: c.stores,
      limits: {
        ...(l.timeout_seconds ? { timeoutMs: l.timeout_seconds * 1000 } : {}),
        ...(l.max_output ? { maxOutputBytes: l.max_output } : {}),
        ...(l.max_procs ? { maxProcs: l.max_procs } : {}),
        ...(l.max_memory ? { maxMemoryBytes: l.max_memory } : {}),
        ...(l.max_file_size ? { maxFileBytes: l.max_file_size } : {}),
      },
      approval: { write: c.approval?.write ?? "ask", exec: c.approval?.exec ?? "ask" },
    });
  }
  const source = opts.source ?? "(library)";
  return {
    name: spec.name,
    // A file's workload is its name and path; an object's, its name and workspace: two apps that share a name do not share stores.
    id: `${spec.name}-${sha256(`${spec.name}\0${opts.source ?? `library:${workspace}`}`).slice(0, 12)}`,
    source,
    workspace,
    harness: { model: spec.harness.model, instructions: spec.harness.instructions, maxTurns: spec.harness.max_turns },
    components,
    hash: sha256(opts.text ?? canonicalJson(data)),
    text: opts.text,
  };
}

type ComponentSpec = z.infer<typeof Component>;

/**
 * A component's grants with those of the profiles it names added (the user's
 * own profiles and the presets; the user's config is the trusted tier, so a
 * profile changed there is not asked about again). A profile's path that does
 * not exist is skipped; what only `vak exec` can do (set_env, files) is
 * refused, and a file it shows without its credentials (allow_read_redacted,
 * a copy in vak exec's view: ~/.gitconfig of the git preset) is not granted.
 */
function withProfiles(c: ComponentSpec, workspace: string, fail: (message: string) => never): { spec: ComponentSpec; state: string[] } {
  let comp;
  try {
    comp = compose({
      flags: { profiles: c.profiles, lists: {}, limits: {} }, user: loadUserProfiles(), execDefaults: false, workspace, env: process.env, home: homedir(),
      preset: (n) => loadPreset(n), presetNames: () => presetNames(),
    });
  } catch (e) {
    if (e instanceof VakError) fail(e.message);
    throw e;
  }
  const names = comp.applied.map((p) => p.name).join(", ");
  if (comp.setEnv.size || comp.files.size)
    fail(`${names}: set_env and files apply to \`vak exec\` only; a component takes a profile's read, write, deny, net, env, secrets and limits (and not the files allow_read_redacted shows)`);
  if (comp.create.length) fail(`${names}: ${comp.create[0]!.path} does not exist yet; create it (a component's grants name paths that exist)`);
  const L = comp.lists;
  const v = (xs: { value: string }[]) => xs.map((x) => x.value);
  const secrets = v(L.secrets).map((spec) => ({ ref: spec.slice(spec.indexOf("=") + 1), env: spec.slice(0, spec.indexOf("=")) }));
  const lim = comp.limits;
  const spec: ComponentSpec = {
    ...c,
    read: [...c.read, ...v(L.allow_read)], write: [...c.write, ...v(L.allow_write)],
    deny_read: [...c.deny_read, ...v(L.deny_read)], deny_write: [...c.deny_write, ...v(L.deny_write)],
    net: [...c.net, ...v(L.allow_net)], deny_net: [...c.deny_net, ...v(L.deny_net)],
    env: [...new Set([...c.env, ...v(L.allow_env)])],
    secrets: [...c.secrets, ...secrets],
    limits: {
      ...(lim.timeout ? { timeout_seconds: lim.timeout.value } : {}),
      ...(lim.max_output ? { max_output: lim.max_output.value } : {}),
      ...(lim.max_procs ? { max_procs: lim.max_procs.value } : {}),
      ...(lim.max_memory ? { max_memory: lim.max_memory.value } : {}),
      ...(lim.max_file_size ? { max_file_size: lim.max_file_size.value } : {}),
      ...c.limits,
    },
  };
  return { spec, state: [...v(L.state_dirs), ...v(L.state_files)] };
}

function canonical(path: string, where: Where, at: (string | number)[], mustExist: boolean): string {
  try {
    const real = realpathSync(path);
    if (mustExist) statSync(real);
    return real;
  } catch (e) {
    if (!mustExist && (e as NodeJS.ErrnoException).code === "ENOENT") {
      // A deny rule for what does not exist yet: its nearest existing ancestor, canonical, plus the rest.
      const parent = canonical(dirname(path), where, at, false);
      return resolve(parent, path.slice(dirname(path).length + 1));
    }
    fail(where, at, `${path} cannot be resolved (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); grants name paths that exist`);
  }
}
