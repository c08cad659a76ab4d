import { BrokerEgress } from "../broker/egress.js";
import type { EgressEvent, GateOptions, GateWorker } from "../net/egress-gate.js";
import type { NetGrants } from "../policy/net-grants.js";
import type { GateLink } from "../sandbox/launcher.js";

/** Starts an egress gate for one `vak exec` run, on a socket in a fresh private directory. */
export async function startGate(
  grants: NetGrants,
  onEvent: (e: EgressEvent) => void,
  durable: () => Promise<void>,
  opts: { tls?: GateOptions["tls"]; upstreamProxy?: GateOptions["upstreamProxy"]; worker?: Pick<GateWorker, "placeholders" | "endpoints"> } = {},
): Promise<{ link: GateLink; close(): Promise<void> }> {
  const egress = new BrokerEgress("exec", onEvent, durable, { tls: opts.tls, upstreamProxy: opts.upstreamProxy });
  const { link } = await egress.link(grants, 1, [], opts.worker);
  // The run closes the gate as soon as the sandbox is gone, and again on its way out; BrokerEgress closes once.
  return { link, close: () => egress.close() };
}
