import { userInfo } from "node:os";
import { parse } from "pg-connection-string";
import type { ClientConfig } from "pg";
import { VakError } from "../policy/errors.js";
import { parseRef, resolveRef, type SecretCommands } from "../secrets/store.js";

/**
 * A PostgreSQL journal's connection, from the user's config. The connection
 * string can carry a password, which is a secret: the config names it by
 * reference (`url = "env:VAK_JOURNAL_URL"`, `"secret:journal-url"`, or a plain
 * URL with `password = "secret:NAME"`), and a plain URL in a file that holds a
 * password is refused. The password never appears in a message (location is
 * the URL without it), in the journal (the caller registers it with the
 * redactor), or in a child's argv (children read the config themselves).
 *
 * The client is given every setting explicitly, so that node-postgres reads
 * nothing else: not PGPASSWORD, PGHOST or PGSSLMODE, not ~/.pgpass.
 */
export interface PgTarget {
  config: ClientConfig;
  /** The URL without its password, for messages. */
  location: string;
  /** Values to redact wherever they could appear (the password, the whole URL). */
  secrets: string[];
}

export function isPostgresUrl(text: string): boolean {
  return /^postgres(ql)?:\/\//.test(text);
}

/** Query parameters Vak passes on; anything else is refused rather than ignored. */
const KNOWN_PARAMS = new Set(["host", "port", "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout"]);
const SSL_MODES = new Set(["disable", "require", "verify-ca", "verify-full"]);

export interface PgSource {
  /** A postgres:// URL, or a reference to one (env:NAME, secret:NAME, cmd:NAME). */
  url: string;
  /** A reference to the password, when the URL has none. */
  password?: string;
  /** Where the setting came from, for messages ("[journal] url"). */
  what: string;
  env?: NodeJS.ProcessEnv;
  commands?: SecretCommands;
}

/** Resolves references and builds the client's whole configuration. */
export function pgTarget(src: PgSource): PgTarget {
  const byRef = !isPostgresUrl(src.url);
  const text = byRef ? resolveRef(parseRef(src.url), { env: src.env, commands: src.commands }) : src.url;
  if (!isPostgresUrl(text)) throw new VakError("bad-input", `${src.what}: ${byRef ? `${src.url} does not hold` : "is not"} a postgres:// URL`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new VakError("bad-input", `${src.what}: not a valid URL${byRef ? ` (in ${src.url})` : ""}`);
  }
  if (url.password && !byRef)
    throw new VakError("bad-input", `${src.what}: the URL holds a password, which must not be written in a file; name it by reference (password = "secret:NAME" or "env:NAME"), or put the whole URL in a secret (url = "secret:NAME")`);
  for (const k of url.searchParams.keys()) if (!KNOWN_PARAMS.has(k)) throw new VakError("bad-input", `${src.what}: the URL parameter ${k} is not supported (Vak passes on only ${[...KNOWN_PARAMS].join(", ")})`);
  const p = parse(text);
  const sslmode = url.searchParams.get("sslmode");
  if (sslmode && !SSL_MODES.has(sslmode)) throw new VakError("bad-input", `${src.what}: sslmode=${sslmode} is not one of ${[...SSL_MODES].join(", ")}`);
  const host = p.host || "";
  if (!host) throw new VakError("bad-input", `${src.what}: the URL names no host (for a unix socket: postgres://USER@/DB?host=/run/postgresql)`);
  const socket = host.startsWith("/");
  const loopback = socket || host === "localhost" || host === "127.0.0.1" || host === "[::1]" || host === "::1";
  // TLS is verified by default to anything but this machine; sslmode=disable turns it off, on purpose.
  const ssl = sslmode === "disable" || (socket && !sslmode) ? false : sslmode ? (p.ssl as ClientConfig["ssl"]) ?? true : loopback ? false : true;
  let password = p.password ?? "";
  if (src.password) {
    if (password) throw new VakError("bad-input", `${src.what}: the URL holds a password and password is set too; keep one`);
    password = resolveRef(parseRef(src.password), { env: src.env, commands: src.commands });
  }
  const user = p.user || userInfo().username;
  const database = p.database || user;
  const port = Number(p.port || 5432);
  const timeout = Number(url.searchParams.get("connect_timeout") ?? 10);
  const shownHost = socket ? "" : host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const shownPort = port === 5432 ? "" : socket ? `&port=${port}` : `:${port}`;
  const location = socket ? `postgres://${encodeURIComponent(user)}@/${encodeURIComponent(database)}?host=${host}${shownPort}` : `postgres://${encodeURIComponent(user)}@${shownHost}${shownPort}/${encodeURIComponent(database)}`;
  const config: ClientConfig = {
    host, port, user, database,
    // A function, so that node-postgres never falls back to PGPASSWORD or ~/.pgpass.
    password: async () => password,
    ssl,
    application_name: "vak",
    client_encoding: "UTF8",
    // Every connection: durable commits whatever the server's or role's default (an append is acknowledged
    // only once its commit is), and a search path of pg_catalog alone, so that no schema a role can create
    // objects in is searched before it (Vak names its own tables with their schema).
    options: "-c client_encoding=UTF8 -c synchronous_commit=on -c search_path=pg_catalog",
    connectionTimeoutMillis: timeout * 1000,
    keepAlive: true,
  };
  return { config, location, secrets: [password, text].filter((s) => s.length >= 6) };
}
