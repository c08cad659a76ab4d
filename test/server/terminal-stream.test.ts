import { describe, expect, it } from "vitest";
import { Redactor } from "../../src/secrets/redact.js";
import { MAX_HELD, project, TerminalStream } from "../../src/server/terminal-stream.js";
import { visible } from "../../src/text/visible.js";

const SECRET = "Zq7-value-of-the-secret-42";
const redactor = () => {
  const r = new Redactor();
  r.add(SECRET);
  return r;
};
const streamOf = (r: Redactor) => new TerminalStream((s) => visible(r.text(s)), r);

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
      // What is printed is the same wherever the cut fell (a line with a secret keeps only its colours).
      expect(project(out).text, `split at ${i}`).toBe(project(whole).text);
      expect(out, `split at ${i}`).not.toContain(SECRET);
    }
  });

  it("a secret, its base64, a token's shape and a bearer value printed one character at a time never show", () => {
    const out = through([...text]);
    expect(project(out).text).toBe(project(through([text])).text);
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

  describe("a secret split by what the emulator does not print", () => {
    const b64 = Buffer.from(SECRET).toString("base64");
    const cases: Array<[string, string]> = [
      ["an SGR escape inside it", `a ${SECRET.slice(0, 7)}\u001b[1m${SECRET.slice(7)}\u001b[0m b\r\n`],
      ["an escape per character", `a ${[...SECRET].join("\u001b[0m")} b\r\n`],
      ["a bell and a backspace-free control", `a ${SECRET.slice(0, 5)}\u0007${SECRET.slice(5, 9)}\u0000${SECRET.slice(9)} b\n`],
      ["an OSC title sequence", `a ${SECRET.slice(0, 9)}\u001b]0;title\u0007${SECRET.slice(9)} b\n`],
      ["a C1 CSI", `a ${SECRET.slice(0, 9)}\u009b1m${SECRET.slice(9)} b\n`],
      ["a line break", `a ${SECRET.slice(0, 10)}\r\n${SECRET.slice(10)} b\r\n`],
      ["a line break per character", `${[...SECRET].join("\r\n")}\r\n`],
      ["a line break and colours, its base64", `x ${b64.slice(0, 12)}\u001b[32m\r\n${b64.slice(12)}\u001b[0m\r\n`],
      ["a bearer value cut by an escape", `Authorization: Bearer abcd\u001b[1mefghijklmnop\u001b[0m\r\n`],
      ["a token shape cut by an escape", `ghp_${"A".repeat(20)}\u001b[K${"A".repeat(16)}\r\n`],
    ];
    const leaks = [SECRET, b64, "abcdefghijklmnop", `ghp_${"A".repeat(36)}`];
    for (const [name, text] of cases) {
      it(`${name}: never printed, whole or in any two pieces or a character at a time`, () => {
        const printed = (out: string) => project(out).text.replace(/\n/g, "");
        const whole = through([text]);
        for (const leak of leaks) expect(printed(whole)).not.toContain(leak);
        expect(whole).toContain("[REDACTED]");
        for (let i = 1; i < text.length; i++) {
          const out = through([text.slice(0, i), text.slice(i)]);
          for (const leak of leaks) expect(printed(out), `split at ${i}`).not.toContain(leak);
          expect(project(out).text, `split at ${i}`).toBe(project(whole).text);
        }
        const slow = through([...text]);
        for (const leak of leaks) expect(printed(slow)).not.toContain(leak);
      });
    }

    it("a line with a secret keeps its colour changes after it; lines without one keep every escape", () => {
      const out = through([`\u001b[31mred ${SECRET.slice(0, 4)}\u001b[1m${SECRET.slice(4)}\r\n\u001b[2Kplain \u001b[0mline\r\n`]);
      expect(out).toBe(`red [REDACTED]\u001b[31m\u001b[1m\r\n\u001b[2Kplain \u001b[0mline\r\n`);
    });

    it("an escape still being written is held until it ends, then passed whole", () => {
      const st = streamOf(redactor());
      expect(st.push("ok \u001b[3")).toBe("ok ");
      expect(st.push("1mred")).toBe("\u001b[31mred");
    });

    it("lines that end in a known secret's first characters wait for the next line, then go", () => {
      const st = streamOf(redactor());
      expect(st.push("one\r\ntwo Zq7\r\n")).toBe("one\r\ntwo ");
      expect(st.push("three\r\n")).toBe("Zq7\r\nthree\r\n");
    });
  });
});
