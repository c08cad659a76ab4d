/**
 * Every way a quoting host may write a secret's value, character by character, so that any mix of encoders is
 * followed (one encoder's set of escaped characters is not another's: Python's quote leaves `/`, Go's PathEscape
 * `+`, html/template writes `&#43;`). Each character may be: its bytes as they went in the header (latin1) or in
 * UTF-8, each byte as it is or percent-encoded (either case of hex); `+` for a space; an HTML character reference
 * (decimal or hexadecimal, either case, up to four leading zeros) or a named one for ASCII punctuation; a JSON or
 * JavaScript escape (`\uXXXX`, surrogate pairs, `\xHH`, `\"`, `\/`, `\n`…). Besides (encodedForms): the value
 * as it went in another case (a host that upper-cases what it quotes), and in base64, standard or URL-safe, at
 * each of the three alignments it may have in a longer encoded text. Not followed: escapes in another case than
 * the value's own (a case-blind pattern of every spelling costs ten times as much: 75-140 ms a search for a value
 * full of punctuation), other re-encodings (hex, base64 wrapped across lines), a value cut into pieces.
 *
 * A form is a pattern (to find matches) and the same description as segments (to tell whether the end of what
 * has arrived could still become a match: a replacer holds back only that).
 */

/** The texts (latin1: a byte a character) one place of a character's spelling may hold; "" where it may be left out. */
type Segment = readonly string[];
/** One spelling of a character: its places, in order. */
type Spelling = readonly Segment[];

/** HTML's named references for ASCII punctuation (HTML5), by character. */
const NAMED: Record<string, readonly string[]> = {
  "!": ["excl"], '"': ["quot", "QUOT"], "#": ["num"], $: ["dollar"], "%": ["percnt"], "&": ["amp", "AMP"], "'": ["apos"],
  "(": ["lpar"], ")": ["rpar"], "*": ["ast", "midast"], "+": ["plus"], ",": ["comma"], ".": ["period"], "/": ["sol"],
  ":": ["colon"], ";": ["semi"], "<": ["lt", "LT"], "=": ["equals"], ">": ["gt", "GT"], "?": ["quest"], "@": ["commat"],
  "[": ["lsqb", "lbrack"], "\\": ["bsol"], "]": ["rsqb", "rbrack"], "^": ["Hat"], _: ["lowbar", "UnderBar"], "`": ["grave", "DiacriticalGrave"],
  "{": ["lcub", "lbrace"], "|": ["verbar", "vert", "VerticalLine"], "}": ["rcub", "rbrace"],
};
/** JSON's and JavaScript's short escapes, by character. */
const SHORT: Record<string, string> = { '"': '\\"', "\\": "\\\\", "/": "\\/", "'": "\\'", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

const text = (t: string): Segment[] => [[t]];
/** A number's hexadecimal digits, each in either case. */
const hex = (n: number, width = 0): Segment[] => [...n.toString(16).padStart(width, "0")].map((d) => (/[a-f]/.test(d) ? [d, d.toUpperCase()] : [d]));
const ZEROS: Segment = ["0000", "000", "00", "0", ""];
const latin1 = (b: number) => String.fromCharCode(b);

/** Every spelling of one character (a code point). */
function spellings(ch: string): Spelling[] {
  const cp = ch.codePointAt(0)!;
  const out: Spelling[] = [];
  // Its UTF-8 bytes, each as it is or percent-encoded; as it went in the header (latin1, one byte); + for a space.
  out.push([...Buffer.from(ch, "utf8")].map((b) => [latin1(b), ...pctForms(b)]));
  if (cp >= 0x80) out.push([[latin1(cp & 0xff)]]);
  if (cp === 0x20) out.push(text("+"));
  out.push([["&#"], ZEROS, ...text(String(cp)), [";"]]);
  out.push([["&#"], ["x", "X"], ZEROS, ...hex(cp), [";"]]);
  for (const n of NAMED[ch] ?? []) out.push(text(`&${n};`));
  const units = ch.length === 1 ? [cp] : [ch.charCodeAt(0), ch.charCodeAt(1)];
  out.push(units.flatMap((u) => [["\\"], ["u", "U"], ...hex(u, 4)]));
  if (cp < 0x100) out.push([["\\"], ["x", "X"], ...hex(cp, 2)]);
  if (SHORT[ch]) out.push(text(SHORT[ch]));
  return out;
}

function pctForms(b: number): string[] {
  const h = b.toString(16).padStart(2, "0");
  return [...new Set([h, h.toUpperCase(), `${h[0]}${h[1]!.toUpperCase()}`, `${h[0]!.toUpperCase()}${h[1]}`])].map((x) => `%${x}`);
}

const escapeByte = (c: string) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`;
/** A segment as a pattern: its texts, longest first (an escape is taken whole, never as the raw character it starts with). */
const segmentRe = (s: Segment) => `(?:${[...s].sort((a, b) => b.length - a.length).map((t) => [...t].map(escapeByte).join("")).join("|")})`;
const longestOf = (sp: Spelling) => sp.reduce((n, s) => n + Math.max(...s.map((t) => t.length)), 0);

export interface ValueForms {
  /** Global: finds the value in any spelling, over an answer's bytes read as latin1. */
  find: RegExp;
  /** Where the forms are fixed texts: searched natively (Buffer.indexOf), each, instead of by find. */
  literals?: readonly Buffer[];
  /** The bytes a match can start with, looked for natively before the pattern runs. */
  starts: number[];
  /** The longest text a match can be. */
  longest: number;
  /** Whether tail (latin1) could be the beginning of a longer match: then it must wait for more of the answer. */
  couldGrow(tail: string): boolean;
}

export function valueForms(value: string): ValueForms {
  const chars = [...value].map((ch) => {
    const sp = spellings(ch);
    // Longer spellings first, and the raw bytes last: an escape that starts with the raw character is tried whole first.
    const ordered = [...sp.slice(1)].sort((a, b) => longestOf(b) - longestOf(a));
    return { spellings: sp, re: `(?:${[...ordered, sp[0]!].map((s) => s.map(segmentRe).join("")).join("|")})`, longest: Math.max(...sp.map(longestOf)) };
  });
  const starts = new Set<number>();
  for (const sp of chars[0]!.spellings) for (const t of sp[0]!) if (t) starts.add(t.charCodeAt(0));
  const all = chars.map((c) => c.spellings);
  return {
    find: new RegExp(chars.map((c) => c.re).join(""), "g"),
    starts: [...starts],
    longest: chars.reduce((n, c) => n + c.longest, 0),
    couldGrow: (tail) => grows(all, 0, undefined, 0, tail),
  };
}

/** A base64 text shorter than this is not searched for: it would be found by chance in other base64. */
const MIN_ENCODED = 12;

/**
 * The value in another case, as it went; and in base64, as a host that encodes what it quotes writes it (a JSON of the request base64-encoded, a
 * token echoed in a JWT-like blob): for each alignment the value may have in a longer encoded text (0, 1 or 2
 * bytes before it, mod 3), the characters that depend on the value's bytes alone, standard and URL-safe. The
 * few bits that share a character with a neighbour's are not found: at most two bytes' worth at each end.
 */
export function encodedForms(value: string): ValueForms[] {
  const out: ValueForms[] = [];
  if (/^[\x00-\x7f]+$/.test(value) && value.toLowerCase() !== value.toUpperCase()) {
    const lower = value.toLowerCase();
    const starts = [...new Set([lower[0]!, value[0]!.toUpperCase(), value[0]!])].filter((c) => c.length === 1 && c.charCodeAt(0) < 256).map((c) => c.charCodeAt(0));
    out.push({
      find: new RegExp([...value].map(escapeByte).join(""), "gi"),
      starts,
      longest: value.length,
      couldGrow: (tail) => tail.length < value.length && lower.startsWith(tail.toLowerCase()),
    });
  }
  const texts = new Set<string>();
  for (const bytes of new Set([Buffer.from(value, "latin1").toString("latin1"), Buffer.from(value, "utf8").toString("latin1")])) {
    const b = Buffer.from(bytes, "latin1");
    for (let k = 0; k < 3; k++) {
      const full = Buffer.concat([Buffer.alloc(k), b]).toString("base64");
      const core = full.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + b.length)) / 6));
      if (core.length < MIN_ENCODED) continue;
      texts.add(core);
      texts.add(core.replace(/\+/g, "-").replace(/\//g, "_"));
    }
  }
  // One form for them all: each form is a search of the whole answer, and fixed texts are searched natively.
  const all = [...texts].sort((a, b) => b.length - a.length);
  if (all.length)
    out.push({
      find: new RegExp(all.map((t) => [...t].map(escapeByte).join("")).join("|"), "g"),
      literals: all.map((t) => Buffer.from(t, "latin1")),
      starts: [...new Set(all.map((t) => t.charCodeAt(0)))],
      longest: all[0]!.length,
      couldGrow: (tail) => all.some((t) => tail.length < t.length && t.startsWith(tail)),
    });
  return out;
}

/**
 * Whether t is the beginning of a match longer than t: from character i, in spelling sp (none: any of i's) at
 * segment s. A search over the spellings that agree with t so far; t is at most a match's length.
 */
function grows(chars: readonly (readonly Spelling[])[], i: number, sp: Spelling | undefined, s: number, t: string): boolean {
  if (sp === undefined) {
    if (i === chars.length) return false; // the value is whole: nothing longer
    if (t === "") return true;
    return chars[i]!.some((x) => grows(chars, i, x, 0, t));
  }
  if (s === sp.length) return grows(chars, i + 1, undefined, 0, t);
  if (t === "") return true; // in the middle of a character's spelling
  for (const o of sp[s]!) {
    if (o.length > t.length && o.startsWith(t)) return true;
    if (t.startsWith(o) && grows(chars, i, sp, s + 1, t.slice(o.length))) return true;
  }
  return false;
}
