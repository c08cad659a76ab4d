import { createHash } from "node:crypto";
import { z } from "zod";
import { EnvNameSchema } from "../policy/grants.js";
import { canonicalJson } from "./pins.js";

/**
 * An MCP server as Vak starts it for its own agent and workloads: the same
 * grants as `vak mcp`'s flags, written as data (`[mcp_servers.NAME]` in the
 * user's config, `[tools.NAME] mcp = [...]` in a workload spec, or a
 * repository's proposal once approved). Empty means nothing: no network, no
 * variables, the workspace read-only.
 */
export const McpServerSchema = z
  .object({
    /** The server's argv; never chosen by a model. */
    command: z.array(z.string().min(1)).min(1),
    /** Host variables passed by name. */
    env: z.array(EnvNameSchema).default([]),
    /** Literal variables (a repository's proposal may set these; never Vak's own, such as PATH or HTTP_PROXY). */
    set_env: z.record(EnvNameSchema, z.string()).default({}),
    /** Secrets by reference, each into one variable of the server's environment. */
    secrets: z.array(z.object({ ref: z.string().min(1), env: EnvNameSchema }).strict()).default([]),
    mode: z.enum(["read-only", "workspace-write"]).default("read-only"),
    read: z.array(z.string()).default([]),
    write: z.array(z.string()).default([]),
    deny_read: z.array(z.string()).default([]),
    deny_write: z.array(z.string()).default([]),
    net: z.array(z.string()).default([]),
    deny_net: z.array(z.string()).default([]),
    /** Tools never listed or called. */
    deny_tools: z.array(z.string()).default([]),
    /** Whether each call waits for a person ("ask", the default, like exec) or runs inside the grants ("allow"). */
    approval: z.enum(["ask", "allow"]).default("ask"),
    max_procs: z.number().int().positive().optional(),
    max_memory: z.number().int().min(1 << 20).optional(),
  })
  .strict();
export type McpServerDef = z.infer<typeof McpServerSchema>;

export const SERVER_NAME = /^[a-z0-9][a-z0-9_-]{0,39}$/;

/** The digest a definition is approved under: the same definition, the same hash, wherever it was written. */
export function definitionHash(name: string, def: unknown): string {
  return createHash("sha256").update(canonicalJson({ name, definition: def })).digest("hex");
}
