/**
 * Redaction: applied to everything the host writes or shows (the journal,
 * tool results for the model, error messages). It covers the values of known
 * secrets in their raw, base64, base64url, hex and URL-encoded forms, and the
 * shapes of common credentials even when their values are unknown.
 */
export const REDACTED = "[REDACTED]";

/** Credential shapes worth hiding wherever they appear. */
const SHAPES: RegExp[] = [
  /\bsk-(?:proj-|ant-(?:api|admin)\d{2}-)?[A-Za-z0-9_-]{20,}/g, // OpenAI, Anthropic
  /\bgh[pousr]_[A-Za-z0-9]{30,}\b/g, // GitHub tokens
  /\bgithub_pat_[A-Za-z0-9_]{40,}\b/g,
  /\bglpat-[A-Za-z0-9_-]{20,}\b/g, // GitLab
  /\bxox[abprs]-[A-Za-z0-9-]{10,}\b/g, // Slack
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, // AWS access key ids
  /\bAIza[0-9A-Za-z_-]{35}\b/g, // Google API keys
  /\bnpm_[A-Za-z0-9]{36}\b/g,
  /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, // JWTs
];
/** Credentials that follow a keyword: keep the keyword, hide the value. */
const AFTER: RegExp[] = [
  /(\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi,
  /(\bBasic\s+)[A-Za-z0-9+/=]{8,}/gi,
  // A reference to a secret (env:NAME, secret:NAME, cmd:NAME, as --secret NAME=REF[@HOST] and the plan write it) is not a value: left alone.
  /((?:authorization|x-api-key|api[-_]?key|proxy-authorization)["']?\s*[:=]\s*["']?)(?!(?:env|secret|cmd):[A-Za-z_][A-Za-z0-9_.-]*(?:[\s"',;@)]|$))[^\s"',;]{8,}/gi,
  // So is "secret:NAME" with nothing between, and GITHUB_TOKEN=env:GITHUB_TOKEN.
  /((?:password|passwd|secret|token)["']?\s*(?:=\s*|:\s+|:(?=["']))["']?)(?!(?:env|secret|cmd):[A-Za-z_][A-Za-z0-9_.-]*(?:[\s"',;@)]|$))[^\s"',;]{6,}/gi,
  /(:\/\/[^/\s:@]+:)[^@\s/]{3,}(@)/g, // user:password@ in URLs
];

/**
 * A word every shape above contains (each SHAPES and AFTER pattern begins with
 * one of them, matched here without regard to case, so this matches wherever
 * any of them could): a text without one is left as it is after one scan
 * rather than fourteen. Keep it in step with SHAPES and AFTER.
 */
const ANY_SHAPE = /sk-|gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|AIza|npm_|eyJ|bearer|basic|authorization|x-api-key|api[-_]?key|password|passwd|secret|token|:\/\//i;

/** A credential-shaped run longer than this is not held back by unfinished(): it is redacted as it stands. */
const MAX_SHAPE_RUN = 1024;
const TRAILING_RUN = /[^\s"',;]+$/;
/** How each shape (SHAPES, AFTER) begins. */
const SHAPE_STARTS = ["sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "AKIA", "ASIA", "AIza", "npm_", "eyJ", "-----BEGIN"];
/** The keywords the AFTER shapes follow, as a run that is still being written may begin them. */
const KEYWORDS = ["bearer", "basic", "authorization", "proxy-authorization", "x-api-key", "api-key", "api_key", "apikey", "password", "passwd", "secret", "token"];
const KEYWORD = /(?:authorization|x-api-key|api[-_]?key|proxy-authorization|password|passwd|secret|token|:\/\/)/i;

/**
 * How much of the end of a text to hold because its last run of non-space
 * characters could still grow into a credential's shape: the run, and the
 * keyword before it when the shape needs one ("Bearer TOKEN", "token: VALUE").
 */
function shapeHold(run: string, before: string): number {
  const keyword = /(?:\bBearer|\bBasic|(?:authorization|x-api-key|api[-_]?key|proxy-authorization|password|passwd|secret|token)["']?\s*[:=]?)\s*["']?$/i.exec(before.slice(-64));
  if (keyword) return run.length + keyword[0].length;
  const word = run.replace(/^[^A-Za-z0-9-]+/, "");
  if (word && SHAPE_STARTS.some((p) => word.startsWith(p) || p.startsWith(word))) return run.length;
  const lower = word.toLowerCase();
  if (lower && KEYWORDS.some((k) => k.startsWith(lower))) return run.length;
  // Contains a keyword (its value may follow), or may still become "://user:password@".
  if (KEYWORD.test(run) || /:\/?$/.test(run)) return run.length;
  return 0;
}

/** The spellings of one secret value that a program might print. */
function encodings(value: string): string[] {
  const b = Buffer.from(value, "utf8");
  const forms = new Set([
    value,
    // A name in DNS has no case, and a lookup comes back lowercased: `$TOKEN.example` is reported as such.
    value.toLowerCase(),
    value.toUpperCase(),
    b.toString("base64"),
    b.toString("base64").replace(/=+$/, ""),
    b.toString("base64url"),
    b.toString("hex"),
    b.toString("hex").toUpperCase(),
    encodeURIComponent(value),
    ...shiftedBase64(b),
  ]);
  return [...forms].filter((f) => f.length >= 6);
}

/**
 * The part of base64 that a value produces whatever bytes surround it, at
 * each of the three alignments: `env | base64` encodes a secret that starts
 * mid-group. Characters that mix in a neighbour's bits are left out.
 */
function shiftedBase64(b: Buffer): string[] {
  const out: string[] = [];
  for (const shift of [1, 2]) {
    const enc = Buffer.concat([Buffer.alloc(shift), b]).toString("base64");
    const whole = Math.floor((b.length + shift) / 3) * 4;
    const fragment = enc.slice(shift === 1 ? 2 : 3, whole);
    if (fragment.length >= 8) out.push(fragment);
  }
  const whole = Math.floor(b.length / 3) * 4;
  const aligned = b.toString("base64").slice(0, whole);
  if (aligned.length >= 8) out.push(aligned);
  return out;
}

/**
 * PEM private keys, found with indexOf: each BEGIN is matched with the next
 * END at most once, so a text full of BEGINs stays linear.
 */
function privateKeys(s: string): string {
  const BEGIN = /-----BEGIN [A-Z ]{0,40}PRIVATE KEY-----/g;
  const END = /-----END [A-Z ]{0,40}PRIVATE KEY-----/g;
  let out = "";
  let at = 0;
  for (let m = BEGIN.exec(s); m; m = BEGIN.exec(s)) {
    if (m.index < at) continue;
    END.lastIndex = m.index + m[0].length;
    const e = END.exec(s);
    if (!e) break;
    out += s.slice(at, m.index) + REDACTED;
    at = e.index + e[0].length;
    BEGIN.lastIndex = at;
  }
  return at === 0 ? s : out + s.slice(at);
}

const BASE64_LINE = /^[A-Za-z0-9+/]+={0,2}\r?$/;

/**
 * Runs of base64 split into lines (base64 wraps at 76 columns by default),
 * found line by line: a regular expression over the whole text would
 * backtrack quadratically on one long line.
 */
function wrappedBase64Runs(s: string, f: (joined: string) => string | undefined): string {
  const lines = s.split("\n");
  let changed = false;
  for (let i = 0; i < lines.length; ) {
    let j = i;
    while (j < lines.length && lines[j]!.length >= 16 && BASE64_LINE.test(lines[j]!)) j++;
    if (j - i >= 2 || (j - i === 1 && j < lines.length && BASE64_LINE.test(lines[j]!))) {
      const end = j - i >= 2 ? j : j + 1;
      const joined = lines.slice(i, end).map((l) => l.replace(/\r$/, "")).join("");
      const replaced = f(joined);
      if (replaced !== undefined) {
        lines.splice(i, end - i, replaced);
        changed = true;
        i += 1;
        continue;
      }
      i = end;
    } else i = Math.max(j, i + 1);
  }
  return changed ? lines.join("\n") : s;
}

/** How deep redaction follows a JSON-like value; deeper parts are replaced, not walked (or stringified). */
const MAX_DEPTH = 32;

export class Redactor {
  private readonly known: string[] = [];
  private learned = 0;

  /** How many encodings of secrets it knows: text redacted at one count must be redacted again once it grows. */
  get knows(): number {
    return this.learned;
  }

  /** Registers a secret value; its encodings are redacted from then on. Short values are refused: they would redact ordinary text. */
  add(value: string): void {
    if (value.length < 6) return;
    for (const f of encodings(value)) if (!this.known.includes(f)) this.known.push(f);
    this.learned = this.known.length;
    // Longest first, so that an encoding containing another is replaced whole.
    this.known.sort((a, b) => b.length - a.length);
  }

  /** Known values only: no shape matching (see Spool, which leaves shapes to the journal's ingest). */
  knownOnly(s: string): string {
    return this.known.length ? this.replaceKnown(s) : s;
  }

  text(s: string): string {
    let out = this.known.length ? wrappedBase64Runs(s, (joined) => (this.known.some((k) => joined.includes(k)) ? this.replaceKnown(joined) : undefined)) : s;
    out = privateKeys(this.replaceKnown(out));
    if (!ANY_SHAPE.test(out)) return out;
    for (const re of SHAPES) out = out.replace(re, REDACTED);
    for (const re of AFTER) out = out.replace(re, (_m, keep: string, tail?: string) => `${keep}${REDACTED}${typeof tail === "string" ? tail : ""}`);
    return out;
  }

  /**
   * How many characters at the end of s could be the start of something
   * text() would redact once more text follows: a proper prefix of a known
   * secret's spelling, or an unfinished run that could become a credential's
   * shape. A stream that redacts piece by piece (the web terminal) holds them
   * back, so that a value split across pieces is still seen whole. Without
   * shapes, only known spellings count (a line's end, where a shape ends too).
   */
  unfinished(s: string, shapes = true): number {
    let n = 0;
    for (const k of this.known) {
      for (let l = Math.min(k.length - 1, s.length); l > n; l--)
        if (s.endsWith(k.slice(0, l))) {
          n = l;
          break;
        }
    }
    // The run may be empty: "Bearer " at the end waits for what follows it.
    const run = shapes ? (TRAILING_RUN.exec(s.slice(-MAX_SHAPE_RUN - 1))?.[0] ?? "") : "";
    if (shapes && run.length <= MAX_SHAPE_RUN) n = Math.max(n, shapeHold(run, s.slice(0, s.length - run.length)));
    // The cut must not fall inside a whole spelling that ends before it: that one is then held whole too.
    for (let moved = true; moved && n < s.length; ) {
      moved = false;
      const cut = s.length - n;
      for (const k of this.known) {
        const at = s.lastIndexOf(k, cut - 1);
        if (at >= 0 && at > cut - k.length && at + k.length > cut) {
          n = s.length - at;
          moved = true;
          break;
        }
      }
    }
    return n;
  }

  /** Where known spellings occur in s, as [start, end) ranges (overlapping ones merged), longest spellings first. */
  knownAt(s: string): Array<[number, number]> {
    const found: Array<[number, number]> = [];
    for (const k of this.known) for (let at = s.indexOf(k); at >= 0; at = s.indexOf(k, at + 1)) found.push([at, at + k.length]);
    found.sort((a, b) => a[0] - b[0]);
    const merged: Array<[number, number]> = [];
    for (const r of found) {
      const last = merged[merged.length - 1];
      if (last && r[0] < last[1]) last[1] = Math.max(last[1], r[1]);
      else merged.push(r);
    }
    return merged;
  }

  private replaceKnown(s: string): string {
    let out = s;
    for (const k of this.known) if (out.includes(k)) out = out.split(k).join(REDACTED);
    return out;
  }

  /** Redacts every string (and key) inside a JSON-like value; anything nested deeper than MAX_DEPTH becomes a marker. */
  value<T>(v: T, depth = 0, text: (s: string) => string = (s) => this.text(s)): T {
    if (typeof v === "string") return text(v) as T;
    if (v && typeof v === "object" && depth >= MAX_DEPTH) return "[nested too deep; not recorded]" as T;
    if (Array.isArray(v)) return v.map((x) => this.value(x, depth + 1, text)) as T;
    if (v && typeof v === "object") {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) o[text(k)] = this.value(x, depth + 1, text);
      return o as T;
    }
    return v;
  }
}
