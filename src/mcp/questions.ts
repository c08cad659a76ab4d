/**
 * What a server asks a person (`elicitation/create`), as the client is given
 * it: labelled with the server's name first, so that it cannot pass for Vak's
 * own `--ask` question, and with every text the client shows neutralised, so
 * that a carriage return, an erase-line escape or a bidi override cannot wipe
 * or hide that label. Property keys, enum values and defaults are left alone:
 * they are what the answer is made of.
 */
const SHOWN = new Set(["title", "description"]);

function shownTextNeutralised(v: unknown, neutralise: (t: string) => string): unknown {
  if (Array.isArray(v)) return v.map((x) => shownTextNeutralised(x, neutralise));
  if (!v || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (SHOWN.has(k) && typeof x === "string") out[k] = neutralise(x);
    else if (k === "enumNames" && Array.isArray(x)) out[k] = x.map((n) => (typeof n === "string" ? neutralise(n) : n));
    else out[k] = shownTextNeutralised(x, neutralise);
  }
  return out;
}

export function serverQuestion(server: string, params: Record<string, unknown>, neutralise: (t: string) => string): Record<string, unknown> {
  const asked: Record<string, unknown> = { ...params, message: `[MCP server ${neutralise(server)}] ${neutralise(String(params.message))}` };
  if (params.requestedSchema !== undefined) asked.requestedSchema = shownTextNeutralised(params.requestedSchema, neutralise);
  return asked;
}
