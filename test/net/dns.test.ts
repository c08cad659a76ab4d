import { createSocket } from "node:dgram";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dnsResolver, hostsFileAddresses } from "../../src/net/dns.js";
import { until } from "../support/net.js";

describe("name lookup", () => {
  it("reads a hosts file as glibc does: every matching line, any case, comments ignored", () => {
    const hosts = "127.0.0.1 localhost\n11.0.0.2 Granted.Test alias.test # the server\n::1 granted.test\n#11.0.0.9 granted.test\n";
    expect(hostsFileAddresses(hosts, "granted.test")).toEqual(["11.0.0.2", "::1"]);
    expect(hostsFileAddresses(hosts, "alias.test")).toEqual(["11.0.0.2"]);
    expect(hostsFileAddresses(hosts, "other.test")).toEqual([]);
  });

  describe("with a DNS server that never answers", () => {
    let dir: string;
    const queries: Buffer[] = [];
    const blackhole = createSocket("udp4");
    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "vak-dns-"));
      writeFileSync(join(dir, "hosts"), "127.0.0.1 listed.test\n");
      blackhole.on("message", (m) => queries.push(m));
      await new Promise<void>((r) => blackhole.bind(0, "127.0.0.1", () => r()));
    });
    afterAll(() => {
      blackhole.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("lookups of names it holds up neither stall other lookups nor outlive their deadline", async () => {
      const resolve = dnsResolver({ hostsFile: join(dir, "hosts"), servers: [`127.0.0.1:${blackhole.address().port}`], timeoutMs: 1500 });
      let settled = 0;
      const stuck = Array.from({ length: 8 }, (_, i) => resolve(`x${i}.slow.test`).finally(() => (settled += 1)));
      await until(() => queries.length >= 8, "the eight queries reach the server");
      // getaddrinfo would queue this behind the stuck lookups on Node's four threads.
      expect(await resolve("listed.test")).toEqual(["127.0.0.1"]);
      expect(settled).toBe(0);
      for (const r of await Promise.allSettled(stuck)) expect((r as PromiseRejectedResult).reason).toMatchObject({ code: "ETIMEOUT" });
    });
  });
});
