// MCP: the latency `vak mcp` adds to one tools/call, against a direct stdio
// connection to the same server (server-everything from npm, its `echo`
// tool), both driven by the MCP SDK's client and interleaved call by call.
// Through Vak every call is checked both ways, decided, and committed to the
// journal (one durable SQLite commit) before the server sees it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CALLS = Number(process.env.BENCH_MCP_CALLS ?? 1000);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];

export async function mcpBench({ root, env }) {
  const { Client } = await import(join(root, "node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js"));
  const { StdioClientTransport } = await import(join(root, "node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js"));
  const server = join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
  const state = mkdtempSync(join(tmpdir(), "vak-bench-mcp-state-"));
  const ws = mkdtempSync(join(tmpdir(), "vak-bench-mcp-"));
  const connect = async (command, args, extraEnv = {}) => {
    const t = new StdioClientTransport({ command, args, cwd: ws, env: { ...env, ...extraEnv }, stderr: "ignore" });
    const c = new Client({ name: "bench", version: "1" }, { capabilities: {} });
    await c.connect(t);
    await c.listTools();
    return c;
  };
  try {
    const direct = await connect(process.execPath, [server, "stdio"]);
    const viaVak = await connect(process.execPath, [join(root, "bin/vak.cjs"), "mcp", "--allow-read", join(root, "node_modules"), "--name", "bench-everything", "--", process.execPath, server, "stdio"], { XDG_STATE_HOME: state });
    const call = async (c) => {
      const t = performance.now();
      const r = await c.callTool({ name: "echo", arguments: { message: "bench" } });
      const ms = performance.now() - t;
      if (r.content?.[0]?.text !== "Echo: bench") throw new Error(`bad answer: ${JSON.stringify(r).slice(0, 200)}`);
      return ms;
    };
    for (let i = 0; i < 50; i++) {
      await call(direct);
      await call(viaVak);
    }
    const a = [];
    const b = [];
    for (let i = 0; i < CALLS; i++) {
      a.push(await call(direct));
      b.push(await call(viaVak));
    }
    await direct.close();
    await viaVak.close();
    console.log(`\nMCP: one tools/call (server-everything echo), ${CALLS} interleaved calls each, the SDK's client`);
    const row = (name, xs) => console.log(`  ${name.padEnd(44)} p50 ${pct(xs, 0.5).toFixed(3).padStart(7)} ms   p99 ${pct(xs, 0.99).toFixed(3).padStart(7)} ms`);
    row("direct stdio connection", a);
    row("through vak mcp (checked, journaled durably)", b);
    console.log(`  added: p50 +${(pct(b, 0.5) - pct(a, 0.5)).toFixed(3)} ms, p99 +${(pct(b, 0.99) - pct(a, 0.99)).toFixed(3)} ms (x${(pct(b, 0.5) / pct(a, 0.5)).toFixed(2)} at p50)`);
    console.log("  target: at most 2 ms added at p50, the durable record included");
  } finally {
    rmSync(state, { recursive: true, force: true });
    rmSync(ws, { recursive: true, force: true });
  }
}
