import { realpathSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { pretty } from "../mcp/diff.js";
import { findProposals, ProposalApprovals } from "../mcp/proposals.js";
import { VakError } from "../policy/errors.js";
import { fmt, own, processOutput } from "./output.js";

/** `vak mcp proposals` and `vak mcp approve NAME`: servers a repository proposes, and the user's approval of one exact definition. */
function workspaceOf(dir?: string): string {
  try {
    return realpathSync(dir ?? process.cwd());
  } catch (e) {
    throw new VakError("bad-input", `--workspace ${dir}: ${(e as Error).message}`);
  }
}

export function mcpProposals(opts: { workspace?: string; json?: boolean }): number {
  const ws = workspaceOf(opts.workspace);
  const approvals = new ProposalApprovals();
  const list = findProposals(ws).map((p) => ({ ...p, approved: !p.problem && approvals.isApproved(ws, p) }));
  // Names and definitions are the repository's: every value is printed through the output's neutraliser.
  const { out } = processOutput();
  if (opts.json) {
    out.json(list.map(({ source, name, hash, approved, problem }) => ({ source, name, hash, approved, problem: problem ?? null })));
    return 0;
  }
  if (list.length === 0) out.line(fmt`${ws} proposes no MCP servers`);
  for (const p of list)
    out.line(fmt`${p.name} (${p.source}): ${p.problem ? fmt`cannot start: ${p.problem}` : p.approved ? own("approved") : fmt`not approved; nothing starts until \`vak mcp approve ${p.name}\``}`);
  return 0;
}

export async function mcpApprove(name: string, opts: { workspace?: string; yes?: boolean }): Promise<number> {
  const ws = workspaceOf(opts.workspace);
  const found = findProposals(ws).filter((p) => p.name === name);
  // (Errors are printed through the output by main(), neutralised.)
  if (found.length === 0) throw new VakError("bad-input", `${ws} proposes no MCP server named ${name} (see vak mcp proposals)`);
  if (found.length > 1) throw new VakError("bad-input", `${found.map((p) => p.source).join(" and ")} both propose ${name}; remove one`);
  const p = found[0]!;
  if (p.problem) throw new VakError("bad-input", `${p.source}: ${name} cannot be started: ${p.problem}`);
  const { out, err } = processOutput();
  out.line(fmt`${p.source} proposes the MCP server ${name}:`);
  for (const l of pretty(p.def)) out.line(fmt`  ${l}`);
  out.line(fmt`sha256 ${p.hash}`);
  let yes = opts.yes === true;
  if (!yes) {
    if (!process.stdin.isTTY) {
      err.line(own("vak: not approved: pass --yes to approve without a terminal"));
      return 1;
    }
    const rl = createInterface({ input: process.stdin, output: err.stream as NodeJS.WritableStream });
    err.prompt(fmt`Approve exactly this definition for ${ws}? [y/N] `);
    yes = /^y(es)?$/i.test((await rl.question("")).trim());
    rl.close();
  }
  if (!yes) return 1;
  new ProposalApprovals().approve(ws, p);
  out.line(fmt`approved ${name} (a change to its definition will need a new approval)`);
  return 0;
}
