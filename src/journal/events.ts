/**
 * The kinds of event the journal holds: every decision, policy generation,
 * resolved target, approval, denial and egress attempt (seed 000, invariant 8),
 * and what was called with what arguments and what came back (seed 001).
 * Payloads are JSON objects; each kind names the fields it must have.
 */
export const EVENT_FIELDS = {
  "session.started": ["kind"],
  "session.ended": ["outcome"],
  "policy.generation": ["generation"],
  "run.cancelled": ["reason"],
  "op.requested": ["op"],
  decision: ["op", "allowed", "reason"],
  "target.resolved": ["asked", "resolved"],
  "approval.asked": ["op", "digest", "nonce"],
  "approval.answered": ["nonce", "answer"],
  "approval.voided": ["nonce", "reason"],
  "worker.spawned": ["sandbox"],
  "worker.exited": ["code"],
  egress: ["method", "asked", "decision", "reason"],
  "model.call": ["provider", "model"],
  "secret.used": ["name", "recipient"],
  "tool.result": ["op", "ok"],
  "message": ["role", "provenance"],
  "journal.pruned": ["before", "events"],
  // `vak audit --fix` (src/audit/): one mode narrowed, recorded before the change is made.
  "audit.fixed": ["check", "path", "from", "to"],
  // `vak journal migrate`: a SQLite journal copied in, with the head its chain verified to.
  "journal.migrated": ["from", "events", "sessions", "head"],
  // MCP (src/mcp/): a call and its decision (durable before the server sees it), its result, the
  // connection's two sides, what a listing withheld, and every message that was dropped.
  "mcp.call": ["server", "tool", "decision"],
  "mcp.result": ["server", "tool", "ok"],
  "mcp.initialized": ["client", "server"],
  "mcp.tools": ["server", "listed", "withheld"],
  "mcp.dropped": ["from", "problem"],
} as const;

export type EventKind = keyof typeof EVENT_FIELDS;

export function isEventKind(k: string): k is EventKind {
  return Object.hasOwn(EVENT_FIELDS, k);
}

/** Who caused an event: a component of the session and the identity it ran as. */
export interface Actor {
  component: string;
  identity?: string;
}

export type Payload = Record<string, unknown>;

export interface NewEvent {
  kind: EventKind;
  actor: Actor;
  generation: number;
  payload: Payload;
}

export interface StoredEvent extends NewEvent {
  seq: number;
  session: string;
  sessionSeq: number;
  time: string;
  prevHash: string;
  hash: string;
}

/** Refuses what the journal must not hold: an unknown kind or a payload without its fields. */
export function checkEvent(e: NewEvent): void {
  if (!isEventKind(e.kind)) throw new TypeError(`unknown journal event kind: ${String(e.kind)}`);
  if (!e.payload || typeof e.payload !== "object" || Array.isArray(e.payload)) throw new TypeError(`${e.kind}: payload must be an object`);
  for (const f of EVENT_FIELDS[e.kind]) if (!(f in e.payload)) throw new TypeError(`${e.kind}: payload lacks "${f}"`);
  if (!e.actor || typeof e.actor.component !== "string" || !e.actor.component) throw new TypeError(`${e.kind}: actor needs a component`);
  if (!Number.isInteger(e.generation) || e.generation < 0) throw new TypeError(`${e.kind}: bad policy generation`);
}
