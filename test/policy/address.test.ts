import { describe, expect, it } from "vitest";
import { canonicalHost, classify, hostText, parseAuthority } from "../../src/policy/address.js";

describe("canonical hosts", () => {
  it.each([
    ["Example.COM", "example.com"],
    ["example.com.", "example.com"],
    ["127.0.0.1", "127.0.0.1"],
    ["127.1", "127.0.0.1"],
    ["127.0.1", "127.0.0.1"],
    ["2130706433", "127.0.0.1"],
    ["0x7f000001", "127.0.0.1"],
    ["0x7f.1", "127.0.0.1"],
    ["0177.0.0.1", "127.0.0.1"],
    ["0177.0.0.01", "127.0.0.1"],
    ["017700000001", "127.0.0.1"],
    ["169.254.169.254", "169.254.169.254"],
    ["0xa9fea9fe", "169.254.169.254"],
    ["2852039166", "169.254.169.254"],
    ["[::1]", "[::1]"],
    ["[::ffff:127.0.0.1]", "127.0.0.1"],
    ["[::ffff:7f00:1]", "127.0.0.1"],
    ["[0:0:0:0:0:ffff:a9fe:a9fe]", "169.254.169.254"],
    ["[::127.0.0.1]", "127.0.0.1"],
    ["[FD00:EC2::254]", "[fd00:ec2::254]"],
    ["[2001:DB8:0:0::1]", "[2001:db8::1]"],
    // The unspecified addresses reach loopback, so they are spelled as loopback.
    ["0.0.0.0", "127.0.0.1"],
    ["0", "127.0.0.1"],
    ["0x0", "127.0.0.1"],
    ["00.0.0.0", "127.0.0.1"],
    ["0.0", "127.0.0.1"],
    ["0.0.0", "127.0.0.1"],
    ["0x0.0x0.0x0.0x0", "127.0.0.1"],
    ["[::]", "[::1]"],
    ["[0:0:0:0:0:0:0:0]", "[::1]"],
    ["[::0]", "[::1]"],
    ["[::ffff:0.0.0.0]", "127.0.0.1"],
    ["[::ffff:0:0]", "127.0.0.1"],
    ["[0:0:0:0:0:ffff:0000:0000]", "127.0.0.1"],
  ])("%s → %s", (raw, canonical) => {
    expect(hostText(canonicalHost(raw))).toBe(canonical);
  });

  it.each([
    ["NUL", "exa\0mple.com"],
    ["CR/LF", "example.com\r\nHost: evil"],
    ["a space", "exa mple.com"],
    ["userinfo", "user@example.com"],
    ["a zone id", "[fe80::1%eth0]"],
    ["a percent-encoded name", "ex%61mple.com"],
    ["an over-long name", `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(63)}.com`],
    ["an over-long label", `${"a".repeat(64)}.com`],
    ["an empty label", "a..b"],
    ["two trailing dots", "example.com.."],
    ["an out-of-range IPv4 part", "256.0.0.1"],
    ["a numeric last label that is no address", "example.123456789012"],
    ["an unterminated IPv6 literal", "[::1"],
    ["an underscore-only oddity with a slash", "a/b"],
  ])("refuses %s", (_t, raw) => {
    expect(() => canonicalHost(raw)).toThrow();
  });
});

describe("authorities", () => {
  it.each([
    ["example.com:8080", undefined, "example.com", 8080],
    ["example.com", 443, "example.com", 443],
    ["[::1]:3000", undefined, "[::1]", 3000],
    ["127.1:80", undefined, "127.0.0.1", 80],
  ] as const)("%s", (auth, def, host, port) => {
    const a = parseAuthority(auth, def);
    expect(hostText(a.host)).toBe(host);
    expect(a.port).toBe(port);
  });

  it.each(["example.com:0", "example.com:65536", "example.com:80x", "::1:80", "example.com"])("refuses %s without a default port or with a bad one", (auth) => {
    expect(() => parseAuthority(auth)).toThrow();
  });
});

describe("address classes", () => {
  it.each([
    ["93.184.216.34", "public"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["10.1.2.3", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "cgnat"],
    ["169.254.1.1", "link-local"],
    ["169.254.169.254", "metadata"],
    ["fd00:ec2::254", "metadata"],
    ["0.0.0.0", "loopback"],
    ["::", "loopback"],
    ["0:0:0:0:0:0:0:0", "loopback"],
    ["::ffff:0.0.0.0", "loopback"],
    ["0.1.2.3", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["192.0.2.1", "documentation"],
    ["2001:db8::1", "documentation"],
    ["::1", "loopback"],
    ["fe80::1", "link-local"],
    ["fc00::1", "unique-local"],
    ["2002:7f00:1::", "loopback"],
    ["64:ff9b::a9fe:a9fe", "metadata"],
    ["64:ff9b:1::a9fe:a9fe", "reserved"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:0:7f00:1", "loopback"],
    ["::ffff:0:a9fe:a9fe", "metadata"],
    ["2606:4700::1111", "public"],
  ])("%s is %s", (ip, cls) => {
    expect(classify(ip)).toBe(cls);
  });

  it("the host's own addresses are refused like private ones", () => {
    expect(classify("203.0.114.9", new Set(["203.0.114.9"]))).toBe("host-interface");
  });
});
