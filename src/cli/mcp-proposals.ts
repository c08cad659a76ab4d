import { realpathSync } from "node:fs";
import { createInterface } from "node:readline/promises";
import { pretty } from "../mcp/diff.js";
import { findProposals, ProposalApprovals } from "../mcp/proposals.js";
import { VakError } from "../policy/errors.js";
import { visible } from "./visible.js";

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
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(list.map(({ source, name, hash, approved, problem }) => ({ source, name, hash, approved, problem: problem ?? null })))}\n`);
    return 0;
  }
  if (list.length === 0) process.stdout.write(`${visible(ws)} proposes no MCP servers\n`);
  for (const p of list)
    process.stdout.write(`${visible(p.name)} (${p.source}): ${p.problem ? `cannot start: ${visible(p.problem)}` : p.approved ? "approved" : `not approved; nothing starts until \`vak mcp approve ${visible(p.name)}\``}\n`);
  return 0;
}

export async function mcpApprove(name: string, opts: { workspace?: string; yes?: boolean }): Promise<number> {
  const ws = workspaceOf(opts.workspace);
  const found = findProposals(ws).filter((p) => p.name === name);
  if (found.length === 0) throw new VakError("bad-input", `${visible(ws)} proposes no MCP server named ${visible(name)} (see vak mcp proposals)`);
  if (found.length > 1) throw new VakError("bad-input", `${found.map((p) => p.source).join(" and ")} both propose ${visible(name)}; remove one`);
  const p = found[0]!;
  if (p.problem) throw new VakError("bad-input", `${p.source}: ${visible(name)} cannot be started: ${visible(p.problem)}`);
  process.stdout.write(`${p.source} proposes the MCP server ${visible(name)}:\n`);
  for (const l of pretty(p.def)) process.stdout.write(`  ${visible(l)}\n`);
  process.stdout.write(`sha256 ${p.hash}\n`);
  let yes = opts.yes === true;
  if (!yes) {
    if (!process.stdin.isTTY) {
      process.stderr.write("vak: not approved: pass --yes to approve without a terminal\n");
      return 1;
    }
    const rl = createInterface({ input: process.stdin, output: process.stderr });
    yes = /^y(es)?$/i.test((await rl.question(`Approve exactly this definition for ${visible(ws)}? [y/N] `)).trim());
    rl.close();
  }
  if (!yes) return 1;
  new ProposalApprovals().approve(ws, p);
  process.stdout.write(`approved ${visible(name)} (a change to its definition will need a new approval)\n`);
  return 0;
}
