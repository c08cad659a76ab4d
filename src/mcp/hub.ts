import type { McpCaller } from "../broker/broker.js";
import type { WorkerOutcome } from "../broker/worker-process.js";
import type { Journal } from "../journal/journal.js";
import type { ToolSpec } from "../model/types.js";
import type { McpServerDef } from "../policy/mcp-servers.js";
import type { HostFacts } from "../policy/plan.js";
import type { Op } from "../protocol/ops.js";
import { HostMcpServer } from "./host.js";
import type { PinStore } from "./pins.js";

/**
 * The MCP servers of one agent session: each started as a sandboxed worker
 * (HostMcpServer) with its own grants, never wider than the session's mode;
 * their tools offered to the model as `mcp__SERVER__TOOL`; and each call, once
 * the broker has recorded it and had it approved, made here. A server that
 * cannot start is left out and said so; it never takes the session down.
 */
export interface HubServer {
  name: string;
  def: McpServerDef;
  /** Where it was defined: "your config", or the repository file it was proposed in. */
  source: string;
}

export interface HubOptions {
  servers: readonly HubServer[];
  workspace: string;
  /** The session's mode: a server's own mode is never wider. */
  mode: "read-only" | "workspace-write";
  host: HostFacts;
  journal: Journal;
  pins?: PinStore;
  /** Resolves a secret reference on the host. */
  secret(ref: string): string;
  log(line: string): void;
  neutralise(text: string): string;
  /** Values no server's environment may hold (the host's provider keys). */
  withheld?: readonly string[] | undefined;
}

/** Model tool names: letters, digits, _ and -, at most 64 (what the providers accept). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_OUTPUT = 1024 * 1024;
const MAX_DESCRIPTION = 1024;
/**
 * What MCP servers may put before the model with every request: past these a server's tools are left out (said
 * so), so that one server cannot make every model call too large to send. Tools per server, one tool's input
 * schema, one server's tools in all (schemas and descriptions), and all servers' together, in characters.
 */
export const MAX_MODEL_TOOLS = 128;
export const MAX_PARAMETERS = 16 * 1024;
export const MAX_SERVER_SPECS = 64 * 1024;
export const MAX_ALL_SPECS = 256 * 1024;

export function toolName(server: string, tool: string): string {
  return `mcp__${server}__${tool.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/** What a tools/call answer becomes for the model: its text, and a line for anything else. */
export function answerText(r: { content: unknown[]; structuredContent?: unknown }): { text: string; truncated: boolean } {
  const parts: string[] = [];
  for (const c of r.content as { type?: string; text?: string; mimeType?: string; data?: string; uri?: string; resource?: { uri?: string; text?: string } }[]) {
    if (c.type === "text") parts.push(c.text ?? "");
    else if (c.type === "image" || c.type === "audio") parts.push(`[${c.type} ${c.mimeType ?? ""}, ${Math.floor(((c.data ?? "").length * 3) / 4)} bytes]`);
    else if (c.type === "resource_link") parts.push(`[resource ${c.uri ?? ""}]`);
    else if (c.type === "resource") parts.push(c.resource?.text ?? `[resource ${c.resource?.uri ?? ""}]`);
    else parts.push(`[${String(c.type)}]`);
  }
  if (r.structuredContent !== undefined && parts.length === 0) parts.push(JSON.stringify(r.structuredContent));
  const text = parts.join("\n");
  return text.length > MAX_OUTPUT ? { text: text.slice(0, MAX_OUTPUT), truncated: true } : { text, truncated: false };
}

export class McpHub implements McpCaller {
  private readonly byTool = new Map<string, { server: string; tool: string }>();
  private readonly specList: ToolSpec[] = [];

  private constructor(private readonly servers: Map<string, HostMcpServer>, log: (line: string) => void, neutralise: (t: string) => string) {
    let all = 0;
    for (const [name, srv] of servers) {
      let offered = 0;
      let chars = 0;
      for (const t of srv.tools) {
        const n = toolName(name, t.name);
        if (!TOOL_NAME.test(n) || this.byTool.has(n)) {
          log(`vak: mcp ${name}: tool ${neutralise(t.name)} is not offered to the model (its name cannot be told apart as ${n})`);
          continue;
        }
        const schema = JSON.stringify(t.inputSchema).length;
        if (schema > MAX_PARAMETERS) {
          log(`vak: mcp ${name}: tool ${neutralise(t.name)} is not offered to the model (its input schema is over ${MAX_PARAMETERS} characters)`);
          continue;
        }
        if (offered++ >= MAX_MODEL_TOOLS) {
          log(`vak: mcp ${name}: its tools past the first ${MAX_MODEL_TOOLS} are not offered to the model (it lists ${srv.tools.length})`);
          break;
        }
        const description = `[MCP server ${name}] ${t.description ?? t.title ?? t.name}`.slice(0, MAX_DESCRIPTION);
        const size = schema + description.length + n.length;
        if (chars + size > MAX_SERVER_SPECS || all + size > MAX_ALL_SPECS) {
          log(`vak: mcp ${name}: its tools from ${neutralise(t.name)} on are not offered to the model (they would put more than ${chars + size > MAX_SERVER_SPECS ? `${MAX_SERVER_SPECS} characters of one server's` : `${MAX_ALL_SPECS} characters of all servers'`} tool definitions before it)`);
          break;
        }
        chars += size;
        all += size;
        this.byTool.set(n, { server: name, tool: t.name });
        this.specList.push({ name: n, description, parameters: t.inputSchema as Record<string, unknown> });
      }
    }
  }

  static async start(o: HubOptions): Promise<McpHub> {
    const started = new Map<string, HostMcpServer>();
    await Promise.all(
      o.servers.map(async (s) => {
        try {
          // The session's mode is the ceiling: a read-only session's servers are read-only whatever they ask for.
          const def: McpServerDef = o.mode === "read-only" ? { ...s.def, mode: "read-only", write: [] } : s.def;
          const secrets = def.secrets.map((x) => ({ ref: x.ref, env: x.env, value: o.secret(x.ref) }));
          const srv = await HostMcpServer.start({ name: s.name, def, workspace: o.workspace, host: o.host, journal: o.journal, secrets, log: o.log, neutralise: o.neutralise, withheld: o.withheld, ...(o.pins ? { pins: o.pins } : {}) });
          started.set(s.name, srv);
        } catch (e) {
          o.log(`vak: mcp ${s.name} (${s.source}) did not start: ${o.neutralise(o.journal.redactor.text((e as Error).message))}`);
        }
      }),
    );
    return new McpHub(started, o.log, o.neutralise);
  }

  get specs(): readonly ToolSpec[] {
    return this.specList;
  }

  /** The op a model's call of an `mcp__…` tool becomes, or undefined for a name that is not one of these tools. */
  opFor(name: string, args: unknown): Extract<Op, { kind: "mcp" }> | undefined {
    const t = this.byTool.get(name);
    if (!t) return undefined;
    const a = args && typeof args === "object" && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
    return { kind: "mcp", server: t.server, tool: t.tool, arguments: a };
  }

  async call(op: Extract<Op, { kind: "mcp" }>, signal: AbortSignal): Promise<WorkerOutcome> {
    const srv = this.servers.get(op.server);
    if (!srv) return { ok: false, code: "bad-request", message: `no MCP server ${op.server} is running in this session` };
    const r = await srv.call(op.tool, op.arguments, signal);
    const { text, truncated } = answerText(r);
    if (r.isError) return { ok: false, code: "tool-error", message: text.slice(0, 64 * 1024) || "the tool reported an error" };
    return { ok: true, output: text, truncated };
  }

  /** Stops every server; each one's whole tree is gone when this resolves. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.servers.values()].map((s) => s.close()));
    this.servers.clear();
  }
}
