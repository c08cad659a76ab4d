import { z } from "zod";
import type { ToolSpec } from "../model/types.js";

/**
 * The task tool: the model hands a piece of work to a child agent. The child
 * is governed like its parent, with at most the parent's grants: it may be
 * narrowed to read-only, never widened, and it cannot start tasks itself.
 */
export const TaskArgsSchema = z
  .object({
    description: z.string().min(1).max(200),
    prompt: z.string().min(1).max(100_000),
    mode: z.enum(["read-only", "workspace-write"]).optional(),
  })
  .strict();
export type TaskArgs = z.infer<typeof TaskArgsSchema>;

export const TASK_TOOL: ToolSpec = {
  name: "task",
  description:
    "Hand a self-contained piece of work to a sub-agent with the same tools and at most your grants (mode read-only narrows it). " +
    "It answers with its final message.",
  parameters: z.toJSONSchema(TaskArgsSchema, { target: "draft-7" }) as Record<string, unknown>,
};
