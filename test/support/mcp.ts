import type { ChildProcess } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ROOT, VAK_BIN } from "./paths.js";
import { baseEnv, spawnVak } from "./vak.js";

/** The reference servers from npm (devDependencies), and what their sandbox must read to run them. */
export const NODE_MODULES = `${ROOT}node_modules`;
export const EVERYTHING = `${NODE_MODULES}/@modelcontextprotocol/server-everything/dist/index.js`;
export const FILESYSTEM = `${NODE_MODULES}/@modelcontextprotocol/server-filesystem/dist/index.js`;
export const MEMORY = `${NODE_MODULES}/@modelcontextprotocol/server-memory/dist/index.js`;
export const HOSTILE = `${ROOT}test/support/hostile-mcp.mjs`;
export const SUPPORT = `${ROOT}test/support`;

export interface SdkConnection {
  client: Client;
  transport: StdioClientTransport;
  stderr(): string;
  close(): Promise<void>;
}

/** The MCP SDK's own client, talking to `vak mcp ARGS` spawned as a real process. */
export async function sdkClient(
  vakArgs: string[],
  opts: { cwd: string; env?: Record<string, string>; capabilities?: ConstructorParameters<typeof Client>[1] } ,
): Promise<SdkConnection> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [VAK_BIN, "mcp", ...vakArgs], cwd: opts.cwd, env: opts.env ?? baseEnv(), stderr: "pipe" });
  let err = "";
  transport.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: "vak-test", version: "1.0.0" }, opts.capabilities ?? { capabilities: {} });
  await client.connect(transport);
  return { client, transport, stderr: () => err, close: () => client.close() };
}

type Message = Record<string, unknown> & { id?: string | number; method?: string; result?: Record<string, unknown>; error?: { code: number; message: string } };

/** A raw client: exact bytes in, every message out, for the attack tests. */
export class RawClient {
  readonly child: ChildProcess;
  readonly messages: Message[] = [];
  private buf = "";
  private err = "";
  private waiters: (() => void)[] = [];
  readonly exited: Promise<number | null>;

  constructor(vakArgs: string[], opts: { cwd: string; env?: Record<string, string>; wrapper?: string[] }) {
    this.child = spawnVak(["mcp", ...vakArgs], { cwd: opts.cwd, env: opts.env ?? baseEnv(), ...(opts.wrapper ? { wrapper: opts.wrapper } : {}) });
    this.child.stdout!.on("data", (d: Buffer) => {
      this.buf += d.toString();
      for (let nl = this.buf.indexOf("\n"); nl >= 0; nl = this.buf.indexOf("\n")) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        this.messages.push(JSON.parse(line) as Message);
      }
      this.wake();
    });
    this.child.stderr!.on("data", (d: Buffer) => {
      this.err += d.toString();
      this.wake();
    });
    this.exited = new Promise((r) => this.child.on("close", (code) => r(code)));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  get stderr(): string {
    return this.err;
  }

  /** Any text that reached stdout that was not a whole JSON line (there must be none). */
  get stray(): string {
    return this.buf;
  }

  write(text: string | Buffer): void {
    this.child.stdin!.write(text);
  }

  send(m: Record<string, unknown>): void {
    this.write(`${JSON.stringify({ jsonrpc: "2.0", ...m })}\n`);
  }

  async until<T>(f: () => T | undefined, ms = 20_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const v = f();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out; stderr: ${this.err.slice(-2000)}`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 100);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  response(id: string | number, ms?: number): Promise<Message> {
    return this.until(() => this.messages.find((m) => m.id === id && m.method === undefined), ms);
  }

  private nextId = 1;
  /** Sends a request and waits for its answer. */
  async request(method: string, params?: Record<string, unknown>, ms?: number): Promise<Message> {
    const id = this.nextId++;
    this.send({ id, method, ...(params ? { params } : {}) });
    return this.response(id, ms);
  }

  async initialize(capabilities: Record<string, unknown> = {}): Promise<Message> {
    const r = await this.request("initialize", { protocolVersion: "2025-06-18", capabilities, clientInfo: { name: "raw", version: "1" } });
    this.send({ method: "notifications/initialized" });
    return r;
  }

  async call(name: string, args: Record<string, unknown> = {}, ms?: number): Promise<Message> {
    return this.request("tools/call", { name, arguments: args }, ms);
  }

  close(): void {
    this.child.stdin!.end();
  }
}

/**
 * Runs vak with a controlling terminal of its own (a new pty, kept open) while
 * its stdin and stdout stay pipes: what a client running in a terminal (Claude
 * Code) gives the servers it starts.
 */
export const WITH_TERMINAL = [
  "python3", "-c",
  "import os,pty,fcntl,termios,sys\nm,s=pty.openpty()\nos.setsid()\nfcntl.ioctl(s,termios.TIOCSCTTY,0)\nos.set_inheritable(m,True)\nos.close(s)\nos.execvp(sys.argv[1],sys.argv[1:])",
];

/** The text of a tools/call answer. */
export function textOf(m: { result?: Record<string, unknown> }): string {
  const c = (m.result?.content as { type: string; text?: string }[] | undefined) ?? [];
  return c.filter((x) => x.type === "text").map((x) => x.text).join("\n");
}
