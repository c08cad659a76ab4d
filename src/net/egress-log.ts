/** One egress attempt, allowed or not, for the journal. */
export interface EgressEvent {
  time: string;
  component: string;
  generation: number;
  method: string;
  /** The destination as the client wrote it (cut to a few hundred characters). */
  asked: string;
  /** host:port after canonicalisation, when it got that far. */
  canonical?: string;
  resolved?: string[];
  /** The address connected to. */
  address?: string;
  decision: "allowed" | "denied";
  reason: string;
  /** What kind of refusal, stable: refusals are counted by it. */
  code?: string;
  /** On the event that closes an allowed request: how it ended. The decision
   *  itself was recorded, without outcome, before anything was connected. */
  outcome?: string;
  status?: number;
  bytesUp?: number;
  bytesDown?: number;
  /** On a summary: how many refusals of this kind it stands for. */
  count?: number;
  /** Secrets (by reference) the gate put into this request's headers. */
  secrets?: string[];
  /** Secrets whose placeholder this request carried where the gate does not replace it (another host, the URL): sent as a placeholder. */
  withheld?: string[];
  /** For a request the gate put a secret into: how many times its answer held a secret's value, each replaced by its placeholder before the command got it (reflected.ts). Never the value. */
  reflected?: number;
  /** For HTTPS: whether the gate terminated TLS (and checked each request inside) or spliced an opaque tunnel. */
  tls?: "terminated" | "spliced";
  /** A protocol switched to (websocket), carried and counted, not inspected. */
  upgrade?: string;
  /** The provider endpoint (its variable) this request came through. */
  endpoint?: string;
}

const MAX_ASKED = 300;
const MAX_REASON = 600;
const MAX_RESOLVED = 16;

/** Cuts a field the client controls, saying how much was cut. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…[${text.length - max} more characters]`;
}

/** The event with every field a client controls cut short. */
export function capped(e: EgressEvent): EgressEvent {
  return {
    ...e,
    method: clip(e.method, 32),
    asked: clip(e.asked, MAX_ASKED),
    reason: clip(e.reason, MAX_REASON),
    ...(e.resolved ? { resolved: e.resolved.slice(0, MAX_RESOLVED) } : {}),
  };
}

export interface EgressLogOptions {
  /** Refusals of one kind (component, generation, code) recorded one by one. */
  perKind: number;
  /** After that, at most one summary of the kind per this many ms, and one at flush. */
  summaryMs: number;
}

export const DEFAULT_EGRESS_LOG: EgressLogOptions = { perKind: 50, summaryMs: 5_000 };

interface Kind {
  seen: number;
  unrecorded: number;
  last: EgressEvent;
  summarised: number;
}

/**
 * Keeps the egress record bounded under a flood without losing count: every
 * field a client controls is cut to a few hundred characters, and after the
 * first perKind refusals of a kind, further ones are folded into summary
 * events that carry how many there were and the last one's details. Allowed
 * requests are always recorded one by one.
 */
export class EgressLog {
  private readonly kinds = new Map<string, Kind>();

  constructor(
    private readonly sink: (e: EgressEvent) => void,
    private readonly opts: EgressLogOptions = DEFAULT_EGRESS_LOG,
  ) {}

  record(e: EgressEvent): void {
    const event = capped(e);
    if (event.decision !== "denied") return this.sink(event);
    const key = `${event.component}\u0000${event.generation}\u0000${event.code ?? event.reason}`;
    const kind = this.kinds.get(key) ?? { seen: 0, unrecorded: 0, last: event, summarised: Date.now() };
    this.kinds.set(key, kind);
    kind.seen += 1;
    if (kind.seen <= this.opts.perKind) return this.sink(event);
    kind.unrecorded += 1;
    kind.last = event;
    if (Date.now() - kind.summarised >= this.opts.summaryMs) this.summarise(kind);
  }

  /** Records a summary of every kind with refusals not yet on the record. */
  flush(): void {
    for (const kind of this.kinds.values()) this.summarise(kind);
  }

  private summarise(kind: Kind): void {
    if (kind.unrecorded === 0) return;
    const { last, unrecorded } = kind;
    kind.unrecorded = 0;
    kind.summarised = Date.now();
    this.sink({
      ...last,
      time: new Date().toISOString(),
      reason: clip(`${unrecorded} more refusal(s) of this kind, not recorded one by one; the last: ${last.reason}`, MAX_REASON + 120),
      count: unrecorded,
    });
  }
}
