import { BrokerEgress } from "../broker/egress.js";
import type { EgressEvent } from "../net/egress-gate.js";
import type { NetGrants } from "../policy/net-grants.js";
import type { GateLink } from "../sandbox/launcher.js";

/** Starts an egress gate for one `vak exec` run, on a socket in a fresh private directory. */
export async function startGate(grants: NetGrants, onEvent: (e: EgressEvent) => void, durable: () => Promise<void>): Promise<{ link: GateLink; close(): Promise<void> }> {
  const egress = new BrokerEgress("exec", onEvent, durable);
  const { link } = await egress.link(grants, 1);
  // The run closes the gate as soon as the sandbox is gone, and again on its way out; BrokerEgress closes once.
  return { link, close: () => egress.close() };
}
