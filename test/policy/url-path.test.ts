import { describe, expect, it } from "vitest";
import { canonicalPath, parsePathRule, pathWithin } from "../../src/policy/url-path.js";

describe("canonical request paths", () => {
  it.each([
    ["/", "/"],
    ["/a/b", "/a/b"],
    ["/a//b///c", "/a/b/c"],
    ["//a", "/a"],
    ["/a/./b", "/a/b"],
    ["/a/b/../c", "/a/c"],
    ["/a/../../b", "/b"],
    ["/a/b/..", "/a/"],
    ["/a/.", "/a/"],
    ["/a/", "/a/"],
    ["/%41%62c", "/Abc"],
    ["/a%3ab", "/a%3Ab"],
    ["/a%7e", "/a~"],
    ["/a?x=../y&z=%2F", "/a"],
    ["/a%3bb/..x/...", "/a%3Bb/..x/..."],
    ["/caf%c3%a9", "/caf%C3%A9"],
  ])("%s → %s", (raw, path) => {
    expect(canonicalPath(raw).path).toBe(path);
  });

  it("keeps the query as sent", () => {
    expect(canonicalPath("/a/./b?q=%2F..").query).toBe("?q=%2F..");
  });

  it.each([
    ["/a%2Fb", /encoded slash/],
    ["/a%2fb", /encoded slash/],
    ["/a%5Cb", /backslash/],
    ["/a%252e", /percent sign/],
    ["/a%00", /NUL/],
    ["/%2e%2e/x", /encoded dot/],
    ["/a/..;/b", /parameters/],
    ["/a/.;x/b", /parameters/],
    ["/a/..%3B/b", /dot segment/],
    ["/a/..%20/b", /dot segment/],
    ["/a/..%3f/b", /dot segment/],
    ["/a/%EF%BC%8E%EF%BC%8E/b", /dot segment/],
    ["/a/%E2%80%A5/b", /dot segment/],
    ["/a/%C0%AE%C0%AE/b", /not UTF-8/],
    ["/a/%C0%AF", /not UTF-8/],
    ["/a/x%EF%BC%8Fy", /slash/],
    ["/a/x%EF%B9%A8y", /slash/],
    ["/a\\b", /backslash/],
    ["/a#b", /fragment/],
    ["/a%zz", /malformed/],
    ["/a%4", /malformed/],
    ["/a b", /control/],
    ["/caf\u00e9", /non-ASCII/],
    ["a/b", /start with/],
  ])("refuses %s, which servers could read differently", (raw, message) => {
    expect(() => canonicalPath(raw)).toThrow(message);
  });

  it("a path rule covers its prefix at a segment boundary only", () => {
    const p = parsePathRule("/repos/acme/*");
    expect(p).toBe("/repos/acme");
    expect(pathWithin("/repos/acme", p)).toBe(true);
    expect(pathWithin("/repos/acme/x", p)).toBe(true);
    expect(pathWithin("/repos/acmeevil", p)).toBe(false);
    expect(pathWithin(canonicalPath("/repos/acme/../evil").path, p)).toBe(false);
    expect(parsePathRule("/repos/./acme/")).toBe("/repos/acme");
  });
});
