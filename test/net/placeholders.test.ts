import { describe, expect, it } from "vitest";
import { canonicalHost } from "../../src/policy/address.js";
import { carries } from "../../src/net/placeholders.js";

describe("carries: where the gate may put a secret's value", () => {
  const api = canonicalHost("api.example.com");
  it.each([
    // hosts, host, port, tls, address, expected
    [["api.example.com"], api, 443, true, "93.184.216.34", true],
    [["api.example.com"], api, 8443, true, "93.184.216.34", true],
    [["api.example.com"], api, 80, false, "93.184.216.34", false],
    [["api.example.com"], api, 8080, false, "10.0.0.7", false],
    [["api.example.com:80"], api, 80, false, "93.184.216.34", true],
    [["api.example.com:8080"], api, 80, false, "93.184.216.34", false],
    [["api.example.com"], api, 80, false, "127.0.0.1", true],
    [["api.example.com"], api, 80, false, "::1", true],
    [["api.example.com"], api, 80, false, "::ffff:127.0.0.1", true],
    [["api.example.com"], api, 80, false, "127.9.9.9", true],
    // Addresses that name a loopback one but are reached across a network (6to4, NAT64).
    [["api.example.com"], api, 80, false, "2002:7f00:1::1", false],
    [["api.example.com"], api, 80, false, "64:ff9b::7f00:1", false],
    [["other.example.com"], api, 443, true, "93.184.216.34", false],
    [["API.example.com:80"], api, 80, false, "93.184.216.34", true],
  ] as const)("%j to %o:%i (tls %s, %s) → %s", (hosts, host, port, tls, address, expected) => {
    expect(carries(hosts, host, port, { tls, address })).toBe(expected);
  });
});
