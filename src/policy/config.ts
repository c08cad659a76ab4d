import { readFileSync } from "node:fs";
import { parse } from "smol-toml";
import { z } from "zod";
import { ENV_NAME } from "./env.js";
import { VakError } from "./errors.js";
import { McpServerSchema, SERVER_NAME } from "./mcp-servers.js";
import { parseProfilesFile, userConfigPath } from "./profiles-file.js";
import { tomlWhere } from "./toml-where.js";

/**
 * The user's configuration (~/.config/vak/config.toml): the trusted tier.
 * A repository's files can never set anything here. Unknown keys are refused,
 * so that a typo does not silently leave a setting at its default.
 */
export const UserConfigSchema = z
  .object({
    journal: z
      .object({
        /** Days of journal to keep; `vak journal prune` without --before removes older events. */
        retention_days: z.number().int().positive().optional(),
        /** A PostgreSQL journal shared by many hosts: a postgres:// URL without a password, or a reference to one (env:NAME, secret:NAME, cmd:NAME). */
        url: z.string().min(1).optional(),
        /** A reference to the password of url (secret:NAME, env:NAME, cmd:NAME). */
        password: z.string().regex(/^(secret|env|cmd):/, "a password is named by reference: secret:NAME, env:NAME or cmd:NAME").optional(),
        /** The database owner's connection, for `vak journal init-db` and `prune` (same forms as url). */
        admin_url: z.string().min(1).optional(),
        admin_password: z.string().regex(/^(secret|env|cmd):/, "a password is named by reference: secret:NAME, env:NAME or cmd:NAME").optional(),
      })
      .strict()
      .default({}),
    model: z
      .object({
        /** The model `vak run` and `vak` use without --model: "provider:model". */
        default: z.string().regex(/^[a-z0-9_-]+:.+$/, 'write it as "provider:model"').optional(),
      })
      .strict()
      .default({}),
    /** Model providers by name; these add to or replace the built-in openai, anthropic and ollama. */
    providers: z
      .record(
        z.string().regex(/^[a-z0-9_-]+$/, "provider names are lower-case letters, digits, - and _"),
        z
          .object({
            kind: z.enum(["openai", "anthropic"]),
            base_url: z.url({ protocol: /^https?$/ }),
            /** The host environment variable that holds the key; the key itself is never written in a file. */
            api_key_env: z.string().regex(ENV_NAME, "not an environment variable name").optional(),
          })
          .strict(),
      )
      .default({}),
    /** Commands that print a secret (password managers), for cmd:NAME references: name = ["pass", "show", "github"]. */
    secret_commands: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/), z.array(z.string().min(1)).min(1)).default({}),
    /** MCP servers whose tools `vak` and `vak run` get as mcp__NAME__tool, each with its own grants (src/mcp/). */
    mcp_servers: z.record(z.string().regex(SERVER_NAME, "server names are lower-case letters, digits, - and _ (at most 40)"), McpServerSchema).default({}),
    egress: z
      .object({
        /** CA files (PEM) trusted for upstream servers, besides the system store: a company CA. */
        ca_files: z.array(z.string().min(1)).default([]),
        /** A proxy the host itself must use (http://host:port): the gate opens every upstream connection through it with CONNECT. */
        upstream_proxy: z.url({ protocol: /^http$/ }).optional(),
      })
      .strict()
      .default({ ca_files: [] }),
    approvals: z
      .object({
        /** "ask" (the default) or "allow": whether writes inside the grant wait for a person. */
        write: z.enum(["ask", "allow"]).optional(),
        exec: z.enum(["ask", "allow"]).optional(),
        timeout_seconds: z.number().int().positive().optional(),
      })
      .strict()
      .default({}),
    /**
     * `vak serve`: where it listens and who may reach it. User tier in full: a
     * repository's files can choose no interface, no host name, no terminal.
     * What is consistent (a wildcard, an exposed bind without trusted names or
     * TLS) is checked when the server starts (src/server/exposure.ts).
     */
    server: z
      .object({
        /** The address to bind, an IP literal (default 127.0.0.1). Anything but loopback exposes the server. */
        host: z.string().min(1).max(64).optional(),
        port: z.number().int().min(0).max(65535).optional(),
        /** Exact host names (host or host:port) the Host header may carry besides loopback's; no wildcards. */
        trusted_hosts: z.array(z.string().min(1).max(253)).max(32).default([]),
        /** A real shell in the browser, inside the session's sandbox; loopback-only whatever host is bound. */
        terminal: z.boolean().default(false),
        /** PEM files: the server speaks HTTPS itself. */
        tls_cert: z.string().min(1).optional(),
        tls_key: z.string().min(1).optional(),
        /** An exposed bind without tls_cert: the statement that a proxy you trust terminates TLS in front of it. */
        tls_terminated_by_proxy: z.boolean().default(false),
      })
      .strict()
      .default({ trusted_hosts: [], terminal: false, tls_terminated_by_proxy: false }),
    /** `vak exec`'s defaults and named profiles: checked by profiles-file.ts (no zod on exec's start-up), with their lines. */
    exec: z.record(z.string(), z.unknown()).optional(),
    profiles: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type UserConfig = z.infer<typeof UserConfigSchema>;

export { userConfigPath };

export function loadUserConfig(path: string = userConfigPath()): UserConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return UserConfigSchema.parse({});
    throw new VakError("bad-input", `${path}: cannot be read (${(e as Error).message})`);
  }
  let data: unknown;
  try {
    data = parse(text);
  } catch (e) {
    throw new VakError("bad-input", `${path}: not valid TOML: ${(e as Error).message.split("\n")[0]}`);
  }
  const r = UserConfigSchema.safeParse(data);
  if (!r.success) {
    const i = r.error.issues[0]!;
    const line = tomlWhere(text)(i.path.map(String));
    throw new VakError("bad-input", `${path}${line ? `:${line}` : ""}: ${i.path.join(".") || "(top level)"}: ${i.message}`);
  }
  parseProfilesFile(path, text, "user");
  return r.data;
}
