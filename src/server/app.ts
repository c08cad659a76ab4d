import { Hono } from "hono";
import { api, type ApiDeps } from "./api.js";
import { ServerError } from "./errors.js";
import type { HostPolicy } from "./host-check.js";
import { authGuard, type Env, fetchMetadataGuard, jsonBodies, onlyMethods, originGuard, securityHeaders } from "./middleware.js";
import type { StaticFile } from "./static-files.js";

/**
 * The HTTP application, its guards in a fixed order (ARCHITECTURE.md, "vak
 * serve", says why this order). Before any of them the raw listener has
 * checked the Host header and the request target (listener.ts):
 *
 *   headers → methods → fetch metadata → authentication → origin → JSON bodies → routes
 *
 * Headers wrap everything, so that refusals carry them too; the browser's
 * fetch metadata is read before any credential, so that another site's page
 * cannot even spend the rate limiter; the Origin check comes after
 * authentication because it depends on how the request was authenticated.
 */
export interface AppDeps extends ApiDeps {
  hosts: HostPolicy;
  origins: ReadonlySet<string>;
  files: ReadonlyMap<string, StaticFile>;
  log: (line: string) => void;
}

export function app(d: AppDeps): Hono<Env> {
  const a = new Hono<Env>();
  a.use("*", securityHeaders());
  a.use("*", onlyMethods());
  a.use("*", fetchMetadataGuard());
  a.use("*", authGuard(d.auth, d.hosts));
  a.use("*", originGuard(d.origins));
  a.use("/api/*", ...jsonBodies());
  a.route("/api", api(d));
  a.get("*", (c) => {
    const f = d.files.get(c.req.path);
    if (!f) return c.json({ error: { code: "not-found", message: "no such page" } }, 404);
    c.header("Content-Type", f.type);
    c.header("Cache-Control", f.immutable ? "public, max-age=31536000, immutable" : "no-cache");
    return c.body(new Uint8Array(f.body), 200);
  });
  a.notFound((c) => c.json({ error: { code: "not-found", message: "no such path" } }, 404));
  a.onError((e, c) => {
    if (e instanceof ServerError) return c.json({ error: { code: e.code, message: e.message } }, e.status);
    // Errors of the session (a VakError for a bad model or path) say what to fix; anything else is ours.
    const code = (e as { code?: unknown }).code;
    if (e.name === "VakError" || e.name === "ModelError") return c.json({ error: { code: typeof code === "string" ? code : "bad-input", message: d.filter(e.message) } }, 400);
    d.log(`vak serve: ${c.req.method} ${c.req.path} failed: ${d.filter(e.stack ?? e.message)}`);
    return c.json({ error: { code: "internal", message: "the server failed on this request; see its terminal" } }, 500);
  });
  return a;
}
