/**
 * Search on PostgreSQL: full text, not trigrams, so that a query finds what
 * it finds in SQLite's FTS5. Both index words as FTS5's default tokenizer
 * sees them (runs of letters and digits, case-folded, no stemming: the
 * 'simple' configuration over vak.search_words()), and the same query
 * language is understood here: words, "phrases", prefix*, AND, OR, NOT.
 * Trigrams would match inside words (a search for "pass" finding "passwd"),
 * which SQLite does not. Every word reaches the database as a parameter; the
 * SQL is built only from this parser's own operators.
 */
export interface TsQuery {
  /** A tsquery expression over $1…$n. */
  sql: string;
  params: string[];
}

type Item = { text: string; phrase: boolean; prefix: boolean; not: boolean };

/** FTS5's query syntax as a tsquery expression; undefined for a query it cannot read (the caller then searches for it as a phrase). */
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
    groups[groups.length - 1]!.push({ text: prefix ? t.text.slice(0, -1) : t.text, phrase: true, prefix, not });
    not = false;
  }
  if (!groups[0]!.length) return undefined;
  const params: string[] = [];
  const term = (it: Item) => {
    params.push(it.text);
    const words = `vak.search_words($${first + params.length - 1})`;
    const q = `pg_catalog.phraseto_tsquery('pg_catalog.simple'::pg_catalog.regconfig, ${words})`;
    // An empty tsquery (only punctuation) takes no prefix mark.
    const p = it.prefix ? `(CASE WHEN ${q}::text = '' THEN ${q} ELSE (${q}::text || ':*')::tsquery END)` : q;
    return it.not ? `!!${p}` : p;
  };
  const sql = groups.map((g) => `(${g.map(term).join(" && ")})`).join(" || ");
  return { sql, params };
}

/** The query as one phrase: what SQLite does with a query FTS5 cannot parse. */
export function phraseQuery(query: string, first = 1): TsQuery {
  return { sql: `pg_catalog.phraseto_tsquery('pg_catalog.simple'::pg_catalog.regconfig, vak.search_words($${first}))`, params: [query] };
}
