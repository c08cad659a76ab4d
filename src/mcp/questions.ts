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

function shownTextNeutralised(v: unknown, neutralise: (t: string) => string, unsafe: string[], at: string): unknown {
  if (Array.isArray(v)) return v.map((x, i) => shownTextNeutralised(x, neutralise, unsafe, `${at}[${i}]`));
  if (!v || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (neutralise(k) !== k) unsafe.push(`${at}: a key`);
    if (SHOWN.has(k) && typeof x === "string") out[k] = neutralise(x);
    else if (k === "enumNames" && Array.isArray(x)) out[k] = x.map((n) => (typeof n === "string" ? neutralise(n) : n));
    else if (VERBATIM.has(k)) {
      verbatim(x, neutralise, unsafe, `${at}.${k}`);
      out[k] = x;
    } else out[k] = shownTextNeutralised(x, neutralise, unsafe, `${at}.${k}`);
  }
  return out;
}

/** Notes each string in v (however nested) that neutralising would change. */
function verbatim(v: unknown, neutralise: (t: string) => string, unsafe: string[], at: string): void {
  if (typeof v === "string") {
    if (neutralise(v) !== v) unsafe.push(at);
  } else if (Array.isArray(v)) v.forEach((x, i) => verbatim(x, neutralise, unsafe, `${at}[${i}]`));
  else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) verbatim(x, neutralise, unsafe, `${at}.${k}`);
}

export type ServerQuestion = { ok: true; params: Record<string, unknown> } | { ok: false; reason: string };

export function serverQuestion(server: string, params: Record<string, unknown>, neutralise: (t: string) => string): ServerQuestion {
  const unsafe: string[] = [];
  const asked: Record<string, unknown> = { ...params, message: `[MCP server ${neutralise(server)}] ${neutralise(String(params.message))}` };
  if (params.requestedSchema !== undefined) asked.requestedSchema = shownTextNeutralised(params.requestedSchema, neutralise, unsafe, "requestedSchema");
  if (typeof params.url === "string" && neutralise(params.url) !== params.url) unsafe.push("url");
  if (unsafe.length > 0)
    return { ok: false, reason: `the question holds control or bidi characters where they cannot be made harmless without changing the answer (${unsafe.slice(0, 5).join(", ")}${unsafe.length > 5 ? ", …" : ""})` };
  return { ok: true, params: asked };
}
