import { readFileSync } from "node:fs";
import { z } from "zod";
import { ModelError, type Message, type ModelClient, type ModelRequest, type ModelTurn } from "./types.js";

/**
 * A provider that replays a file of model turns: for tests, and for
 * `vak demo`, which must run with no model configured. It records what it was
 * sent, so that tests can check what a model would have seen.
 */
export const ScriptSchema = z
  .object({
    turns: z
      .array(
        z
          .object({
            text: z.string().default(""),
            tool_calls: z.array(z.object({ name: z.string().min(1), args: z.unknown() }).strict()).default([]),
          })
          .strict(),
      )
      .min(1),
  })
  .strict();
export type Script = z.input<typeof ScriptSchema>;

export class ScriptedClient implements ModelClient {
  readonly provider = "scripted";
  readonly model: string;
  private readonly turns: z.infer<typeof ScriptSchema>["turns"];
  private next = 0;
  /** Every request's messages, as the model would have seen them. */
  readonly seen: { system: string; messages: Message[]; tools: string[] }[] = [];

  constructor(script: Script, name = "script") {
    const r = ScriptSchema.safeParse(script);
    if (!r.success) {
      const i = r.error.issues[0]!;
      throw new ModelError("script", `${name}: ${i.path.join(".") || "(top level)"}: ${i.message}`);
    }
    this.turns = r.data.turns;
    this.model = name;
  }

  static fromFile(path: string): ScriptedClient {
    let data: unknown;
    try {
      data = JSON.parse(readFileSync(path, "utf8"));
    } catch (e) {
      throw new ModelError("script", `${path}: cannot be read as JSON (${(e as Error).message})`);
    }
    return new ScriptedClient(data as Script, path);
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    if (req.signal?.aborted) throw new ModelError("cancelled", "scripted: the call was cancelled");
    this.seen.push({ system: req.system, messages: structuredClone([...req.messages]), tools: req.tools.map((t) => t.name) });
    const turn = this.turns[this.next];
    const index = this.next++;
    if (!turn) return { text: "", toolCalls: [], stop: "end" };
    if (turn.text) req.onText?.(turn.text);
    const toolCalls = turn.tool_calls.map((c, i) => ({ id: `call_${index}_${i}`, name: c.name, args: c.args ?? {} }));
    return { text: turn.text, toolCalls, stop: toolCalls.length ? "tool_use" : "end" };
  }
}
