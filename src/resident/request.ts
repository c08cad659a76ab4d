/**
 * The resident host's wire format, decoded in one pure function. A client
 * (native/client.c) sends a 24-byte header — "VAK\1", argc, envc, the number
 * of descriptors, the body's bytes, 0, as little-endian u32 — then a body of
 * NUL-ended strings: cwd, argv (starting with "exec"), environ; with the first
 * bytes, four descriptors (SCM_RIGHTS): stdin, stdout, stderr and the cwd as a
 * directory. Anything that does not add up is refused, never repaired: a
 * client that says one thing and sends another is not to be guessed at.
 */

export const HEADER_BYTES = 24;
/** The largest body the host reads (argv, environ and cwd together); the client runs bigger ones in-process itself. */
export const MAX_BODY = 1 << 20;
/** stdin, stdout, stderr, cwd. */
export const REQUEST_FDS = 4;
const MAX_ARGS = 1 << 16;

/** What the native receive step saw (native/resident.c). */
export interface Received {
  error: "timeout" | "short" | "io" | "too-large" | null;
  errno: number;
  header: Buffer;
  body: Buffer;
  fds: number[];
  truncated: boolean;
}

export interface Request {
  cwd: string;
  argv: string[];
  env: Record<string, string>;
  /** stdin, stdout, stderr, and the cwd's directory. */
  fds: [number, number, number, number];
}

export type Decoded = { ok: true; request: Request } | { ok: false; code: string; message: string };

const refuse = (code: string, message: string): Decoded => ({ ok: false, code, message });

export function decodeRequest(r: Received): Decoded {
  if (r.error === "timeout") return refuse("request-timeout", "the request did not arrive in whole in time");
  if (r.error === "io") return refuse("request-io", `the request could not be read (errno ${r.errno})`);
  if (r.header.length < HEADER_BYTES) return refuse("request-short", `the request ended inside its header (${r.header.length} of ${HEADER_BYTES} bytes)`);
  if (r.header.toString("latin1", 0, 4) !== "VAK\x01") return refuse("request-version", "not a vak-client request of this version (the header's magic differs)");
  const argc = r.header.readUInt32LE(4);
  const envc = r.header.readUInt32LE(8);
  const nfds = r.header.readUInt32LE(12);
  const bytes = r.header.readUInt32LE(16);
  if (r.error === "too-large") return refuse("request-too-large", `the request declares ${bytes} bytes, over the host's limit of ${MAX_BODY}`);
  if (r.error === "short") return refuse("request-short", `the request ended after ${r.body.length} of the ${bytes} bytes it declared`);
  if (r.header.readUInt32LE(20) !== 0) return refuse("request-version", "the header's reserved field is not 0");
  if (r.truncated || nfds !== REQUEST_FDS || r.fds.length !== REQUEST_FDS)
    return refuse("request-fds", `the request declared ${nfds} descriptors and carried ${r.fds.length}${r.truncated ? " (and more than fit)" : ""}; a request carries exactly ${REQUEST_FDS}: stdin, stdout, stderr and its cwd`);
  if (argc < 1 || argc > MAX_ARGS || envc > MAX_ARGS) return refuse("request-argv", `the request declares ${argc} arguments and ${envc} environment entries (1 to ${MAX_ARGS} arguments, at most ${MAX_ARGS} entries)`);
  if (r.body.length !== bytes || bytes === 0 || r.body[bytes - 1] !== 0) return refuse("request-argv", "the request's body does not end with a NUL");
  const strings = r.body.subarray(0, bytes - 1).toString("utf8").split("\0");
  if (strings.length !== 1 + argc + envc)
    return refuse("request-argv", `the request declares a cwd, ${argc} arguments and ${envc} environment entries (${1 + argc + envc} strings) but carries ${strings.length}`);
  const [cwd, ...rest] = strings as [string, ...string[]];
  const argv = rest.slice(0, argc);
  if (!cwd.startsWith("/")) return refuse("request-cwd", "the request's cwd is not an absolute path");
  if (argv[0] !== "exec") return refuse("request-argv", "the host serves only `vak exec`");
  const env: Record<string, string> = {};
  for (const entry of rest.slice(argc)) {
    const eq = entry.indexOf("=");
    if (eq <= 0) return refuse("request-env", "an environment entry has no NAME= before its value");
    const name = entry.slice(0, eq);
    // The first of a repeated name wins, as getenv(3) reads it.
    if (!Object.hasOwn(env, name)) env[name] = entry.slice(eq + 1);
  }
  return { ok: true, request: { cwd, argv, env, fds: r.fds as Request["fds"] } };
}

/** Settings that place Vak's own state: a client whose differ from the host's is served by its own CLI, not this host. */
export function sameSettings(host: NodeJS.ProcessEnv, client: Record<string, string>): string | undefined {
  const names = new Set([...Object.keys(host), ...Object.keys(client)].filter((n) => n === "HOME" || n.startsWith("XDG_") || n.startsWith("VAK_")));
  // The client's and the host's own switches place nothing.
  names.delete("VAK_RESIDENT");
  names.delete("VAK_HOST_IDLE_SECONDS");
  for (const n of names) if ((host[n] ?? "") !== (client[n] ?? "")) return n;
  return undefined;
}
