import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import type { UserConfig } from "../policy/config.js";
import { VakError } from "../policy/errors.js";

/**
 * Where `vak serve` listens and which names it answers to, decided from the
 * user's `[server]` config before a socket exists. Exposure is opt-in and
 * never implicit: a bind that is not loopback must name the hosts it answers
 * (else every request would get a 421 nobody can diagnose) and must say how
 * TLS is done (else the token and cookie cross the network in the clear).
 * Every inconsistency is a startup error, never a warning.
 */
export type ServerConfig = UserConfig["server"];

export interface Exposure {
  /** The address bound: always an IP literal, never a name resolved at bind time. */
  bindHost: string;
  port: number;
  /** The bind reaches only this machine. */
  loopback: boolean;
  /** Exact names (lower case, host or host:port) the Host header may carry besides loopback's. */
  trustedHosts: string[];
  /** Who speaks TLS: the server itself, a proxy the user trusts, or no one (loopback only). */
  tls: "self" | "proxy" | "none";
  tlsFiles?: { cert: string; key: string } | undefined;
  /** The web terminal is enabled (it is served to loopback peers on loopback names only, whatever is bound). */
  terminal: boolean;
}

const fail = (message: string): never => {
  throw new VakError("bad-input", `[server] ${message} (in ~/.config/vak/config.toml)`);
};

/** Whether an address literal is loopback (127.0.0.0/8, ::1, and IPv4-mapped loopback). */
export function isLoopbackAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let a = ipaddr.parse(address);
  if (a.kind() === "ipv6" && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
  return a.range() === "loopback";
}

/** A host name as the Host header would carry it: letters, digits, dots and dashes, or an IP literal (IPv6 in brackets), with an optional port. */
const HOST_NAME = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/;

/** One trusted_hosts entry, checked and lower-cased; anything that is not one exact name is refused with why. */
export function checkTrustedHost(entry: string): string {
  const e = entry.trim().toLowerCase();
  if (e.includes("*")) fail(`trusted_hosts: "${entry}" is a wildcard; a wildcard is a DNS rebinding hole with extra steps, so list each exact name`);
  if (e.includes("://") || e.includes("/")) fail(`trusted_hosts: "${entry}" is a URL; list the host name only (host or host:port)`);
  if (e.startsWith(".") || e.endsWith(".")) fail(`trusted_hosts: "${entry}" starts or ends with a dot; list the exact name`);
  const m = HOST_NAME.exec(e);
  if (!m) fail(`trusted_hosts: "${entry}" is not a host name (host or host:port)`);
  if (m![1] !== undefined && (Number(m![1]) < 1 || Number(m![1]) > 65535)) fail(`trusted_hosts: "${entry}" has no valid port`);
  return e;
}

/**
 * The exposure the config asks for, or a VakError that says what is wrong
 * and how to fix it. port overrides the config's (from --port).
 */
export function checkExposure(cfg: ServerConfig, port?: number): Exposure {
  const bindHost = cfg.host ?? "127.0.0.1";
  if (!isIP(bindHost)) fail(`host = "${bindHost}": write an IP address (127.0.0.1, ::1, or an interface's address); a name would be resolved at bind time`);
  const loopback = isLoopbackAddress(bindHost);
  const trustedHosts = [...new Set(cfg.trusted_hosts.map(checkTrustedHost))];
  const p = port ?? cfg.port ?? 0;
  if (!Number.isInteger(p) || p < 0 || p > 65535) fail(`port ${p} is not a port number`);
  if ((cfg.tls_cert === undefined) !== (cfg.tls_key === undefined)) fail("tls_cert and tls_key go together: set both, or neither");
  const tls = cfg.tls_cert ? "self" : cfg.tls_terminated_by_proxy ? "proxy" : "none";
  if (!loopback) {
    if (trustedHosts.length === 0)
      fail(`host = "${bindHost}" is not loopback, and trusted_hosts is empty: every request would be refused (421). List the exact names clients use, e.g. trusted_hosts = ["vak.example.internal"]`);
    if (tls === "none")
      fail(`host = "${bindHost}" is not loopback: set tls_cert and tls_key, or tls_terminated_by_proxy = true if a proxy you trust terminates TLS in front of vak`);
  }
  return { bindHost, port: p, loopback, trustedHosts, tls, tlsFiles: cfg.tls_cert ? { cert: cfg.tls_cert, key: cfg.tls_key! } : undefined, terminal: cfg.terminal };
}
