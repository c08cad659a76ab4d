import { type Host, hostText, parseAuthority } from "../policy/address.js";
import { type HeaderList, headerValues } from "./http1.js";

// The request head the gate sends upstream for a checked request: pure functions over what the client sent.

export /** The Host header's problem, if it has one: missing (when required), repeated in any spelling, or naming another place. */
function hostHeaderProblem(headers: HeaderList, target: { host: Host; port: number }, defaultPort: number, required: boolean): string | undefined {
  const hosts = headerValues(headers, "host");
  if (hosts.length > 1) return "more than one Host header";
  if (hosts.length === 0) return required ? "no Host header" : undefined;
  try {
    const h = parseAuthority(hosts[0]!, defaultPort);
    if (hostText(h.host) !== hostText(target.host) || h.port !== target.port)
      return `the Host header (${hosts[0]}) does not match the target (${hostText(target.host)}:${target.port})`;
  } catch (e) {
    return `bad Host header: ${(e as Error).message}`;
  }
  return undefined;
}
