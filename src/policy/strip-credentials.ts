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
/** A variable's name in an `env` table (`GH_PAT`, `OPENAI_KEY`, `DB_PW`): upper case, so that `env_key` (which names one) stays. */
const ENV_CREDENTIAL = /^[A-Z0-9_]*_(KEY|PAT|PW|PWD|PASS)$/;
/** npm's `key` (a client certificate's private key, in PEM), top-level or for one registry (`//r/:key`). */
const NPM_KEY = /(^|:)key$/i;
const namesKey = (k: string): boolean => CREDENTIAL_KEY.test(k) || ENV_CREDENTIAL.test(k);
/**
 * Userinfo up to the last `@` of the authority: `https://u:p@ss@host/` is user `u`, password `p@ss` to the client
 * (urllib, WHATWG URL), so the first `@` would leave `ss@` of it.
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#'"]+@/gi;
/** Tokens by their shape (GitHub, GitLab, Slack, OpenAI and Anthropic, AWS key ids, npm, JWTs), wherever they are. */
export const TOKEN_SHAPES = /\bgh[pousr]_[A-Za-z0-9]{16,}|\bgithub_pat_|\bglpat-|\bxox[abprs]-|\bsk-[A-Za-z0-9_-]{16,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bnpm_[A-Za-z0-9]{20,}|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\./;
/** A URL's query naming a credential (`?token=…`, `&api_key=…`). */
const QUERY_CREDENTIAL = String.raw`[?&][^=&#\s]*(token|key|secret|auth|passw|sig)[^=&#\s]*=`;
/**
 * A value that carries one by its form: an Authorization header's scheme and token, a URL's query naming one
 * (`?token=…`), conda's token in a channel's path (`https://conda.example/t/TOKEN/main`).
 */
const CREDENTIAL_VALUE = new RegExp(String.raw`\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}|${QUERY_CREDENTIAL}|:\/\/[^\s/]+\/t\/[^\s/]{6,}\/`, "i");
const valueHolds = (v: string): boolean => TOKEN_SHAPES.test(v) || CREDENTIAL_VALUE.test(v);
/**
 * What a key named like a credential may hold and still be kept, since it is no secret: the name of a variable
 * that holds one (Codex's `bearer_token_env_var = "GITHUB_TOKEN"`, `env_key`), a kind of login (Gemini CLI's
 * `security.auth.selectedType = "oauth-personal"`, Codex's `preferred_auth_method = "apikey"`), a switch
 * (`useExternal: false`). Anything else under such a key goes, an unknown shape included.
 */
// Config keys are snake_case or camelCase; an UPPER_CASE key is an environment variable (an MCP server's `env`), whose value is the secret.
const NAMES_VARIABLE = /(^|_)env_?var$|EnvVar$|(^|_)env_key$|EnvKey$/;
const NAMES_KIND = /(^|_)(type|kind|method)$|(Type|Kind|Method)$/;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const KIND_WORD = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
function harmless(key: string, value: unknown): boolean {
  if (typeof value === "boolean") return true;
  if (typeof value !== "string" || valueHolds(value)) return false;
  return (NAMES_VARIABLE.test(key) && VARIABLE_NAME.test(value)) || (NAMES_KIND.test(key) && KIND_WORD.test(value));
}
/** A line's value as harmless() takes it: a quoted string or a bare true/false at the start of the text after `=`. */
function lineValue(rest: string): string | boolean | undefined {
  const m = /^\s*(?:"([^"\\]*)"|'([^']*)'|(true|false)\b)\s*(?:$|[,}#\]])/.exec(rest);
  if (!m) return undefined;
  return m[3] !== undefined ? m[3] === "true" : (m[1] ?? m[2]);
}
const harmlessLine = (key: string, rest: string): boolean => harmless(key, lineValue(rest));

/** A proxy setting with a user in it (`user:pw@host:port`, which cargo and pip take without a scheme). */
const proxyWithUser = (name: string, value: string): boolean => /proxy/i.test(name) && value.includes("@");

// Words anywhere, and the short names as whole words (DB_PASS, MYSQL_PWD, STRIPE_KEY, AWS_ACCESS_KEY_ID, GH_PAT;
// npm_config_key is npm's client key, in PEM).
const ENV_CREDENTIAL_NAME = /(TOKEN|AUTH|PASSW|SECRET|API_?KEY|CREDENTIAL|PRIVATE_?KEY|COOKIE|SESSION|PASSPHRASE|(^|_)(PASS|PWD|PW|KEY|PAT)(_|$))/i;
/** Userinfo in a URL, or a query that names a credential (`https://pkgs.example/simple?token=…`). */
const ENV_CREDENTIAL_URL = new RegExp(String.raw`[a-z][a-z0-9+.-]*:\/\/[^\s/@]+@|[a-z][a-z0-9+.-]*:\/\/[^\s]*${QUERY_CREDENTIAL}`, "i");

/**
 * A host variable an allow_env pattern must not pass (compose.ts): by its name, a URL with a user or a
 * credential query in its value, a proxy with a user. Named on its own (`allow_env = ["NAME"]`), it is passed.
 */
export function envHoldsCredential(name: string, value: string): boolean {
  return ENV_CREDENTIAL_NAME.test(name) || ENV_CREDENTIAL_URL.test(value) || proxyWithUser(name, value);
}

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
    // In a list (an MCP server's args: ["--token", "ghp_…"]), where there is no key to drop.
    if (valueHolds(value)) {
      removed.push(`key ${path}`);
      return REMOVED_VALUE;
    }
    const cut = value.replace(URL_USERINFO, "$1");
    if (cut !== value) removed.push(`key ${path}`);
    return cut;
  }
  if (!value || typeof value !== "object" || depth > 64) return value;
  if (Array.isArray(value)) return value.map((v, i) => stripJson(v, `${path}[${i}]`, removed, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    const at = path ? `${path}.${k}` : k;
    if (namesKey(k) || (typeof v === "string" && valueHolds(v))) {
      const kept = onlyHarmless(k, v, at, removed, depth + 1);
      if (kept === undefined) removed.push(`key ${at}`);
      else out[k] = kept;
    } else out[k] = stripJson(v, at, removed, depth + 1);
  }
  return out;
}

/**
 * Under a key named like a credential: what harmless() keeps, and of an object (Gemini CLI's `security.auth`) only
 * such entries, at any depth; undefined when nothing is kept (the key goes whole).
 */
function onlyHarmless(k: string, v: unknown, at: string, removed: string[], depth: number): unknown {
  if (harmless(k, v)) return v;
  if (!v || typeof v !== "object" || Array.isArray(v) || depth > 64) return undefined;
  const out: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [ck, cv] of Object.entries(v)) {
    const kept = onlyHarmless(ck, cv, `${at}.${ck}`, dropped, depth + 1);
    if (kept === undefined) dropped.push(`key ${at}.${ck}`);
    else out[ck] = kept;
  }
  if (Object.keys(out).length === 0) return undefined;
  removed.push(...dropped);
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

/** Keys after the line's own: a TOML inline table's (`http_headers = { "Authorization" = "Bearer …" }`, `env = { GH_TOKEN = … }`), an option in a value (`"--token=…"`). */
const INNER_KEY = /(?:^|[{,\s"'[])(["']?)([A-Za-z0-9_.\-/:]+)\1\s*[=:]/g;

const namesCredential = (line: string): boolean =>
  valueHolds(line) ||
  [...line.matchAll(INNER_KEY)].some((m) => namesKey(m[2]!) && !harmlessLine(m[2]!, line.slice(m.index + m[0].length))) ||
  line.split("\r").some((seg) => {
    const rest = seg.slice(seg.search(/[=:]/) + 1);
    return keyForms(seg).some((k) => (namesKey(k) && !harmlessLine(k, rest)) || NPM_KEY.test(k) || proxyWithUser(k, rest));
  });

const REMOVED_VALUE = "(vak removed a credential here: the sandbox never sees it)";

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
