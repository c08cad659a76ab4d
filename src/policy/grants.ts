import { z } from "zod";
import { ENV_NAME } from "./env.js";
import type { Limits } from "./limits.js";

// These schemas guard input that arrives as data (config files, the library
// API). The CLI hot path imports only their types: loading zod costs Node
// ~60 ms, more than the whole sandbox start-up.

/** read-only: the workspace is readable. workspace-write: also writable, except
 *  protected paths. full-access: no sandbox, only by its own explicit flag. */
export const ModeSchema = z.enum(["read-only", "workspace-write", "full-access"]);
export type Mode = z.infer<typeof ModeSchema>;

export const EnvNameSchema = z.string().regex(ENV_NAME, "an environment variable name");

/** Limits that arrive as data (the type is in limits.ts). */
export const LimitsSchema = z
  .object({
    timeoutMs: z.number().int().positive().optional(),
    maxOutputBytes: z.number().int().positive().optional(),
    maxProcs: z.number().int().positive().max(1_000_000).optional(),
    maxMemoryBytes: z.number().int().min(1 << 20).optional(),
    maxFileBytes: z.number().int().positive().optional(),
    maxCpuSeconds: z.number().int().positive().optional(),
    maxOpenFiles: z.number().int().min(16).max(1 << 20).optional(),
  })
  .strict() satisfies z.ZodType<Limits>;

/** Grants as the user wrote them: paths may be relative to the workspace. */
export const GrantsSchema = z
  .object({
    read: z.array(z.string()).default([]),
    write: z.array(z.string()).default([]),
    denyRead: z.array(z.string()).default([]),
    denyWrite: z.array(z.string()).default([]),
    /** A host tool's state (a profile's state_dirs and state_files): writable, but no link, FIFO, socket or device made there (native/guard_links.c). */
    noLinks: z.array(z.string()).default([]),
    env: z.array(EnvNameSchema).default([]),
    /**
     * Paths that must keep resolving inside a root, checked each time a plan resolves them, so that a link put there
     * after they were given leads nowhere outside: a repository config's relative paths (read, write, state), in
     * its repository; a session's read and write grants, where they resolved when the session began (what: why).
     */
    confined: z.array(z.object({ path: z.string(), root: z.string(), what: z.string().optional() }).strict()).optional(),
  })
  .strict();
export type Grants = z.infer<typeof GrantsSchema>;
