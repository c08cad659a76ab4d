/**
 * Canonical request paths, for grants that name a path prefix
 * (`api.github.com/repos/acme/*`). The rules of the host part apply to the
 * path: one spelling per resource, and whatever two servers could read
 * differently is refused rather than guessed. Percent-encodings of unreserved
 * characters are decoded and the rest upper-cased; dot segments are removed;
 * runs of slashes become one. An encoded slash, backslash, percent sign, NUL
 * or dot, a backslash, a fragment or a control character is refused: servers
 * disagree on each. So is a segment that a server which decodes, normalizes
 * (NFKC) or drops parameters more eagerly would read as a dot segment (`..;`,
 * `..%3B`, `..%20`, a fullwidth dot) or split (a fullwidth slash), and encoded
 * bytes that are not UTF-8 (overlong forms of `.` and `/`). The gate checks the
 * canonical path and sends the canonical path, so the server is asked for
 * exactly what was checked.
 */
export class PathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PathError";
  }
}

const UNRESERVED = /^[A-Za-z0-9\-_~]$/;
/** Encodings whose meaning differs between servers: they never pass a path rule. */
const AMBIGUOUS = new Set(["2F", "5C", "25", "00", "2E"]);

/** A request target in origin form ("/a/b?q") split into the canonical path and the query, as sent. */
export function canonicalPath(target: string): { path: string; query: string } {
  if (!target.startsWith("/")) throw new PathError("the request path does not start with /");
  if (/[\x00-\x20\x7f-\uffff]/.test(target)) throw new PathError("control characters, spaces or non-ASCII bytes in the request path");
  if (target.includes("#")) throw new PathError("a fragment (#) in the request path");
  if (target.includes("\\")) throw new PathError("a backslash in the request path");
  const q = target.indexOf("?");
  const raw = q < 0 ? target : target.slice(0, q);
  const query = q < 0 ? "" : target.slice(q);
  let decoded = "";
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== "%") {
      decoded += c;
      continue;
    }
    const hex = raw.slice(i + 1, i + 3).toUpperCase();
    if (!/^[0-9A-F]{2}$/.test(hex)) throw new PathError("a malformed percent-encoding in the request path");
    if (AMBIGUOUS.has(hex)) throw new PathError(`an encoded ${{ "2F": "slash", "5C": "backslash", "25": "percent sign", "00": "NUL", "2E": "dot" }[hex]} (%${hex}) in the request path, which servers read differently`);
    const ch = String.fromCharCode(parseInt(hex, 16));
    decoded += UNRESERVED.test(ch) ? ch : `%${hex}`;
    i += 2;
  }
  const out: string[] = [];
  const segments = decoded.split("/").slice(1);
  for (const [i, s] of segments.entries()) {
    if (s !== "." && s !== ".." && /^\.\.?(?:[;?#\s\x00-\x20]|$)/.test(readAs(s)))
      throw new PathError(`a segment (${s}) that some servers read as a dot segment (after decoding, Unicode normalization or dropping its parameters) in the request path`);
    const last = i === segments.length - 1;
    if (s === "..") out.pop();
    else if (s !== "." && (s !== "" || last)) out.push(s);
    // A trailing "." or ".." still names a directory: keep the slash.
    if ((s === "." || s === "..") && last) out.push("");
  }
  const path = `/${out.join("/")}`.replace(/\/{2,}/g, "/");
  return { path, query };
}

/**
 * A segment as the most eager server reads it: every percent-encoding decoded, as UTF-8 (bytes that are not,
 * overlong forms among them, are refused), then NFKC-normalized (a fullwidth dot is a dot). A slash it then
 * holds is one the gate did not split at: refused.
 */
function readAs(segment: string): string {
  const bytes = Buffer.from(segment.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), "latin1");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes).normalize("NFKC");
  } catch {
    throw new PathError("percent-encoded bytes in the request path that are not UTF-8 (an overlong or broken sequence), which servers read differently");
  }
  if (/[/\\]/.test(text)) throw new PathError(`a segment (${segment}) holding a character that Unicode normalization turns into a slash or backslash, which servers read differently`);
  return text;
}

/**
 * A grant's path as written after the host: "/repos/acme/*" or "/repos/acme"
 * (the same: the prefix and everything below it, at a segment boundary).
 */
export function parsePathRule(text: string): string {
  let p = text;
  if (p.endsWith("/*")) p = p.slice(0, -2);
  if (p.includes("*")) throw new PathError(`"*" is allowed only as a final "/*" in a path`);
  if (p.includes("?")) throw new PathError("a path grant names a path, not a query");
  const { path } = canonicalPath(p || "/");
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/** True when a canonical path is the prefix or below it. */
export function pathWithin(path: string, prefix: string): boolean {
  if (prefix === "/") return true;
  return path === prefix || path.startsWith(`${prefix}/`);
}
