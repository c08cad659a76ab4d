/**
 * A config file shown to a sandbox without its credentials (a profile's
 * `allow_read_redacted`): `~/.npmrc` keeps its registry and CA settings and
 * loses `//registry/:_authToken=…`; `pip.conf` keeps its index and loses the
 * `user:password@` in its URL; `~/.claude.json` loses its API key and OAuth
 * account. A JSON file loses every key that names a credential; other files
 * go line by line, for the ini and TOML shapes they have: a line whose key
 * names a credential is replaced by a comment
 * (so that line numbers still match the host's file), and userinfo is cut
 * from every URL. The sandbox gets a copy written into its view; the host's
 * file is never bound. What it cannot recognise as a credential, it keeps:
 * grant such a file only if it holds nothing else secret.
 */
const CREDENTIAL_KEY = /(auth|token|passw|secret|api[-_]?key|credential|private[-_]?key|cookie|session)/i;
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@'"]+@/gi;

export interface Stripped {
  text: string;
  /** Where a credential was ("line 3", "key oauthAccount.accessToken"), for the plan: never its content. */
  removed: string[];
}

/** The key of an ini/TOML/npmrc line (`key = value`, `key: value`, `//host/:_authToken=…`), if it is one. */
function keyOf(line: string): string | undefined {
  const t = line.trim();
  if (t === "" || t.startsWith("#") || t.startsWith(";") || t.startsWith("[")) return undefined;
  // npmrc scopes a key to a registry: `//host:port/path/:_authToken=…`, the key runs to the `=`.
  if (t.startsWith("//")) return t.includes("=") ? t.slice(0, t.indexOf("=")) : undefined;
  return /^([^=:]+?)\s*[=:]/.exec(t)?.[1];
}

/** A JSON document: keys that name a credential are dropped, userinfo cut from every string. */
function stripJson(value: unknown, path: string, removed: string[], depth: number): unknown {
  if (typeof value === "string") {
    const cut = value.replace(URL_USERINFO, "$1");
    if (cut !== value) removed.push(`key ${path}`);
    return cut;
  }
  if (!value || typeof value !== "object" || depth > 64) return value;
  if (Array.isArray(value)) return value.map((v, i) => stripJson(v, `${path}[${i}]`, removed, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const at = path ? `${path}.${k}` : k;
    if (CREDENTIAL_KEY.test(k)) removed.push(`key ${at}`);
    else out[k] = stripJson(v, at, removed, depth + 1);
  }
  return out;
}

/**
 * The key as the program reading the file may take it, besides as written: npm's ini reader ends a line at a
 * bare `\r` too, takes a key to the first `=`, reads a quoted key as JSON (`"//r/:_auth\u0054oken"` is
 * `_authToken`), and expands `${VAR?}` in a key to what the file does not show.
 */
function keyForms(segment: string): string[] {
  const forms: string[] = [];
  const key = keyOf(segment);
  if (key !== undefined) forms.push(key);
  const eq = segment.indexOf("=");
  if (eq > 0 && key !== undefined) {
    let k = segment.slice(0, eq).trim();
    const quote = /^(["'])(.*)\1$/.exec(k);
    if (quote) {
      k = quote[2]!;
      try {
        const v: unknown = JSON.parse(quote[1] === '"' ? `"${k}"` : k);
        if (typeof v === "string") k = v;
      } catch {
        // not JSON: the reader keeps the text between the quotes
      }
    }
    forms.push(k);
  }
  return forms.map((k) => k.replace(/\$\{[^${}]*\}/g, ""));
}

const namesCredential = (line: string): boolean => line.split("\r").some((seg) => keyForms(seg).some((k) => CREDENTIAL_KEY.test(k)));

export function stripCredentials(text: string): Stripped {
  if (/^\s*\{/.test(text)) {
    try {
      const removed: string[] = [];
      return { text: JSON.stringify(stripJson(JSON.parse(text), "", removed, 0), null, 2) + "\n", removed };
    } catch {
      // not JSON after all: line by line
    }
  }
  const removed: string[] = [];
  const lines = text.split("\n").map((line, i) => {
    if (namesCredential(line)) {
      removed.push(`line ${i + 1}`);
      return "# (a credential was here; vak removed it: the sandbox never sees it)";
    }
    const cut = line.replace(URL_USERINFO, "$1");
    if (cut !== line) removed.push(`line ${i + 1}`);
    return cut;
  });
  return { text: lines.join("\n"), removed };
}
