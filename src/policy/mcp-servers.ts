import { z } from "zod";
import { EnvNameSchema } from "./grants.js";

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
    max_procs: z.number().int().positive().optional(),
    max_memory: z.number().int().min(1 << 20).optional(),
  })
  .strict();
export type McpServerDef = z.infer<typeof McpServerSchema>;

/** A server's name: in `mcp__NAME__tool`, in pins and in the record. */
export const SERVER_NAME = /^[a-z0-9][a-z0-9_-]{0,39}$/;
