import { rmSync } from "node:fs";
import { EgressGate, type EgressEvent, type HeaderSecret } from "../net/egress-gate.js";
import type { NetGrants } from "../policy/net-grants.js";
import { gateSocketDir } from "../policy/state.js";
import type { GateLink } from "../sandbox/launcher.js";

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
  ) {}

  private start(): Promise<{ gate: EgressGate; dir: string }> {
    this.started ??= (async () => {
      const dir = gateSocketDir();
      const gate = new EgressGate({ dir, onEvent: this.onEvent, durable: this.durable });
      await gate.listen();
      return { gate, dir };
    })();
    return this.started;
  }

  /** A token for one command; release() forgets it and closes its connections. */
  async link(grants: NetGrants, generation: number, headers: readonly HeaderSecret[] = []): Promise<{ link: GateLink; release(): void }> {
    const { gate, dir } = await this.start();
    const token = gate.register({ component: this.component, generation, grants, headers });
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
