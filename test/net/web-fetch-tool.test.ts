import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EgressEvent } from "../../src/net/egress-log.js";
import { parseNetGrants } from "../../src/policy/net-grants.js";
import { runWebFetch, webFetchResultText } from "../../src/net/web-fetch-tool.js";
import { htmlToText } from "../../src/net/web-text.js";
import { listenLoopback } from "../support/net.js";

describe("web_fetch: the host fetches under the component's grants", () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === "/page") return res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(
        `<!doctype html><html><head><title>A &amp; B</title><style>body{}</style><script>alert("x")</script></head>
         <body><h1>Hello</h1><p>See <a href="https://example.com/docs">the docs</a>&nbsp;now.</p><!-- hidden --><p>caf&#233; &#x1b;[31m</p></body></html>`);
      if (req.url === "/to-metadata") return res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/" }).end();
      if (req.url === "/to-meta-name") return res.writeHead(302, { location: "http://meta.test/latest/meta-data/" }).end();
      if (req.url === "/to-page") return res.writeHead(302, { location: "/page" }).end();
      if (req.url === "/binary") return res.writeHead(200, { "content-type": "application/octet-stream" }).end(Buffer.alloc(64));
      if (req.url === "/big") return res.writeHead(200, { "content-type": "text/plain" }).end("x".repeat(300_000));
      res.writeHead(404).end();
    });
    port = await listenLoopback(server);
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const cap = (grants: string[]) => {
    const events: EgressEvent[] = [];
    const calls: string[] = [];
    const hook = (address: string, p: number): Socket => {
      calls.push(`${address}:${p}`);
      if (address !== "127.0.0.1") throw new Error(`test connect hook: refusing ${address}:${p}`);
      return connect({ host: address, port: p });
    };
    return { events, calls, c: { grants: parseNetGrants(grants), component: "web", generation: 1, onEvent: (e: EgressEvent) => events.push(e), net: { connect: hook, ownAddresses: new Set<string>() } } };
  };

  it("gives back a page as text, with its final URL, and records the fetch", async () => {
    const { events, c } = cap([`read:127.0.0.1:${port}`]);
    const r = await runWebFetch({ url: `http://127.0.0.1:${port}/to-page` }, c);
    expect(r.ok).toBe(true);
    const text = webFetchResultText(r);
    expect(text).toContain(`final URL: http://127.0.0.1:${port}/page`);
    expect(text).toContain("redirected from:");
    expect(text).toContain("A & B");
    expect(text).toContain("Hello");
    expect(text).toContain("See the docs [https://example.com/docs] now.");
    expect(text).toContain("café");
    expect(text).not.toMatch(/alert|body\{\}|hidden|\u001b/);
    expect(events.filter((e) => e.decision === "allowed").map((e) => e.asked)).toEqual([`http://127.0.0.1:${port}/to-page`, `http://127.0.0.1:${port}/page`]);
  });

  it("a redirect to the metadata address, or to a granted name that resolves to it, is refused before anything connects to it", async () => {
    const { events, calls, c } = cap([`read:127.0.0.1:${port}`, "read:meta.test"]);
    const resolver = async (name: string) => (name === "meta.test" ? ["169.254.169.254"] : Promise.reject(Object.assign(new Error("not found"), { code: "ENOTFOUND" })));
    const r = await runWebFetch({ url: `http://127.0.0.1:${port}/to-metadata` }, c);
    expect(r.ok).toBe(false);
    expect(webFetchResultText(r)).toMatch(/refused GET http:\/\/169\.254\.169\.254/);
    const n = await runWebFetch({ url: `http://127.0.0.1:${port}/to-meta-name` }, { ...c, net: { ...c.net, resolver } });
    expect(n.ok).toBe(false);
    expect(webFetchResultText(n)).toContain("meta.test resolves only to 169.254.169.254 (metadata)");
    expect(calls.every((x) => x.startsWith("127.0.0.1:"))).toBe(true);
    expect(events.some((e) => e.decision === "denied" && e.asked.startsWith("http://169.254.169.254"))).toBe(true);
  });

  it("a destination outside the grants is refused, naming the grant to add", async () => {
    const { calls, c } = cap(["read:example.com"]);
    const r = await runWebFetch({ url: `http://127.0.0.1:${port}/page` }, c);
    expect(r.ok).toBe(false);
    expect(webFetchResultText(r)).toContain(`grant it with --allow-net 127.0.0.1:${port}`);
    expect(calls).toEqual([]);
  });

  it("refuses what is not text, and cuts what is too long", async () => {
    const { c } = cap([`read:127.0.0.1:${port}`]);
    const bin = await runWebFetch({ url: `http://127.0.0.1:${port}/binary` }, c);
    expect(bin.ok).toBe(false);
    expect(webFetchResultText(bin)).toContain("not text");
    const big = await runWebFetch({ url: `http://127.0.0.1:${port}/big`, maxChars: 1000 }, { ...c, maxBytes: 100_000 });
    expect(big.ok && big.truncated).toBe(true);
    expect(big.ok && big.text.length).toBeLessThan(1100);
  });
});

describe("HTML reduced to text", () => {
  it("ends on hostile markup: unclosed scripts, comments and tags, in one pass", () => {
    expect(htmlToText("<script>".repeat(50_000) + "tail")).toBe("");
    expect(htmlToText("a<!--" + "x".repeat(100_000))).toBe("a");
    expect(htmlToText("<a href='x'>".repeat(20_000) + "t")).toContain("t");
    expect(htmlToText("ok <b")).toBe("ok");
  });

  it("drops links that would run code and characters that hide text", () => {
    expect(htmlToText(`<a href="javascript:alert(1)">click</a>`)).toBe("click");
    expect(htmlToText("a\u202eb\u200bc&#8238;d")).toBe("a b c d");
  });

  it("words in characters a person cannot see (tag characters, soft hyphens, joiners, fillers, separators) do not reach the model", () => {
    // Tag characters spell ASCII invisibly ("ASCII smuggling"); each is one of the neutraliser's characters, raw or as an entity.
    const smuggled = [..."IGNORE"].map((c) => String.fromCodePoint(0xe0000 + c.charCodeAt(0))).join("");
    expect(htmlToText(`a${smuggled}b\u00adc\u2060d\u3164e\u2028f&#xE0049;&#xE0047;g\ufeffh`)).toBe("a b c d e f g h");
  });
});
