import { describe, expect, it } from "vitest";
import { formsOf, type Injected, Reflected, searchable, unsearchable } from "../../src/net/reflected.js";

const A: Injected = { value: "sk-live-0123456789abcdef", placeholder: "vak-placeholder-aaaaaaaaaaaaaaaaaaaaaaaa" };
const B: Injected = { value: "tok/with\"quote&<amp>+'x y", placeholder: "vak-placeholder-bbbbbbbbbbbbbbbbbbbbbbbb" };

/** The replacer's output for input cut at the given offsets. */
function through(secrets: readonly Injected[], input: Buffer, cuts: number[]): { out: Buffer; count: number } {
  const r = new Reflected(secrets);
  const parts: Buffer[] = [];
  let from = 0;
  for (const c of [...cuts, input.length]) {
    parts.push(r.push(input.subarray(from, c)));
    from = c;
  }
  parts.push(r.end());
  return { out: Buffer.concat(parts), count: r.count };
}

describe("the reflected-secret replacer", () => {
  it("replaces a value with its placeholder", () => {
    const { out, count } = through([A], Buffer.from(`{"auth":"Bearer ${A.value}"}`), []);
    expect(out.toString()).toBe(`{"auth":"Bearer ${A.placeholder}"}`);
    expect(count).toBe(1);
  });

  it("a value cut at every position, in two pieces and in single bytes, never passes", () => {
    const input = Buffer.from(`x${A.value}y${A.value}${A.value}z`);
    const whole = through([A], input, []).out.toString();
    expect(whole).toBe(`x${A.placeholder}y${A.placeholder}${A.placeholder}z`);
    for (let i = 0; i <= input.length; i++) {
      const { out, count } = through([A], input, [i]);
      expect(out.toString()).toBe(whole);
      expect(count).toBe(3);
    }
    for (let i = 0; i < input.length; i++)
      for (let j = i; j <= input.length; j++) expect(through([A], input, [i, j]).out.toString()).toBe(whole);
    const bytes = Array.from({ length: input.length }, (_, i) => i);
    expect(through([A], input, bytes).out.toString()).toBe(whole);
  });

  it("holds back only an end that could still become a match, and never more than the longest match less one byte", () => {
    const r = new Reflected([A]);
    const longest = Math.max(...formsOf([A]).map((f) => f.longest));
    // Nothing that could start the value: nothing held.
    expect(r.push(Buffer.from("q".repeat(1000))).length).toBe(1000);
    // The value but its last character, in one spelling then another: held, whole, until it is decided.
    for (const start of [A.value.slice(0, -1), encodeURIComponent(A.value).slice(0, -1), `&#x${A.value.charCodeAt(0).toString(16)}`]) {
      expect(r.push(Buffer.from(`x ${start}`)).toString()).toBe("x ");
      expect(r.push(Buffer.from("!")).toString()).toBe(`${start}!`);
    }
    // However long an end could grow, at most the longest match less one byte waits.
    let held = 0;
    for (let i = 0; i < 1000; i++) held += 1 - r.push(Buffer.from("%")).length;
    expect(held).toBeLessThanOrEqual(longest - 1);
    expect(r.end().length).toBe(held);
  });

  it("several secrets in one answer, each becomes its own placeholder, at every cut", () => {
    const input = Buffer.from(`${B.value}:${A.value}|${B.value}${A.value}`);
    const expected = `${B.placeholder}:${A.placeholder}|${B.placeholder}${A.placeholder}`;
    for (let i = 0; i <= input.length; i++) expect(through([A, B], input, [i]).out.toString()).toBe(expected);
  });

  it("values with a common prefix: the longer one is replaced whole, wherever the cut", () => {
    const short: Injected = { value: "prefix-secret-1", placeholder: "vak-placeholder-short" };
    const long: Injected = { value: "prefix-secret-1-and-more", placeholder: "vak-placeholder-long" };
    const input = Buffer.from(`a ${long.value} b ${short.value} c ${short.value}-and-mor`);
    const expected = `a ${long.placeholder} b ${short.placeholder} c ${short.placeholder}-and-mor`;
    for (let i = 0; i <= input.length; i++) expect(through([short, long], input, [i]).out.toString()).toBe(expected);
  });

  it("overlapping occurrences of a value that overlaps itself: none passes", () => {
    const s: Injected = { value: "abab", placeholder: "P" };
    const input = Buffer.from("ababab abab");
    for (let i = 0; i <= input.length; i++) {
      const out = through([s], input, [i]).out.toString();
      expect(out).toBe("Pab P");
      expect(out).not.toContain("abab");
    }
  });

  it("the value's JSON-escaped, URL-encoded and HTML-escaped forms are replaced too", () => {
    const json = JSON.stringify({ h: B.value });
    const url = `https://x/?t=${encodeURIComponent(B.value)}`;
    const urlLower = url.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());
    const html = B.value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
    const php = JSON.stringify(B.value).replace(/\//g, "\\/");
    const go = JSON.stringify(B.value).replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
    for (const text of [json, url, urlLower, html, php, go]) {
      const { out, count } = through([B], Buffer.from(text), []);
      expect(count, text).toBe(1);
      expect(out.toString(), text).not.toContain("tok");
    }
    expect(through([B], Buffer.from(json), []).out.toString()).toBe(JSON.stringify({ h: B.placeholder }));
  });

  it("the value in another case, and in base64 (standard and URL-safe) at every alignment in a longer encoded text, is replaced, at every cut; what is left decodes to no more than two bytes of it at each end", () => {
    const texts = [A.value.toUpperCase(), `x${A.value.toLowerCase().replace("live", "LIVE")}y`];
    for (const before of ["", "a", "ab", '{"headers":{"Authorization":"Bearer '])
      for (const url of [false, true]) {
        const b64 = Buffer.from(`${before}${A.value}", "more": 1}`).toString(url ? "base64url" : "base64");
        texts.push(`{"blob":"${b64}"}`);
      }
    for (const text of texts) {
      const input = Buffer.from(text);
      const whole = through([A], input, []);
      expect(whole.count, text).toBe(1);
      for (let i = 0; i <= input.length; i++) expect(through([A], input, [i]).out.toString(), `${text} cut at ${i}`).toBe(whole.out.toString());
      // The replaced text, decoded where it is base64, holds no run of the value longer than 4 bytes... of its 24.
      const left = whole.out.toString().replace(A.placeholder, " ");
      // Each piece around the placeholder decoded from each of its first four characters: however it is aligned.
      const pieces = /"blob":"([^"]*)"/.exec(left)?.[1]?.split(" ");
      const decoded = pieces ? pieces.flatMap((p) => [0, 1, 2, 3].map((o) => Buffer.from(p.slice(o), "base64").toString("latin1"))).join(" ") : left;
      for (let k = 0; k + 5 <= A.value.length; k++) expect(decoded.toLowerCase(), text).not.toContain(A.value.slice(k, k + 5).toLowerCase());
    }
    // A short value in base64 is not searched (it would be found by chance).
    expect(formsOf([{ value: "abcdefgh", placeholder: "p" }])).toHaveLength(2);
  });

  it("any encoder's choice of escaped characters, and a mix of them, is followed character by character, at every cut", () => {
    const K: Injected = { value: "AKIA/x+y=z!'()*~ é€😀&<>\"\\", placeholder: "vak-placeholder-kkkkkkkkkkkkkkkkkkkkkkkk" };
    const pct = (s: string) => [...Buffer.from(s, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
    const forms = [
      // Python's quote (`/` left), Go's PathEscape and QueryEscape, PHP's rawurlencode: each its own set.
      encodeURIComponent(K.value).replace(/%2F/g, "/"),
      encodeURIComponent(K.value).replace(/%2B/g, "+").replace(/%3D/g, "="),
      encodeURIComponent(K.value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16)}`).replace(/%20/g, "+"),
      // Every byte percent-encoded, lower-case hex; a mix of raw and encoded, character by character.
      pct(K.value),
      [...K.value].map((c, i) => (i % 2 ? pct(c) : c)).join(""),
      // HTML: decimal and hexadecimal references with leading zeros, named ones, Go's html/template.
      [...K.value].map((c) => `&#${c.codePointAt(0)};`).join(""),
      [...K.value].map((c) => `&#X00${c.codePointAt(0)!.toString(16).toUpperCase()};`).join(""),
      K.value.replace(/\//g, "&sol;").replace(/\+/g, "&plus;").replace(/=/g, "&equals;").replace(/&(?!\w+;)/g, "&amp;").replace(/</g, "&lt;"),
      K.value.replace(/&/g, "&amp;").replace(/\+/g, "&#43;").replace(/"/g, "&#34;").replace(/'/g, "&#39;").replace(/</g, "&lt;").replace(/>/g, "&gt;"),
      // JSON and JavaScript: \u for every UTF-16 unit (surrogate pairs), \x, \/.
      K.value.split("").map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, "0")}`).join(""),
      JSON.stringify(K.value).slice(1, -1).replace(/\//g, "\\/").replace(/[<>&']/g, (c) => `\\x${c.charCodeAt(0).toString(16)}`),
    ];
    for (const text of forms) {
      const input = Buffer.from(`<a href="${text}">`, "utf8");
      const whole = through([K], input, []);
      expect(whole.count, text).toBe(1);
      expect(whole.out.toString(), text).toBe(`<a href="${K.placeholder}">`);
      for (let i = 0; i <= input.length; i += 5) expect(through([K], input, [i]).out.toString(), `${text} cut at ${i}`).toBe(whole.out.toString());
    }
  });

  it("a value with non-ASCII bytes: as it went (latin1) and in UTF-8", () => {
    const s: Injected = { value: "clé-secrète-42", placeholder: "vak-placeholder-c" };
    for (const enc of ["latin1", "utf8"] as const) expect(through([s], Buffer.from(`<${s.value}>`, enc), [5]).out.toString("latin1")).toBe(`<${s.placeholder}>`);
  });

  it("binary bodies pass unchanged when they hold no value", () => {
    const input = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) & 0xff));
    const { out, count } = through([A, B], input, [1, 65_536, 65_537]);
    expect(out.equals(input)).toBe(true);
    expect(count).toBe(0);
  });

  it("whole() replaces a head without touching what push holds", () => {
    const r = new Reflected([A]);
    const held = r.push(Buffer.from(A.value.slice(0, 5)));
    expect(r.whole(Buffer.from(`X-Echo: ${A.value}\r\n`)).toString()).toBe(`X-Echo: ${A.placeholder}\r\n`);
    expect(Buffer.concat([held, r.push(Buffer.from(A.value.slice(5))), r.end()]).toString()).toBe(A.placeholder);
    expect(r.count).toBe(2);
  });

  it("an encoded body is unsearchable; identity, or no body, is not", () => {
    expect(unsearchable([["Content-Encoding", "gzip"]], { kind: "length", length: 3 })).toMatch(/encoded \(gzip\)/);
    expect(unsearchable([], { kind: "chunked", codings: ["gzip"] })).toMatch(/gzip/);
    expect(unsearchable([["Content-Encoding", "identity"]], { kind: "close" })).toBeUndefined();
    expect(unsearchable([["Content-Encoding", "br"]], { kind: "none" })).toBeUndefined();
  });

  it("a searched request asks for identity and the whole body", () => {
    expect(searchable([["Accept-Encoding", "gzip, br"], ["Range", "bytes=0-9"], ["If-Range", "x"], ["X", "y"]])).toEqual([["X", "y"], ["Accept-Encoding", "identity"]]);
  });
});
