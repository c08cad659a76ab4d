import { describe, expect, it } from "vitest";
import { Redactor } from "../../src/secrets/redact.js";
import { MAX_HELD, TerminalStream } from "../../src/server/terminal-stream.js";
import { visible } from "../../src/text/visible.js";

const SECRET = "Zq7-value-of-the-secret-42";
const redactor = () => {
  const r = new Redactor();
  r.add(SECRET);
  return r;
};
const streamOf = (r: Redactor) => new TerminalStream((s) => visible(r.text(s)), (s) => r.unfinished(s));

/** The text fed in the given pieces, and what the browser would get. */
function through(pieces: string[], r = redactor()): string {
  const st = streamOf(r);
  return pieces.map((p) => st.push(p)).join("") + st.end();
}

describe("the web terminal's stream: redaction across chunk boundaries", () => {
  const text = `before \u001b[1m${SECRET}\u001b[0m after ${Buffer.from(SECRET).toString("base64")} ghp_${"A".repeat(36)} Bearer abcdefghijklmnop end\r\n`;

  it("a secret split at every point between two chunks never shows, and nothing else is lost", () => {
    const whole = through([text]);
    expect(whole).not.toContain(SECRET);
    for (let i = 1; i < text.length; i++) {
      const out = through([text.slice(0, i), text.slice(i)]);
      expect(out, `split at ${i}`).toBe(whole);
    }
  });

  it("a secret, its base64, a token's shape and a bearer value printed one character at a time never show", () => {
    const out = through([...text]);
    expect(out).toBe(through([text]));
    for (const leak of [SECRET, Buffer.from(SECRET).toString("base64"), `ghp_${"A".repeat(36)}`, "abcdefghijklmnop"]) expect(out).not.toContain(leak);
    expect(out.match(/\[REDACTED\]/g)?.length).toBe(4);
  });

  it("a spelling that overlaps a longer unfinished one is held whole (the cut never falls inside a whole secret)", () => {
    const r = new Redactor();
    r.add("abcdef1234");
    r.add("1234zzzzzz");
    const out = through(["xx abcdef1234", "zz", " end"], r);
    expect(out).not.toContain("abcdef1234");
    expect(out).not.toContain("1234zz");
  });

  it("ordinary output and typed characters are not held: only what could still become a secret waits", () => {
    const st = streamOf(redactor());
    expect(st.push("ls -l\r\n")).toBe("ls -l\r\n");
    expect(st.push("$ ")).toBe("$ ");
    expect(st.push("l")).toBe("l");
    // The secret's first characters wait for the next ones, then go when they are not the secret.
    expect(st.push("Zq7")).toBe("");
    expect(st.push("x")).toBe("Zq7x");
  });

  it("what is held is bounded: an endless credential-shaped run is sent, redacted as it stands, past the bound", () => {
    const st = streamOf(redactor());
    let out = "";
    for (let i = 0; i < 3000; i++) out += st.push("sk-" + "a".repeat(7));
    expect(st.held).toBeLessThanOrEqual(MAX_HELD);
    expect(out.length).toBeGreaterThan(0);
    expect(out).not.toMatch(/sk-a{20}/);
  });

  it("bidi and invisible characters between escapes are neutralised; the escapes themselves are kept for the emulator", () => {
    const out = through(["\u001b[31mred\u202e txt\u200b\u001b[0m"]);
    expect(out).toBe("\u001b[31mred\\u{202e} txt\\u{200b}\u001b[0m");
  });
});
