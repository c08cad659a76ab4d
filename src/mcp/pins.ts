import { createHash } from "node:crypto";
import { closeSync, constants, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { VakError } from "../policy/errors.js";
import { vakDirs } from "../policy/state.js";

/**
 * Tool pinning (the CVE-2025-54136 class: a definition that changes after it
 * was trusted). Each server identity (`--name`, else its command line) has a
 * file in Vak's state directory, which no sandbox can reach, holding the
 * definition of every tool it was trusted with: its whole definition as
 * checked and passed on (name, title, description, input and output schemas,
 * annotations, _meta). The first connection of an identity pins what it lists;
 * after that a changed or new definition is withheld and kept as pending until
 * `vak mcp trust NAME` accepts it. The server's instructions, which a client
 * puts before its model as it does descriptions, are pinned the same way.
 */
const Definition = z.record(z.string(), z.unknown());
const Entry = z.object({ digest: z.string().regex(/^[0-9a-f]{64}$/), definition: Definition, at: z.string() }).strict();
/** The server's instructions (InitializeResult.instructions): text a client puts before its model, pinned like a definition. */
const Instructions = z.object({ digest: z.string().regex(/^[0-9a-f]{64}$/), text: z.string(), at: z.string() }).strict();
const PinFileSchema = z
  .object({
    v: z.literal(1),
    server: z.string().min(1),
    command: z.array(z.string()),
    created: z.string(),
    tools: z.record(z.string(), Entry),
    pending: z.record(z.string(), Entry.extend({ why: z.enum(["changed", "new"]) }).strict()),
    instructions: Instructions.optional(),
    pendingInstructions: Instructions.extend({ why: z.enum(["changed", "new"]) }).strict().optional(),
  })
  .strict();
export type PinFile = z.infer<typeof PinFileSchema>;
export type ToolDefinition = Record<string, unknown>;

/**
 * pinned: as trusted. first-sight: pinned now, on this identity's first connection. changed/new: withheld.
 * duplicate: listed twice in one listing, so which one a call reaches is unknowable: withheld. over-limit: a
 * definition too large to keep (tools.ts): withheld, and not stored.
 */
export type PinVerdict = "pinned" | "first-sight" | "changed" | "new" | "duplicate" | "over-limit";

/** JSON with keys sorted at every level: the same definition always has the same digest. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().filter((k) => o[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

export function toolDigest(def: ToolDefinition): string {
  return textDigest(canonicalJson(def));
}

/** The digest of a pinned text: a definition's canonical JSON (for a caller that has it already), the server's instructions. */
export function textDigest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** Decides what one listed tool is against the pins (pure). `fresh`: this identity had no pins when the connection began. */
export function judge(file: PinFile | undefined, fresh: boolean, def: ToolDefinition): PinVerdict {
  const name = String(def.name);
  const pinned = file && Object.hasOwn(file.tools, name) ? file.tools[name] : undefined;
  if (pinned) return pinned.digest === toolDigest(def) ? "pinned" : "changed";
  return fresh ? "first-sight" : "new";
}

export function pinsDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(vakDirs(env).state, "mcp", "pins");
}

/** The file name for an identity: readable, and unique by its hash. */
export function pinFileName(server: string): string {
  const slug = server.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[-.]+/, "").slice(0, 48) || "server";
  return `${slug}-${createHash("sha256").update(server).digest("hex").slice(0, 16)}.json`;
}

export class PinStore {
  constructor(private readonly dir: string = pinsDir()) {}

  path(server: string): string {
    return join(this.dir, pinFileName(server));
  }

  load(server: string): PinFile | undefined {
    let text: string;
    try {
      const fd = openSync(this.path(server), constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        text = readFileSync(fd, "utf8");
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw new VakError("bad-input", `the tool pins of ${server} (${this.path(server)}) cannot be read: ${(e as Error).message}`);
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      data = undefined;
    }
    const r = PinFileSchema.safeParse(data);
    // A damaged pin file must not read as "never seen" (that would pin whatever is listed now).
    if (!r.success || r.data.server !== server)
      throw new VakError("bad-input", `the tool pins of ${server} (${this.path(server)}) are damaged; remove the file to pin the server's tools afresh`);
    return r.data;
  }

  /** Every identity with pins, for `vak mcp trust` without a name. */
  list(): PinFile[] {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((n) => n.endsWith(".json"));
    } catch {
      return [];
    }
    const out: PinFile[] = [];
    for (const n of names) {
      try {
        const r = PinFileSchema.safeParse(JSON.parse(readFileSync(join(this.dir, n), "utf8")));
        if (r.success) out.push(r.data);
      } catch {
        // unreadable: `vak mcp trust NAME` reports it by name
      }
    }
    return out.sort((a, b) => a.server.localeCompare(b.server));
  }

  /**
   * Applies a change to the stored file under a fresh read (another connection
   * of the same server may have written since), and writes it atomically, 0600.
   */
  update(server: string, command: readonly string[], change: (f: PinFile) => void): PinFile {
    const f = this.load(server) ?? { v: 1 as const, server, command: [...command], created: new Date().toISOString(), tools: {}, pending: {} };
    change(f);
    this.write(f);
    return f;
  }

  private write(f: PinFile): void {
    const old = process.umask(0o077);
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const target = this.path(f.server);
      const tmp = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
      const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        writeSync(fd, `${JSON.stringify(f, null, 2)}\n`);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, target);
    } catch (e) {
      if (e instanceof VakError) throw e;
      throw new VakError("journal", `the tool pins of ${f.server} could not be written (${(e as Error).message}); the server's tools stay withheld`);
    } finally {
      process.umask(old);
    }
  }
}

/**
 * Moves what is pending into the pins: what `vak mcp trust NAME` does once the
 * user says yes. Only the definitions the user was shown (name and digest) are
 * accepted; one that changed again since is left pending.
 */
export function acceptPending(f: PinFile, shown: ReadonlyMap<string, string>, shownInstructions?: string): string[] {
  const accepted: string[] = [];
  const p = f.pendingInstructions;
  if (p && shownInstructions === p.digest) {
    f.instructions = { digest: p.digest, text: p.text, at: new Date().toISOString() };
    delete f.pendingInstructions;
    accepted.push("(the server's instructions)");
  }
  for (const [name, p] of Object.entries(f.pending)) {
    if (shown.get(name) !== p.digest) continue;
    f.tools[name] = { digest: p.digest, definition: p.definition, at: new Date().toISOString() };
    delete f.pending[name];
    accepted.push(name);
  }
  return accepted;
}
