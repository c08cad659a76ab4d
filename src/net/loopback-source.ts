import { isIPv4 } from "node:net";

/**
 * The source address of every connection Vak makes for a sandbox (its egress gate, a component's web_fetch)
 * to an IPv4 loopback address. Without it, a sandboxed command granted `127.0.0.1:*` would reach the user's
 * local services from 127.0.0.1, the user's own address: indistinguishable from the user to a service that
 * counts or trusts by peer (`vak serve` rate-limits failed tokens per peer, so a sandbox could keep the user
 * locked out). Every address of 127.0.0.0/8 is the host's own on Linux, so this one needs no setup. An IPv6
 * loopback destination has no second address (::1/128): it is connected from ::1.
 */
export const SANDBOX_LOOPBACK_SOURCE = "127.0.0.2";

/** The localAddress to connect to address from: the sandbox's own for an IPv4 loopback address, else none. */
export function sandboxSource(address: string): { localAddress?: string } {
  return isIPv4(address) && address.startsWith("127.") ? { localAddress: SANDBOX_LOOPBACK_SOURCE } : {};
}
