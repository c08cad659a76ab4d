/**
 * What a server asks a person (`elicitation/create`), as the client is given
 * it: labelled with the server's name first, so that it cannot pass for Vak's
 * own `--ask` question, and with every text the client shows neutralised, so
 * that a carriage return, an erase-line escape or a bidi override cannot wipe
 * or hide that label. Titles and descriptions are rewritten. The strings an
 * answer is made of (property keys, enum and const values, defaults) and a
 * URL-mode question's url cannot be rewritten without changing the answer or
 * the page: a question where any of them would need it is refused.
 */
const SHOWN = new Set(["title", "description"]);
/** Values that are what the answer is made of, or where it goes: shown by clients, never rewritten. */
const VERBATIM = new Set(["enum", "const", "default", "examples"]);

/**
 * The schema with its shown texts neutralised; unsafe gets what kind of answer-bearing string (a key, an enum value…)
 * neutralising would change. Kinds, never the server's text: the reason goes back to the server and on the record.
 */
function shownTextNeutralised(v: unknown, neutralise: (t: string) => string, unsafe: Set<string>): unknown {
  if (Array.isArray(v)) return v.map((x) => shownTextNeutralised(x, neutralise, unsafe));
  if (!v || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (neutralise(k) !== k) unsafe.add("a property key");
    if (SHOWN.has(k) && typeof x === "string") out[k] = neutralise(x);
    else if (k === "enumNames" && Array.isArray(x)) out[k] = x.map((n) => (typeof n === "string" ? neutralise(n) : n));
    else if (VERBATIM.has(k)) {
      if (changes(x, neutralise)) unsafe.add(`a value of ${k}`);
      out[k] = x;
    } else out[k] = shownTextNeutralised(x, neutralise, unsafe);
  }
  return out;
}

/** Whether neutralising would change any string in v, however nested (keys included). */
function changes(v: unknown, neutralise: (t: string) => string): boolean {
  if (typeof v === "string") return neutralise(v) !== v;
  if (Array.isArray(v)) return v.some((x) => changes(x, neutralise));
  if (v && typeof v === "object") return Object.entries(v).some(([k, x]) => neutralise(k) !== k || changes(x, neutralise));
  return false;
}

export type ServerQuestion = { ok: true; params: Record<string, unknown> } | { ok: false; reason: string };

export function serverQuestion(server: string, params: Record<string, unknown>, neutralise: (t: string) => string): ServerQuestion {
  const unsafe = new Set<string>();
  const asked: Record<string, unknown> = { ...params, message: `[MCP server ${neutralise(server)}] ${neutralise(String(params.message))}` };
  if (params.requestedSchema !== undefined) asked.requestedSchema = shownTextNeutralised(params.requestedSchema, neutralise, unsafe);
  if (typeof params.url === "string" && neutralise(params.url) !== params.url) unsafe.add("the url");
  if (unsafe.size > 0)
    return { ok: false, reason: `the question holds control or bidi characters where they cannot be made harmless without changing the answer (in ${[...unsafe].join(", ")})` };
  return { ok: true, params: asked };
}
