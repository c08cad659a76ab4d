import { createHash } from "node:crypto";

/**
 * The hash chain, as both backends hold it: each event stores the hash of the
 * event before it on its chain and its own hash over all its stored fields,
 * so changing, removing or reordering any stored event breaks the chain at
 * that event. The bytes hashed are computed here, in Vak, from the exact text
 * the backend stores (actor and payload are stored as the JSON text that was
 * hashed, never re-serialised by a database), and verify() recomputes them
 * from that stored text.
 *
 * SQLite holds one chain through every event of every session; PostgreSQL one
 * chain per session (hosts sharing a database never wait on each other's
 * events), each rooted in its session's entry in a chain of sessions. The
 * walker below checks one chain's links and is shared by both.
 */
export const GENESIS = "0".repeat(64);

/** The fields of a stored event that its hash covers, in the order they are hashed. */
export interface ChainRow {
  seq: number;
  session: string;
  session_seq: number;
  time: string;
  kind: string;
  actor: string;
  generation: number;
  payload: string;
}

/** The bytes an event's hash covers: every stored field but the hash itself. */
export function eventHash(prev: string, r: ChainRow): string {
  const canonical = JSON.stringify([r.seq, r.session, r.session_seq, r.time, r.kind, r.actor, r.generation, r.payload]);
  return sha256(`${prev}\n${canonical}`);
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export type VerifyResult =
  | { ok: true; events: number; chains: number; head: string }
  | { ok: false; events: number; seq: number; session?: string; sessionSeq?: number; problem: string };

export type Broken = Extract<VerifyResult, { ok: false }>;

/**
 * Walks one chain, row by row in the order of seq: each row must come next,
 * follow from the row before, and hash to what it stores. `label` names the
 * chain in messages ("" for SQLite's single chain).
 */
export class ChainWalker {
  private expectSeq: number;
  private prev: string;
  count = 0;

  constructor(
    start: { seq: number; hash: string },
    private readonly label: string,
  ) {
    this.expectSeq = start.seq + 1;
    this.prev = start.hash;
  }

  get last(): { seq: number; hash: string } {
    return { seq: this.expectSeq - 1, hash: this.prev };
  }

  /** Checks the next row; a Broken result names the first broken link. */
  step(r: ChainRow & { prev_hash: string; hash: string }, eventsBefore: number): Broken | undefined {
    const where = { seq: r.seq, session: r.session, sessionSeq: r.session_seq, events: eventsBefore + this.count };
    const ev = (n: number) => `event ${n}${this.label}`;
    if (r.seq !== this.expectSeq)
      return {
        ok: false, ...where,
        problem: r.seq > this.expectSeq ? `events ${this.expectSeq} to ${r.seq - 1}${this.label} are missing (removed)` : `${ev(r.seq)} is out of order`,
      };
    if (r.prev_hash !== this.prev)
      return { ok: false, ...where, problem: `${ev(r.seq)} does not follow from ${r.seq === 1 ? "the start of its chain" : `event ${r.seq - 1}`} (one of them was changed, removed or reordered)` };
    if (eventHash(this.prev, r) !== r.hash) return { ok: false, ...where, problem: `${ev(r.seq)} was changed after it was written (its hash does not match its contents)` };
    this.prev = r.hash;
    this.expectSeq += 1;
    this.count += 1;
    return undefined;
  }
}
