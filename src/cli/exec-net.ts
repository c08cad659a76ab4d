import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { canonicalHost, type Host } from "../policy/address.js";
import { VakError } from "../policy/errors.js";
import type { UserConfig } from "../policy/config.js";
import type { GateOptions } from "../net/egress-gate.js";
import type { Endpoint } from "../net/endpoint.js";
import type { PlaceholderSecret } from "../net/placeholders.js";
import type { NetGrants } from "../policy/net-grants.js";
import type { RunTls } from "../net/tls-run.js";

/** A --secret as given: the value for NAME, or (with hosts) a placeholder in NAME that the gate replaces for those hosts. */
export interface ExecSecret {
  name: string;
  ref: string;
  value: string;
  hosts?: string[];
}

/**
 * The network side of one `vak exec` beyond its grants: secrets held by the
 * gate (placeholders inside), provider endpoints, and TLS (the run's CA and the
 * trust bundle) when a grant or a secret needs the gate to see inside HTTPS.
 * Loaded only for runs that have a network grant.
 */
export interface ExecNet {
  placeholders: PlaceholderSecret[];
  endpoints: Endpoint[];
  tls?: RunTls | undefined;
  /** Variables for the sandbox: placeholders, endpoint base URLs, the trust bundle's. */
  env: Record<string, string>;
  /** Directories to bind read-only (the trust bundle's). */
  runtime: string[];
  gate: { tls?: GateOptions["tls"]; upstreamProxy?: GateOptions["upstreamProxy"]; worker: { placeholders: PlaceholderSecret[]; endpoints: Endpoint[] } };
  close(): void;
}

/**
 * cwd is the run's (through the resident host, the client's): a relative CA file (--ca-file, [egress] ca_files,
 * NODE_EXTRA_CA_CERTS) is its file, as in-process, never one in the directory the host was started in.
 */
export async function prepareExecNet(opts: { net: NetGrants; secrets: readonly ExecSecret[]; endpoints: readonly string[]; caFiles: readonly string[]; config: UserConfig["egress"] | undefined; hostEnv: Record<string, string>; cwd: string }): Promise<ExecNet> {
  const { grantsHost, needsInspection } = await import("../policy/net-grants.js");
  const { placeholderFor } = await import("../secrets/grant.js");
  const { headerSafe } = await import("../net/placeholders.js");
  const { endpointUrl, parseEndpoint, EndpointError } = await import("../net/endpoint.js");
  const placeholders: PlaceholderSecret[] = [];
  // This run's own placeholders (through the resident host, other runs share the process).
  const runSalt = randomBytes(16).toString("hex");
  const env: Record<string, string> = {};
  for (const s of opts.secrets) {
    if (!s.hosts) continue;
    for (const h of s.hosts)
      if (!grantsHost(opts.net, h)) throw new VakError("bad-input", `--secret ${s.name}=${s.ref}@${s.hosts.join(",")}: no --allow-net grants ${h}, so the secret could go nowhere; grant it with --allow-net ${h}`);
    if (!headerSafe(s.value)) throw new VakError("bad-input", `--secret ${s.name}=${s.ref}: its value cannot go in an HTTP header (control characters, surrounding spaces, or over 8 KiB)`);
    const placeholder = placeholderFor(s.ref, runSalt);
    placeholders.push({ ref: s.ref, placeholder, value: s.value, hosts: s.hosts });
    env[s.name] = placeholder;
  }
  const endpoints: Endpoint[] = [];
  for (const spec of opts.endpoints) {
    let e: Endpoint;
    try {
      e = parseEndpoint(spec);
    } catch (err) {
      if (err instanceof EndpointError) throw new VakError("bad-input", err.message);
      throw err;
    }
    if (!grantsHost(opts.net, `${e.host.kind === "name" ? e.host.name : e.host.ip}:${e.port}`))
      throw new VakError("bad-input", `--endpoint ${spec}: no --allow-net grants ${e.url}; an endpoint reaches only what the grants allow`);
    if (endpoints.some((x) => x.name === e.name)) throw new VakError("bad-input", `--endpoint ${e.variable}: given twice`);
    endpoints.push(e);
    env[e.variable] = endpointUrl(e);
  }
  const caFiles = [...(opts.config?.ca_files ?? []), ...opts.caFiles].map((f) => resolve(opts.cwd, f));
  const terminate = needsInspection(opts.net) || placeholders.length > 0;
  const needTrust = terminate || endpoints.some((e) => e.scheme === "https");
  let tls: RunTls | undefined;
  let gateTls: GateOptions["tls"];
  if (needTrust || caFiles.length) {
    const { prepareRunTls } = await import("../net/tls-run.js");
    const warm = opts.net.allow.flatMap((r): Host[] => (r.host.kind === "name" ? [{ kind: "name", name: r.host.name }] : r.host.kind === "ip" ? [canonicalHost(r.host.ip)] : []));
    // The run's environment, not this process's: through the resident host, the client's NODE_EXTRA_CA_CERTS and PATH.
    const extra = opts.hostEnv.NODE_EXTRA_CA_CERTS;
    const trustVars = extra ? { ...opts.hostEnv, NODE_EXTRA_CA_CERTS: resolve(opts.cwd, extra) } : opts.hostEnv;
    tls = await prepareRunTls({ terminate, caFiles, env: trustVars, existingEnv: opts.hostEnv, forceTrust: needTrust, warm });
    if (tls) {
      Object.assign(env, tls.env);
      gateTls = tls.gate;
    }
  }
  let upstreamProxy: GateOptions["upstreamProxy"];
  if (opts.config?.upstream_proxy) {
    const { parseUpstreamProxy, UpstreamProxyError } = await import("../net/upstream-proxy.js");
    try {
      upstreamProxy = parseUpstreamProxy(opts.config.upstream_proxy);
    } catch (e) {
      if (e instanceof UpstreamProxyError) throw new VakError("bad-input", e.message);
      throw e;
    }
  }
  return {
    placeholders, endpoints, tls, env, runtime: tls?.dir ? [tls.dir] : [],
    gate: { tls: gateTls, upstreamProxy, worker: { placeholders, endpoints } },
    close: () => tls?.close(),
  };
}
