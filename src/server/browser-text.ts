import type { Shown } from "./wire.js";

/**
 * Text on its way to a browser. Everything a model, a tool, a command or a
 * server chose is hostile output: it is redacted (known secrets and credential
 * shapes), neutralised (control, invisible and direction-changing characters
 * shown as escapes, so a diff cannot hide what it does), and bounded, always
 * saying how much there was. The browser then renders it as text, never as
 * HTML. The redactor and the neutraliser are the host's own, handed in by the
 * command that starts the server, so that there is one of each.
 */
export type TextFilter = (s: string) => string;

/** The longest text one field carries to the browser. */
export const MAX_FIELD_BYTES = 256 * 1024;
const MAX_DEPTH = 24;
const MAX_KEYS = 500;

/** Cuts s to at most max UTF-8 bytes without splitting a character. */
function cut(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  const b = Buffer.from(s, "utf8").subarray(0, max);
  // A cut in the middle of a character decodes to U+FFFD at the end: drop it.
  return b.toString("utf8").replace(/\uFFFD$/, "");
}

/** Filters, then bounds: the neutraliser's escapes are counted in what is shown. */
export function shown(filter: TextFilter, s: string, max = MAX_FIELD_BYTES): Shown {
  const text = filter(s);
  const bytes = Buffer.byteLength(text);
  const kept = cut(text, max);
  return { text: kept, bytes, shownBytes: Buffer.byteLength(kept) };
}

/** A short label (a name, a code, a path): filtered and cut, with an ellipsis when cut. */
export function label(filter: TextFilter, s: string, max = 4096): string {
  const text = filter(s);
  return Buffer.byteLength(text) > max ? `${cut(text, max)}…` : text;
}

/** A JSON-like value with every string (keys too) filtered and bounded, nesting and width bounded. */
export function safeValue(filter: TextFilter, v: unknown, max = 16 * 1024, depth = 0): unknown {
  if (typeof v === "string") return label(filter, v, max);
  if (v === null || typeof v === "number" || typeof v === "boolean") return v;
  if (depth >= MAX_DEPTH) return "[nested too deep]";
  if (Array.isArray(v)) {
    const out = v.slice(0, MAX_KEYS).map((x) => safeValue(filter, x, max, depth + 1));
    if (v.length > MAX_KEYS) out.push(`[${v.length - MAX_KEYS} more items not shown]`);
    return out;
  }
  if (typeof v === "object") {
    const out: Record<string, unknown> = {};
    const entries = Object.entries(v as Record<string, unknown>);
    for (const [k, x] of entries.slice(0, MAX_KEYS)) out[label(filter, k, 256)] = safeValue(filter, x, max, depth + 1);
    if (entries.length > MAX_KEYS) out["…"] = `${entries.length - MAX_KEYS} more fields not shown`;
    return out;
  }
  return String(v);
}
