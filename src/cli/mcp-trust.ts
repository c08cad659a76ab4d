import { createInterface } from "node:readline/promises";
import { definitionDiff, lineDiff } from "../mcp/diff.js";
import { acceptPending, PinStore } from "../mcp/pins.js";
import { VakError } from "../policy/errors.js";
import { fmt, own, processOutput } from "./output.js";

/**
 * `vak mcp trust [NAME]`: shows each withheld definition of a server (and its
 * withheld instructions) against the one that was trusted (every line
 * neutralised: a description is the server's text), and on yes pins exactly
 * what was shown.
 */
export async function mcpTrust(name: string | undefined, opts: { yes?: boolean; json?: boolean }): Promise<number> {
  const store = new PinStore();
  // A server's names and descriptions are its own text: every value goes through the output's neutraliser.
  const { out, err } = processOutput();
  if (name === undefined) {
    const all = store.list();
    if (opts.json) out.json(all.map((f) => ({ server: f.server, pinned: Object.keys(f.tools).length, waiting: Object.keys(f.pending) })));
    else if (all.length === 0) out.line(own("no MCP server has connected through vak mcp yet"));
    else for (const f of all) out.line(fmt`${f.server}: ${Object.keys(f.tools).length} tool(s) pinned${Object.keys(f.pending).length ? fmt`, ${Object.keys(f.pending).length} waiting for review: ${Object.keys(f.pending).join(", ")}` : ""}${f.pendingInstructions ? own(", its instructions waiting for review") : ""}`);
    return 0;
  }
  const f = store.load(name);
  if (!f) {
    const known = store.list().map((x) => x.server);
    throw new VakError("bad-input", `no MCP server named ${name} has connected through vak mcp${known.length ? `; known: ${known.slice(0, 10).join(", ")}` : ""}`);
  }
  const pending = Object.entries(f.pending);
  const instructions = f.pendingInstructions;
  if (pending.length === 0 && !instructions) {
    if (opts.json) out.json({ server: f.server, pending: [], accepted: [] });
    else out.line(fmt`${f.server}: nothing waiting for review; ${Object.keys(f.tools).length} tool(s) pinned`);
    return 0;
  }
  const shown = new Map(pending.map(([tool, p]) => [tool, p.digest]));
  const diffs = pending.map(([tool, p]) => ({ tool, why: p.why, digest: p.digest, diff: definitionDiff(f.tools[tool]?.definition, p.definition) }));
  const instructionsDiff = instructions && { why: instructions.why, digest: instructions.digest, diff: lineDiff(f.instructions?.text.split("\n") ?? [], instructions.text.split("\n")) };
  if (!opts.json) {
    if (instructionsDiff) {
      out.line(own(`the server's instructions (${instructionsDiff.why === "changed" ? "changed since you trusted them" : "new"}; a client puts them before its model):`));
      for (const l of instructionsDiff.diff) out.line(fmt`${l}`);
      out.line(own(""));
    }
    for (const d of diffs) {
      out.line(fmt`tool ${d.tool} (${own(d.why === "changed" ? "changed since you trusted it" : "new")}):`);
      for (const l of d.diff) out.line(fmt`${l}`);
      out.line(own(""));
    }
  }
  let yes = opts.yes === true;
  if (!yes) {
    if (!process.stdin.isTTY) {
      if (opts.json) out.json({ server: f.server, pending: diffs, instructions: instructionsDiff ?? null, accepted: [] });
      err.line(own("vak: nothing trusted: pass --yes to accept these definitions without a terminal"));
      return 1;
    }
    const rl = createInterface({ input: process.stdin, output: err.stream as NodeJS.WritableStream });
    err.prompt(fmt`Trust ${diffs.length} definition(s)${instructionsDiff ? " and the instructions" : ""} of ${f.server}? [y/N] `);
    const a = await rl.question("");
    rl.close();
    yes = /^y(es)?$/i.test(a.trim());
  }
  if (!yes) {
    err.line(own("vak: nothing trusted"));
    return 1;
  }
  let accepted: string[] = [];
  store.update(name, f.command, (cur) => {
    accepted = acceptPending(cur, shown, instructionsDiff?.digest);
  });
  if (opts.json) out.json({ server: f.server, pending: diffs, instructions: instructionsDiff ?? null, accepted });
  else out.line(fmt`trusted: ${accepted.join(", ") || "(nothing: the definitions changed again since they were shown; run this again)"}`);
  return 0;
}
