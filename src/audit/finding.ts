import { z } from "zod";

/**
 * One thing `vak audit` found. The id is stable (a test, a script or a
 * dashboard keys on it); title and detail are for a person; fix says what to
 * change (a config key, a command, a path); fixable says `vak audit --fix`
 * may apply it, which it does only for the narrowing changes in fix.ts.
 */
export const SeveritySchema = z.enum(["info", "warn", "critical"]);
export type Severity = z.infer<typeof SeveritySchema>;

export const FindingSchema = z
  .object({
    id: z.string().regex(/^[a-z]+(?:\.[a-z0-9-]+)+$/),
    severity: SeveritySchema,
    title: z.string().min(1),
    detail: z.string(),
    fix: z.string(),
    fixable: z.boolean(),
    /** The file or directory the finding is about, when there is one. */
    path: z.string().optional(),
  })
  .strict();
export type Finding = z.infer<typeof FindingSchema>;

/** A change --fix made: always a mode with bits taken away, never one added. */
export const FixedSchema = z.object({ id: z.string(), path: z.string(), from: z.string(), to: z.string() }).strict();
export type Fixed = z.infer<typeof FixedSchema>;

/** What `vak audit --json` prints: one object, on one line. */
export const AuditReportSchema = z
  .object({
    version: z.literal(1),
    /** No finding at warn or above (after --fix, if it ran). */
    ok: z.boolean(),
    deep: z.boolean(),
    findings: z.array(FindingSchema),
    /** What --fix changed (empty without --fix). */
    fixed: z.array(FixedSchema),
  })
  .strict();
export type AuditReport = z.infer<typeof AuditReportSchema>;

/**
 * A finding as a check returns it: with, when --fix may apply it, the bits to
 * take away from the mode of one path (never bits to add).
 */
export interface Narrowing {
  path: string;
  /** Mode bits to take away. */
  bits: number;
  dir: boolean;
}

export interface Check extends Finding {
  remove?: Narrowing[] | undefined;
}

export const atLeastWarn = (f: Finding) => f.severity !== "info";

export const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, "0");
