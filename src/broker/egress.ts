import { rmSync } from "node:fs";
import type { Actor, Payload } from "../journal/events.js";
import type { SessionWriter } from "../journal/session-writer.js";
import { EgressGate, type EgressEvent, type GateOptions, type GateWorker, type HeaderSecret } from "../net/egress-gate.js";
import type { NetGrants } from "../policy/net-grants.js";
import { gateSocketDir } from "../policy/state.js";
import type { GateLink } from "../sandbox/launcher.js";
import { describeRecipient, type InjectedSecret } from "../secrets/grant.js";

/**
 * The egress gate for one broker's exec commands, started on first use. Each
 * command gets its own token, carrying the policy generation; a policy change
 * revokes older tokens and closes their connections.
 */
export class BrokerEgress {
  private started: Promise<{ gate: EgressGate; dir: string }> | undefined;

  constructor(
    private readonly component: string,
    private readonly onEvent: (e: EgressEvent) => void,
    /** See GateOptions.durable. */
    private readonly durable?: () => Promise<void>,
    /** TLS at the gate (see GateOptions.tls), for grants that must see inside HTTPS, and the host's upstream proxy; asked for when the gate starts. */
    private readonly gateOptions: Pick<GateOptions, "tls" | "upstreamProxy"> | (() => Promise<Pick<GateOptions, "tls" | "upstreamProxy">>) = {},
  ) {}

  private start(): Promise<{ gate: EgressGate; dir: string }> {
    this.started ??= (async () => {
      const dir = gateSocketDir();
      const extra = typeof this.gateOptions === "function" ? await this.gateOptions() : this.gateOptions;
      const gate = new EgressGate({ dir, onEvent: this.onEvent, durable: this.durable, ...extra });
      await gate.listen();
      return { gate, dir };
    })();
    return this.started;
  }

  /** A token for one command; release() forgets it and closes its connections. */
  async link(grants: NetGrants, generation: number, headers: readonly HeaderSecret[] = [], extra: Pick<GateWorker, "placeholders" | "endpoints"> = {}): Promise<{ link: GateLink; release(): void }> {
    const { gate, dir } = await this.start();
    const token = gate.register({ component: this.component, generation, grants, headers, ...extra });
    return { link: { dir, token }, release: () => gate.unregister(token, "released") };
  }

  async setGeneration(generation: number): Promise<void> {
    if (this.started) (await this.started).gate.setGeneration(generation);
  }

  private closed: Promise<void> | undefined;

  /** Closes the gate and removes its directory; later calls wait for the same close. */
  close(): Promise<void> {
    const started = this.started;
    if (!started) return Promise.resolve();
    this.closed ??= started.then(async ({ gate, dir }) => {
      await gate.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return this.closed;
  }
}

/**
 * A broker's gate, every event of which goes on the component's record. Egress
 * is recorded durably before the gate connects anything; if it cannot be, the
 * gate refuses the request. Appends are batched: the gate waits for the commit
 * that holds the latest one, so requests made together share one commit. A
 * header secret's use is recorded with the allowed request that carries it.
 */
export function recordedEgress(
  actor: Actor,
  journal: SessionWriter | undefined,
  secrets: readonly InjectedSecret[],
  gateOptions?: ConstructorParameters<typeof BrokerEgress>[3],
): BrokerEgress {
  let latest: Promise<unknown> = Promise.resolve();
  const append = (kind: "egress" | "secret.used", generation: number, payload: Payload) => {
    const p = journal?.append(kind, actor, generation, payload);
    if (!p) return;
    p.catch(() => undefined); // a refusal or an end that cannot be recorded stops nothing; an allowed request waits on it
    latest = p;
  };
  return new BrokerEgress(
    actor.component,
    (e) => {
      const { time: _t, generation, ...fields } = e;
      append("egress", generation, fields);
      if (e.decision === "allowed" && !e.outcome)
        for (const ref of e.secrets ?? []) {
          const sec = secrets.find((x) => x.ref === ref);
          if (sec) append("secret.used", generation, { name: ref, recipient: `${describeRecipient(sec.recipient)} (${e.canonical})`, component: actor.component });
        }
    },
    () => latest.then(() => undefined),
    gateOptions,
  );
}
