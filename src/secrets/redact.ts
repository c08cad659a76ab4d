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
  /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g,
];
/** Credentials that follow a keyword: keep the keyword, hide the value. */
const AFTER: RegExp[] = [
  /(\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi,
  /(\bBasic\s+)[A-Za-z0-9+/=]{8,}/gi,
  /((?:authorization|x-api-key|api[-_]?key|proxy-authorization)["']?\s*[:=]\s*["']?)[^\s"',;]{8,}/gi,
  // "secret:NAME" with nothing between is a reference to a secret, not a value: left alone.
  /((?:password|passwd|secret|token)["']?\s*(?:=\s*|:\s+|:(?=["']))["']?)[^\s"',;]{6,}/gi,
  /(:\/\/[^/\s:@]+:)[^@\s/]{3,}(@)/g, // user:password@ in URLs
];

/** The spellings of one secret value that a program might print. */
function encodings(value: string): string[] {
  const b = Buffer.from(value, "utf8");
  const forms = new Set([
    value,
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

/** Runs of base64 split into lines (base64 wraps at 76 columns by default). */
const WRAPPED_BASE64 = /(?:[A-Za-z0-9+/]{16,}\r?\n)+[A-Za-z0-9+/=]{2,}/g;

export class Redactor {
  private readonly known: string[] = [];

  /** Registers a secret value; its encodings are redacted from then on. Short values are refused: they would redact ordinary text. */
  add(value: string): void {
    if (value.length < 6) return;
    for (const f of encodings(value)) if (!this.known.includes(f)) this.known.push(f);
    // Longest first, so that an encoding containing another is replaced whole.
    this.known.sort((a, b) => b.length - a.length);
  }

  text(s: string): string {
    let out = this.known.length ? s.replace(WRAPPED_BASE64, (run) => {
      const joined = run.replace(/\r?\n/g, "");
      return this.known.some((k) => joined.includes(k)) ? this.replaceKnown(joined) : run;
    }) : s;
    out = this.replaceKnown(out);
    for (const re of SHAPES) out = out.replace(re, REDACTED);
    for (const re of AFTER) out = out.replace(re, (_m, keep: string, tail?: string) => `${keep}${REDACTED}${typeof tail === "string" ? tail : ""}`);
    return out;
  }

  private replaceKnown(s: string): string {
    let out = s;
    for (const k of this.known) if (out.includes(k)) out = out.split(k).join(REDACTED);
    return out;
  }

  /** Redacts every string (and key) inside a JSON-like value. */
  value<T>(v: T): T {
    if (typeof v === "string") return this.text(v) as T;
    if (Array.isArray(v)) return v.map((x) => this.value(x)) as T;
    if (v && typeof v === "object") {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v as Record<string, unknown>)) o[this.text(k)] = this.value(x);
      return o as T;
    }
    return v;
  }
}
