import { closeSync, constants, fstatSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { z } from "zod";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";
import { definitionHash, type McpServerDef, McpServerSchema, SERVER_NAME } from "./servers.js";

/**
 * MCP servers a repository proposes: `.mcp.json` (Claude Code), `.cursor/mcp.json`,
 * `.vscode/mcp.json` and `[mcp_servers.NAME]` in `.vak/config.toml`. They come
 * from the repository, so they are untrusted: nothing starts until the user
 * has approved that exact definition, by its hash (a changed definition is a
 * new proposal), and a headless run never asks, it only says how to approve.
 * A JSON proposal gets a read-only workspace and nothing else; a `.vak`
 * proposal may ask for grants, which the approval then covers.
 */
export interface Proposal {
  source: string;
  name: string;
  /** The definition as the repository wrote it, hashed as written. */
  written: unknown;
  hash: string;
  def?: McpServerDef;
  /** Why it cannot be started even if approved. */
  problem?: string;
}

const SOURCES = [".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json", ".vak/config.toml"] as const;
const MAX_FILE = 1 << 20;

/** A repository file, read without following a symlink at its last component, bounded. */
function readRepoFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_FILE) return undefined;
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

/** A JSON entry ({command, args, env}) as a definition: its argv and literal variables, no grants. */
function fromJsonEntry(e: unknown): { def?: McpServerDef; problem?: string } {
  if (!e || typeof e !== "object") return { problem: "not an object" };
  const o = e as Record<string, unknown>;
  if (typeof o.url === "string" || (typeof o.type === "string" && o.type !== "stdio")) return { problem: "a remote server: Vak starts only stdio servers" };
  if (typeof o.command !== "string" || !o.command) return { problem: "no command" };
  const args = Array.isArray(o.args) && o.args.every((a) => typeof a === "string") ? (o.args as string[]) : o.args === undefined ? [] : undefined;
  if (!args) return { problem: "args must be strings" };
  const env = o.env === undefined ? {} : o.env;
  if (!env || typeof env !== "object" || Object.values(env).some((v) => typeof v !== "string" || v.includes("${")))
    return { problem: "env must be literal strings (no ${…} references)" };
  const r = McpServerSchema.safeParse({ command: [o.command, ...args], set_env: env });
  return r.success ? { def: r.data } : { problem: r.error.issues[0]?.message ?? "invalid" };
}

/** Every server the repository at `workspace` proposes, each with its hash. */
export function findProposals(workspace: string): Proposal[] {
  const out: Proposal[] = [];
  for (const source of SOURCES) {
    const text = readRepoFile(join(workspace, source));
    if (text === undefined) continue;
    let data: unknown;
    try {
      data = source.endsWith(".toml") ? parseToml(text) : JSON.parse(text);
    } catch {
      out.push({ source, name: "(file)", written: null, hash: "", problem: `${source} does not parse` });
      continue;
    }
    const d = data as Record<string, unknown>;
    const table = (source.endsWith(".toml") ? d.mcp_servers : source === ".vscode/mcp.json" ? d.servers : d.mcpServers) as Record<string, unknown> | undefined;
    if (!table || typeof table !== "object") continue;
    for (const [name, written] of Object.entries(table)) {
      const p: Proposal = { source, name, written, hash: definitionHash(name, written) };
      if (!SERVER_NAME.test(name)) p.problem = "the name must be lower-case letters, digits, - and _ (at most 40)";
      else if (source.endsWith(".toml")) {
        const r = McpServerSchema.safeParse(written);
        if (r.success) p.def = r.data;
        else p.problem = `${r.error.issues[0]?.path.join(".") ?? ""}: ${r.error.issues[0]?.message ?? "invalid"}`;
      } else Object.assign(p, fromJsonEntry(written));
      out.push(p);
    }
  }
  return out;
}

const ApprovalsSchema = z
  .object({ v: z.literal(1), approved: z.array(z.object({ workspace: z.string(), name: z.string(), hash: z.string(), source: z.string(), at: z.string() }).strict()) })
  .strict();

/** Approvals of proposals, in Vak's state directory (never reachable by a sandbox), each bound to workspace, name and hash. */
export class ProposalApprovals {
  constructor(private readonly file: string = join(vakDirs().state, "mcp", "approved.json")) {}

  private load(): z.infer<typeof ApprovalsSchema> {
    let text: string;
    try {
      text = readFileSync(this.file, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return { v: 1, approved: [] };
      throw new VakError("bad-input", `${this.file}: cannot be read (${(e as Error).message})`);
    }
    const r = ApprovalsSchema.safeParse((() => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return undefined;
      }
    })());
    if (!r.success) throw new VakError("bad-input", `${this.file} is damaged; no proposal counts as approved until it is removed`);
    return r.data;
  }

  /** The approvals recorded for one workspace (for `vak audit`: an approval whose definition changed since). */
  forWorkspace(workspace: string): { name: string; hash: string; source: string; at: string }[] {
    return this.load().approved.filter((a) => a.workspace === workspace).map(({ name, hash, source, at }) => ({ name, hash, source, at }));
  }

  isApproved(workspace: string, p: Proposal): boolean {
    return this.load().approved.some((a) => a.workspace === workspace && a.name === p.name && a.hash === p.hash);
  }

  approve(workspace: string, p: Proposal): void {
    const f = this.load();
    f.approved = f.approved.filter((a) => !(a.workspace === workspace && a.name === p.name));
    f.approved.push({ workspace, name: p.name, hash: p.hash, source: p.source, at: new Date().toISOString() });
    const old = process.umask(0o077);
    try {
      mkdirSync(join(this.file, ".."), { recursive: true, mode: 0o700 });
      const tmp = `${this.file}.${process.pid}.tmp`;
      const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
      try {
        writeSync(fd, `${JSON.stringify(f, null, 2)}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, this.file);
    } finally {
      process.umask(old);
    }
  }
}
