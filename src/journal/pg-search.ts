/**
 * Search on PostgreSQL: full text, not trigrams, so that a query finds what
 * it finds in SQLite's FTS5. Words are what FTS5's default tokenizer sees
 * (runs of letters and digits, case-folded, no stemming), split here, in Vak,
 * on both sides: each event's words go into its `search` column as a tsvector
 * with their positions (searchTerms(), checked again by verify), and a query
 * is turned into a tsquery over the same words (parseQuery()). The server
 * parses no payload: its regexp and to_tsvector cost more per event than the
 * rest of an INSERT. The same query language as FTS5 is understood: words,
 * "phrases", prefix*, AND, OR, NOT. Trigrams would match inside words (a
 * search for "pass" finding "passwd"), which SQLite does not. Every query
 * reaches the database as one parameter.
 */
export interface TsQuery {
  /** A tsquery expression over $1…$n. */
  sql: string;
  params: string[];
}

/** Indexed text per payload: at most this many characters (a tsvector holds at most 1 MB). */
export const SEARCH_CHARS = 65536;
/** PostgreSQL's bounds: a lexeme's bytes, a position, positions per lexeme. */
const MAX_LEXEME_BYTES = 2046;
const MAX_POS = 16383;
const MAX_POSITIONS = 256;

const WORD = /[\p{L}\p{N}]+/gu;

/** The words of a text, case-folded, as they are indexed and searched (none longer than a lexeme may be). */
export function searchWords(text: string): string[] {
  const out: string[] = [];
  for (const m of text.slice(0, SEARCH_CHARS).matchAll(WORD)) {
    const w = m[0].toLowerCase();
    if (Buffer.byteLength(w) <= MAX_LEXEME_BYTES) out.push(w);
  }
  return out;
}

/**
 * A payload's search terms as the text of a tsvector, in PostgreSQL's own
 * normal form (lexemes in byte order, positions ascending, clamped and bounded
 * as it stores them), so that the column reads back exactly as it was written
 * and verify can compare it with the payload's. Lexemes are letters and
 * digits only: nothing in them needs escaping.
 */
export function searchTerms(payload: string): string {
  const at = new Map<string, number[]>();
  let pos = 0;
  for (const w of searchWords(payload)) {
    pos = Math.min(pos + 1, MAX_POS);
    const ps = at.get(w);
    if (!ps) at.set(w, [pos]);
    else if (ps.length < MAX_POSITIONS && ps[ps.length - 1] !== pos) ps.push(pos);
  }
  return [...at.keys()].sort(byteOrder).map((w) => `'${w}':${at.get(w)!.join(",")}`).join(" ");
}

const ASTRAL = /[\uD800-\uDFFF]/;

/** The order of the strings' UTF-8 bytes: the order of their UTF-16 units, unless one holds a character past U+FFFF. */
function byteOrder(a: string, b: string): number {
  if (ASTRAL.test(a) || ASTRAL.test(b)) return Buffer.compare(Buffer.from(a), Buffer.from(b));
  return a < b ? -1 : a > b ? 1 : 0;
}

type Item = { text: string; prefix: boolean; not: boolean };

/** One term of a query as tsquery text: its words in a row, the last one a prefix if asked; "" when it has no words. */
function term(it: Item): string {
  const words = searchWords(it.text).map((w) => `'${w}'`);
  if (!words.length) return "";
  if (it.prefix) words[words.length - 1] += ":*";
  const phrase = words.length > 1 ? `(${words.join(" <-> ")})` : words[0]!;
  return it.not ? `!${phrase}` : phrase;
}

/** Terms joined by op, leaving out the empty ones (as PostgreSQL's own && and || do). */
const join = (parts: string[], op: string) => {
  const kept = parts.filter(Boolean);
  return kept.length > 1 ? `(${kept.join(` ${op} `)})` : (kept[0] ?? "");
};

const asQuery = (text: string, first: number): TsQuery => ({ sql: `$${first}::pg_catalog.tsquery`, params: [text] });

/** FTS5's query syntax as a tsquery; undefined for a query it cannot read (the caller then searches for it as a phrase). */
export function parseQuery(query: string, first = 1): TsQuery | undefined {
  const tokens: { text: string; quoted: boolean }[] = [];
  const re = /"((?:[^"]|"")*)"|([^\s"]+)|(")/g;
  for (let m; (m = re.exec(query)); ) {
    if (m[3] !== undefined) return undefined; // an unbalanced quote
    tokens.push(m[1] !== undefined ? { text: m[1].replace(/""/g, '"'), quoted: true } : { text: m[2]!, quoted: false });
  }
  const groups: Item[][] = [[]];
  let not = false;
  for (const [i, t] of tokens.entries()) {
    const op = t.quoted ? undefined : t.text;
    if (op === "OR" || op === "AND" || op === "NOT") {
      const prev = groups[groups.length - 1]!;
      if (!prev.length || i === tokens.length - 1 || not) return undefined;
      if (op === "OR") groups.push([]);
      else if (op === "NOT") not = true;
      continue;
    }
    if (!t.quoted && /[()^:+{}]/.test(t.text)) return undefined; // FTS5 syntax this parser does not take
    const prefix = !t.quoted && t.text.endsWith("*") && t.text.length > 1;
    groups[groups.length - 1]!.push({ text: prefix ? t.text.slice(0, -1) : t.text, prefix, not });
    not = false;
  }
  if (!groups[0]!.length) return undefined;
  return asQuery(join(groups.map((g) => join(g.map(term), "&")), "|"), first);
}

/** The query as one phrase: what SQLite does with a query FTS5 cannot parse. */
export function phraseQuery(query: string, first = 1): TsQuery {
  return asQuery(term({ text: query, prefix: false, not: false }), first);
}
