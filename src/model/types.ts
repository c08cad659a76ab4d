/**
 * What the host exchanges with a model, independent of any provider's wire
 * format. Only the host calls models; nothing here reaches a worker.
 *
 * Trusted and untrusted text are different message kinds, never one string:
 * the user's instructions are `user` messages; everything a tool brought back
 * (file contents, command output, a sub-agent's answer) is a `tool` message
 * with its provenance, sent to the model as a tool result and never as an
 * instruction.
 */
export interface ToolCallRequest {
  /** The provider's id for this call, echoed back with the result. */
  id: string;
  name: string;
  /** The arguments as the model sent them (already JSON-decoded, or the raw text when it was not JSON). */
  args: unknown;
}

export interface Provenance {
  /** The tool that produced this content, and what it touched. */
  tool: string;
  target?: string | undefined;
  /** Always true for tool content: it came from outside the user's instructions. */
  untrusted: true;
}

/** Where a task's prompt came from: another model (the parent agent), through the task tool. */
export interface DelegatedFrom {
  from: string;
  tool: "task";
  description: string;
  untrusted: true;
}

export type Message =
  | { role: "user"; text: string }
  /** A sub-agent's instruction: written by its parent's model, sent fenced as model-written content, never as the user's words. */
  | { role: "delegated"; text: string; provenance: DelegatedFrom }
  | { role: "assistant"; text: string; toolCalls: ToolCallRequest[] }
  | { role: "tool"; callId: string; name: string; text: string; isError: boolean; provenance: Provenance };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the input object. */
  parameters: Record<string, unknown>;
}

export interface ModelRequest {
  system: string;
  messages: readonly Message[];
  tools: readonly ToolSpec[];
  maxTokens?: number;
  signal?: AbortSignal;
  /** Text as it streams in, for a live transcript. */
  onText?: (delta: string) => void;
  /** The host's redactor: every field of a fence passes it (the agent loop always gives it). */
  redact?: (s: string) => string;
}

export interface ModelTurn {
  text: string;
  toolCalls: ToolCallRequest[];
  stop: "end" | "tool_use" | "length" | "other";
  usage?: { input: number; output: number } | undefined;
}

export interface ModelClient {
  readonly provider: string;
  readonly model: string;
  complete(req: ModelRequest): Promise<ModelTurn>;
}

/** A model call that failed, said plainly: which provider, what went wrong, what to do. */
export class ModelError extends Error {
  constructor(
    readonly kind: "auth" | "rate-limit" | "connection" | "bad-request" | "not-found" | "server" | "cancelled" | "script" | "too-large",
    message: string,
  ) {
    super(message);
    this.name = "ModelError";
  }
}
