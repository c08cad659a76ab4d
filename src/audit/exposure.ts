import { request } from "node:http";
import { checkExposure, type Exposure } from "../server/exposure.js";
import type { AuditContext } from "./context.js";
import type { Check } from "./finding.js";

/**
 * `vak serve`'s exposure, from the user's [server] table: what `vak serve`
 * would refuse to start with, a bind beyond loopback and how its TLS is
 * done. With --deep, the live server on loopback is asked, as an attacker's
 * page would, with a foreign Host (DNS rebinding) and a foreign Origin; it
 * must refuse both.
 */
export function exposureChecks(ctx: AuditContext): { checks: Check[]; exposure: Exposure | undefined } {
  const cfg = ctx.config?.server;
  if (!cfg) return { checks: [], exposure: undefined };
  let e: Exposure;
  try {
    e = checkExposure(cfg);
  } catch (err) {
    return { exposure: undefined, checks: [{ id: "exposure.invalid", severity: "critical", path: ctx.configPath, fixable: false, title: "vak serve would refuse this [server] config", detail: (err as Error).message, fix: "correct [server] as the message says" }] };
  }
  const out: Check[] = [];
  if (!e.loopback)
    out.push({ id: "exposure.not-loopback", severity: "warn", path: ctx.configPath, fixable: false, title: "vak serve listens beyond this machine",
      detail: `[server] host = "${e.bindHost}": reachable from the network as ${e.trustedHosts.join(", ")}, with TLS ${e.tls === "self" ? "by vak itself" : "by a proxy you said terminates it"}`, fix: "bind 127.0.0.1 (remove [server] host) unless you mean it" });
  if (!e.loopback && e.tls === "proxy")
    out.push({ id: "exposure.tls-by-proxy", severity: "info", path: ctx.configPath, fixable: false, title: "TLS is left to a proxy",
      detail: "[server] tls_terminated_by_proxy = true: between the proxy and vak the token and cookie travel in the clear", fix: "set tls_cert and tls_key so vak speaks TLS itself" });
  if (e.terminal)
    out.push({ id: "exposure.terminal", severity: "info", path: ctx.configPath, fixable: false, title: "the web terminal is on",
      detail: "[server] terminal = true: a shell in the browser, inside the session's sandbox, for loopback peers on loopback names only", fix: "remove [server] terminal when you do not use it" });
  return { checks: out, exposure: e };
}

interface Answer {
  status: number;
}

/** GET / is public (the client's page), so the Host and Origin guards are what answer, not the token check. */
function ask(host: string, port: number, headers: Record<string, string>): Promise<Answer | undefined> {
  return new Promise((resolve) => {
    const req = request({ host, port, path: "/", method: "GET", headers, timeout: 3000, setHost: false }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
    req.end();
  });
}

/** --deep: the live server, on loopback only. A server bound elsewhere is not probed from here. */
export async function deepExposureChecks(e: Exposure | undefined): Promise<Check[]> {
  if (!e) return [];
  const reachable = e.loopback || e.bindHost === "0.0.0.0" || e.bindHost === "::";
  if (!reachable || e.port === 0 || e.tls === "self")
    return [{ id: "exposure.deep-skipped", severity: "info", fixable: false, title: "the live server was not probed",
      detail: e.port === 0 ? "[server] port is not set: there is no fixed port to probe" : e.tls === "self" ? "the server speaks TLS itself; --deep probes plain HTTP on loopback only" : `the server binds ${e.bindHost}, not loopback; --deep probes loopback only`, fix: "set [server] port to probe a running vak serve" }];
  const addr = e.loopback ? e.bindHost : "127.0.0.1";
  const own = `${addr.includes(":") ? `[${addr}]` : addr}:${e.port}`;
  const base = await ask(addr, e.port, { host: own });
  if (!base)
    return [{ id: "exposure.deep-not-running", severity: "info", fixable: false, title: "no vak serve answers on the configured port", detail: `nothing answered on ${own}`, fix: "start vak serve to probe it" }];
  const out: Check[] = [];
  const rebound = await ask(addr, e.port, { host: "rebind.attacker.example" });
  if (rebound && rebound.status !== 421 && rebound.status !== 400)
    out.push({ id: "exposure.deep-foreign-host", severity: "critical", fixable: false, title: "the live server answers to a foreign Host name",
      detail: `${own} answered ${rebound.status} to Host: rebind.attacker.example (a DNS rebinding page's request), not 421`, fix: "upgrade Vak; restart vak serve" });
  const foreign = await ask(addr, e.port, { host: own, origin: "http://attacker.example" });
  if (foreign && foreign.status !== 403)
    out.push({ id: "exposure.deep-foreign-origin", severity: "critical", fixable: false, title: "the live server answers a request from another site's page",
      detail: `${own} answered ${foreign.status} to Origin: http://attacker.example, not 403`, fix: "upgrade Vak; restart vak serve" });
  return out;
}
