import { createInterface } from "node:readline/promises";
import { definitionDiff } from "../mcp/diff.js";
import { acceptPending, PinStore } from "../mcp/pins.js";
import { VakError } from "../policy/errors.js";
import { visible } from "./visible.js";

/**
 * `vak mcp trust [NAME]`: shows each withheld definition of a server against
 * the one that was trusted (every line neutralised: a description is the
 * server's text), and on yes pins exactly what was shown.
 */
export async function mcpTrust(name: string | undefined, opts: { yes?: boolean; json?: boolean }): Promise<number> {
  const store = new PinStore();
  const out = (s: string) => process.stdout.write(s);
  if (name === undefined) {
    const all = store.list();
    if (opts.json) out(`${JSON.stringify(all.map((f) => ({ server: f.server, pinned: Object.keys(f.tools).length, waiting: Object.keys(f.pending) })))}\n`);
    else if (all.length === 0) out("no MCP server has connected through vak mcp yet\n");
    else for (const f of all) out(`${visible(f.server)}: ${Object.keys(f.tools).length} tool(s) pinned${Object.keys(f.pending).length ? `, ${Object.keys(f.pending).length} waiting for review: ${Object.keys(f.pending).map(visible).join(", ")}` : ""}\n`);
    return 0;
  }
  const f = store.load(name);
  if (!f) {
    const known = store.list().map((x) => x.server);
    throw new VakError("bad-input", `no MCP server named ${visible(name)} has connected through vak mcp${known.length ? `; known: ${known.slice(0, 10).map(visible).join(", ")}` : ""}`);
  }
  const pending = Object.entries(f.pending);
  if (pending.length === 0) {
    if (opts.json) out(`${JSON.stringify({ server: f.server, pending: [], accepted: [] })}\n`);
    else out(`${visible(f.server)}: nothing waiting for review; ${Object.keys(f.tools).length} tool(s) pinned\n`);
    return 0;
  }
  const shown = new Map(pending.map(([tool, p]) => [tool, p.digest]));
  const diffs = pending.map(([tool, p]) => ({ tool, why: p.why, digest: p.digest, diff: definitionDiff(f.tools[tool]?.definition, p.definition) }));
  if (!opts.json) {
    for (const d of diffs) {
      out(`tool ${visible(d.tool)} (${d.why === "changed" ? "changed since you trusted it" : "new"}):\n`);
      for (const l of d.diff) out(`${visible(l)}\n`);
      out("\n");
    }
  }
  let yes = opts.yes === true;
  if (!yes) {
    if (!process.stdin.isTTY) {
      if (opts.json) out(`${JSON.stringify({ server: f.server, pending: diffs, accepted: [] })}\n`);
      process.stderr.write("vak: nothing trusted: pass --yes to accept these definitions without a terminal\n");
      return 1;
    }
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    const a = await rl.question(`Trust ${diffs.length} definition(s) of ${visible(f.server)}? [y/N] `);
    rl.close();
    yes = /^y(es)?$/i.test(a.trim());
  }
  if (!yes) {
    process.stderr.write("vak: nothing trusted\n");
    return 1;
  }
  let accepted: string[] = [];
  store.update(name, f.command, (cur) => {
    accepted = acceptPending(cur, shown);
  });
  if (opts.json) out(`${JSON.stringify({ server: f.server, pending: diffs, accepted })}\n`);
  else out(`trusted: ${accepted.map(visible).join(", ") || "(nothing: the definitions changed again since they were shown; run this again)"}\n`);
  return 0;
}
