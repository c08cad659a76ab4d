import { PassThrough, Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage, Tool } from "@modelcontextprotocol/sdk/types.js";
import { BrokerEgress } from "../broker/egress.js";
import type { Journal } from "../journal/journal.js";
import { parseNetGrants, RuleError } from "../policy/net-grants.js";
import { VakError } from "../policy/errors.js";
import { decideSliced, type HostFacts, type LaunchPlan } from "../policy/plan.js";
import { checkEnvRecipient } from "../secrets/grant.js";
import { LineReader } from "./framing.js";
import { PinStore } from "./pins.js";
import { McpRecord } from "./record.js";
import type { McpServerDef } from "./servers.js";
import { StderrRelay } from "./stderr.js";
import { connect, type Connection } from "./worker.js";

/**
 * An MCP server Vak's own agent (or a workload) uses: Vak is the client. The
 * SDK's Client speaks over an in-process stream into exactly the path `vak
 * mcp` uses (framing, schemas, id renumbering, pins, `deny_tools`, the
 * record), and the server is a sandboxed worker for the life of the session.
 * The client declares no capabilities, so a server's sampling, elicitation
 * and roots requests are refused by the relay; approvals are the broker's.
 */
export interface HostServerOptions {
  name: string;
  def: McpServerDef;
  workspace: string;
  host: HostFacts;
  journal: Journal;
  /** Resolved secrets for this server's environment (resolved by the caller, on the host). */
  secrets: readonly { ref: string; env: string; value: string }[];
  /** Where the server's stderr and Vak's warnings go (already a terminal-safe sink, or a log). */
  log(line: string): void;
  neutralise(text: string): string;
  /** The tool pins (Vak's state dir by default). */
  pins?: PinStore;
  /** Values no server's environment may hold (the host's provider keys): a server that would get one does not start. */
  withheld?: readonly string[] | undefined;
}

/** The SDK's Transport over two byte streams, one JSON-RPC message per line. */
class LineTransport implements Transport {
  onmessage?: (m: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (e: Error) => void;
  constructor(private readonly out: PassThrough) {}
  async start(): Promise<void> {}
  async send(m: JSONRPCMessage): Promise<void> {
    this.out.write(`${JSON.stringify(m)}\n`);
  }
  async close(): Promise<void> {
    this.out.end();
    this.onclose?.();
  }
  deliver(line: string): void {
    try {
      this.onmessage?.(JSON.parse(line) as JSONRPCMessage);
    } catch (e) {
      this.onerror?.(e as Error);
    }
  }
}

export class HostMcpServer {
  private constructor(
    readonly name: string,
    readonly tools: Tool[],
    private readonly client: Client,
    private readonly conn: Connection,
    private readonly record: McpRecord,
    private readonly egress: BrokerEgress | undefined,
  ) {}

  static async start(o: HostServerOptions): Promise<HostMcpServer> {
    const plan = await serverPlan(o.name, o.def, o.workspace, o.host);
    for (const s of o.secrets) {
      plan.env[s.env] = s.value;
      o.journal.redactor.add(s.value);
    }
    // A provider key never reaches a server: by an env grant, a literal variable or a secret.
    const withheld = (o.withheld ?? []).filter((w) => w.length >= 8);
    for (const [k, v] of Object.entries(plan.env))
      if (withheld.some((w) => v.includes(w)))
        throw new VakError("bad-input", `mcp server ${o.name}: the variable ${k} would give it the value of a model provider's key; the key stays with the host`);
    const record = await McpRecord.start(o.journal, {
      server: o.name, plan, tools: { deny: o.def.deny_tools, ask: [] }, secrets: o.secrets.map((s) => ({ ref: s.ref, recipient: `env ${s.env}` })),
    });
    let egress: BrokerEgress | undefined;
    let gate;
    if (plan.network.kind === "gate") {
      egress = new BrokerEgress(`mcp:${o.name}`, (e) => record.egress(e), () => record.durable());
      gate = (await egress.link(plan.network.grants, 1)).link;
    }
    const toServer = new PassThrough();
    const transport = new LineTransport(toServer);
    const fromServer = new LineReader(64 * 1024 * 1024, { line: (l) => transport.deliver(l), oversized: () => undefined, undecodable: () => undefined });
    const clientOut = new Writable({
      write(chunk: Buffer, _enc, done) {
        fromServer.push(chunk);
        done();
      },
    });
    const redact = <T>(v: T): T => o.journal.redactor.value(v);
    const conn = connect({
      plan, gate, clientIn: toServer, clientOut, maxMessage: 8 * 1024 * 1024,
      stderr: new StderrRelay({ name: `mcp ${o.name}`, write: (t) => o.log(t.replace(/\n$/, "")), redact: (t) => o.journal.redactor.text(t), neutralise: o.neutralise }),
      relay: {
        policy: { server: o.name, deny: new Set(o.def.deny_tools), ask: new Set() }, pins: o.pins ?? new PinStore(), command: plan.command, record,
        warn: (t) => o.log(`vak: mcp ${o.name}: ${o.neutralise(o.journal.redactor.text(t))}`),
        reach: { paths: [...plan.grants.read, ...plan.grants.write], denied: plan.grants.denyRead }, neutralise: o.neutralise, redact,
        scrub: <T>(v: T): T => o.journal.redactor.value(v, 0, (t) => o.journal.redactor.knownOnly(t)),
      },
    });
    record.onFailure = () => conn.stop("record");
    const client = new Client({ name: "vak", version: "1" }, { capabilities: {} });
    try {
      await client.connect(transport, { timeout: 60_000 });
      const tools: Tool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 64; page++) {
        const r = await client.listTools(cursor ? { cursor } : undefined);
        tools.push(...r.tools);
        cursor = r.nextCursor;
        if (!cursor) break;
      }
      return new HostMcpServer(o.name, tools, client, conn, record, egress);
    } catch (e) {
      conn.stop("client");
      await conn.ended;
      await egress?.close();
      throw e;
    }
  }

  /** Calls one tool; the relay decides it, records it (durably, first) and passes it on. */
  async call(tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<{ content: unknown[]; isError: boolean; structuredContent?: unknown }> {
    const r = await this.client.callTool({ name: tool, arguments: args }, undefined, { ...(signal ? { signal } : {}), timeout: 600_000 });
    return { content: (r.content as unknown[]) ?? [], isError: r.isError === true, ...(r.structuredContent !== undefined ? { structuredContent: r.structuredContent } : {}) };
  }

  /** Ends the connection: the server's whole tree is gone when this resolves, and the record is closed. */
  async close(): Promise<void> {
    await this.client.close(); // ends the server's stdin: the connection stops as for any client
    const { result, why } = await this.conn.ended;
    await this.egress?.close();
    await this.record.finish(result, 0, { ended: why });
  }
}

/**
 * The launch plan for one server: the definition's grants over the workspace, through the same decide() as vak exec,
 * its held-path walk in slices (decideSliced: the servers start in a process that serves others, `vak serve`).
 */
export async function serverPlan(name: string, def: McpServerDef, workspace: string, host: HostFacts): Promise<LaunchPlan> {
  let net;
  if (def.net.length || def.deny_net.length) {
    try {
      net = parseNetGrants(def.net, def.deny_net);
    } catch (e) {
      if (e instanceof RuleError) throw new VakError("bad-input", `mcp server ${name}: ${e.message}`);
      throw e;
    }
  }
  for (const k of Object.keys(def.set_env)) {
    try {
      checkEnvRecipient(k);
    } catch {
      throw new VakError("bad-input", `mcp server ${name}: ${k} is a variable Vak sets itself; it cannot be set`);
    }
  }
  const plan = await decideSliced(
    {
      mode: def.mode, sandbox: "namespaces", workspace, command: def.command, net,
      grants: { read: def.read, write: def.write, denyRead: def.deny_read, denyWrite: def.deny_write, noLinks: [], env: def.env },
      limits: { ...(def.max_procs ? { maxProcs: def.max_procs } : {}), ...(def.max_memory ? { maxMemoryBytes: def.max_memory } : {}) },
    },
    host,
  );
  Object.assign(plan.env, def.set_env);
  return plan;
}
