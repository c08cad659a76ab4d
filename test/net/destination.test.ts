import { describe, expect, it } from "vitest";
import { canonicalHost } from "../../src/policy/address.js";
import { resolveDestination } from "../../src/net/destination.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";

// A name the host resolves to an unspecified address reaches loopback when connected to.
describe("resolved addresses are judged by what a connect to them reaches", () => {
  const resolve = (answers: string[], allow: string[], deny: string[] = []) =>
    resolveDestination(canonicalHost("name.test"), 8080, parseNetGrants(allow, deny), async () => answers, new Set(), "GET");

  it.each([["0.0.0.0"], ["::"], ["::ffff:0.0.0.0"], ["0:0:0:0:0:0:0:0"]])("a name resolving to %s is refused as loopback", async (answer) => {
    const r = await resolve([answer], ["name.test:8080"]);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain("(loopback)");
  });

  it("a deny rule on 127.0.0.1 covers a name resolving to 0.0.0.0, even with a literal grant of 0.0.0.0", async () => {
    const r = await resolve(["0.0.0.0"], ["name.test:8080", "0.0.0.0:8080"], ["127.0.0.1"]);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain("denied by --deny-net 127.0.0.1");
  });
});
