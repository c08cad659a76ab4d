import { z } from "zod";

/**
 * What crosses between the server and the browser. Every request body has a
 * strict schema (unknown fields, wrong types and oversized strings are a 400
 * that says where); responses and WebSocket messages are types the web
 * client imports (type-only: no zod reaches the browser bundle). Every string
 * in a response that a model, a tool, a command or a server chose has passed
 * the redactor and the neutraliser (browser-text.ts) before it is put here.
 */
const Mode = z.enum(["read-only", "workspace-write"]);

export const CreateSessionBody = z.discriminatedUnion("kind", [
  z
    .object({
      kind: z.literal("agent"),
      mode: Mode.default("workspace-write"),
      /** provider:model; default: the model `vak serve` was started with, or the config's default. */
      model: z.string().min(1).max(4096).optional(),
      /** A directory inside the workspace `vak serve` was started in (relative to it, or absolute). */
      workspace: z.string().min(1).max(4096).optional(),
      title: z.string().min(1).max(200).optional(),
      /** The first instruction, sent as soon as the session exists. */
      prompt: z.string().min(1).max(100_000).optional(),
    })
    .strict(),
  z
    .object({
      kind: z.literal("workload"),
      /** A workload spec file inside the workspace. */
      spec: z.string().min(1).max(4096),
      mode: Mode.default("workspace-write"),
      model: z.string().min(1).max(4096).optional(),
      prompt: z.string().min(1).max(100_000).optional(),
    })
    .strict(),
]);
export type CreateSession = z.infer<typeof CreateSessionBody>;

export const MessageBody = z.object({ text: z.string().min(1).max(100_000) }).strict();

/** An answer names all three of the request's bindings; the gate decides whether they still hold. */
export const ApprovalAnswerBody = z
  .object({
    nonce: z.string().regex(/^[0-9a-f]{32}$/, "a request's nonce (32 hex digits)"),
    digest: z.string().regex(/^[0-9a-f]{64}$/, "the op's digest (64 hex digits)"),
    generation: z.number().int().min(0),
    answer: z.enum(["allow", "allow-session", "deny"]),
  })
  .strict();
export type ApprovalAnswerInput = z.infer<typeof ApprovalAnswerBody>;

export const ModeBody = z.object({ mode: Mode }).strict();

export const LoginBody = z.object({ token: z.string().min(1).max(512) }).strict();

export const EventsQuery = z
  .object({
    after: z.coerce.number().int().min(0).default(0),
    limit: z.coerce.number().int().min(1).max(500).default(200),
  })
  .strict();

export const TerminalSize = z.object({ type: z.literal("resize"), cols: z.number().int().min(2).max(500), rows: z.number().int().min(2).max(300) }).strict();

// Responses (types only).

export type SessionMode = z.infer<typeof Mode>;

export interface SessionSummary {
  id: string;
  /** agent, workload:…, exec, … as the journal names it. */
  kind: string;
  title: string;
  workspace: string | null;
  started: string;
  /** Hosted by this server now: it can be sent messages, answered, switched. */
  live: boolean;
  state?: SessionState | undefined;
  events: number;
  ended: string | null;
  outcome: string | null;
}

export interface SessionState {
  mode: SessionMode | null;
  generation: number;
  running: boolean;
  /** A mode switch is revoking what ran under the old generation. */
  switching: boolean;
  pending: number;
  /** Whether the mode can be switched here (a workload's grants come from its spec). */
  canSwitchMode: boolean;
  terminal: boolean;
}

/** Text the server bounded: what is shown, and how much of it there was. Never clipped silently. */
export interface Shown {
  text: string;
  bytes: number;
  shownBytes: number;
}

export type TranscriptItem =
  | { seq: number; type: "user"; text: Shown; by: string }
  | { seq: number; type: "text"; component: string; text: Shown }
  | { seq: number; type: "tool-call"; component: string; name: string; args: Shown }
  | { seq: number; type: "tool-result"; component: string; name: string; ok: boolean; code: string | null; target: string | null; text: Shown }
  | { seq: number; type: "run"; state: "started" | "ended"; outcome?: string; error?: string | null; refused?: number; toolCalls?: number }
  | { seq: number; type: "notice"; text: string };

export type CardDetail =
  | { kind: "edit"; path: string; replaceAll: boolean; diff: { sign: "-" | "+"; text: string }[]; old: Shown; new: Shown }
  | { kind: "write"; path: string; content: Shown }
  | { kind: "exec"; command: Shown }
  | { kind: "other"; text: Shown };

/**
 * The approval's screen, exactly as the terminal prompt shows it
 * (src/approvals/approval-screen.ts): the client renders these lines as text,
 * a page at a time. Sent whole up to a bound; past it, `complete` is false
 * and the client offers only deny (the rest cannot be seen here).
 */
export interface CardView {
  headline: string;
  kind: "command" | "tool" | "file" | "text";
  lines: string[];
  /** Lines and characters in the whole view (lines.length is what was sent). */
  total: number;
  chars: number;
  complete: boolean;
  firstPage: number;
  page: number;
}

export interface ApprovalCard {
  nonce: string;
  digest: string;
  generation: number;
  component: string;
  op: string;
  target: string | null;
  summary: string;
  /** What "allow for this session" would let run later without asking, said exactly (filtered). */
  scope: string;
  /** What the card shows: the terminal's screen of this request. */
  view: CardView;
  /** The op as structured fields (for programs); the client renders `view`. */
  detail: CardDetail;
  /** The detail shown is exactly what the digest covers (checked by the server); false only for requests without one (a spec edit). */
  verified: boolean;
}

export interface ComponentReach {
  component: string;
  tools: string[];
  files: { path: string; access: "read" | "write" }[];
  denied: { path: string; access: "read" | "write" }[];
  /** Held read-only inside every writable grant, at any depth. */
  protected: string[];
  network: string[];
  networkDenied: string[];
  env: string[];
  secrets: { ref: string; to: string }[];
  stores: string[];
}

export interface ReachView {
  session: string;
  kind: string;
  mode: SessionMode | null;
  generation: number;
  workspace: string;
  components: ComponentReach[];
}

export interface EventView {
  seq: number;
  session: string;
  sessionSeq: number;
  time: string;
  kind: string;
  component: string;
  generation: number;
  /** A one-line description, for a person. */
  line: string;
  /** A denial, a failed or refused call, a denied or voided approval, a cancel. */
  refusal: boolean;
  payload: unknown;
}

export interface VerifyView {
  ok: boolean;
  events: number;
  problem?: string | undefined;
  checkedAt: string;
}

export type LiveMessage =
  | { type: "transcript"; session: string; item: TranscriptItem }
  | { type: "approval"; session: string; card: ApprovalCard }
  | { type: "approval-closed"; session: string; nonce: string; answer: string; by: string }
  | { type: "state"; session: string; state: SessionState }
  | { type: "sessions" }
  | { type: "events"; events: EventView[] };

/** A live message as sent: with its position in the feed (hub.ts). */
export type FeedMessage = LiveMessage & { feed: number };
