import { closeSync, constants, fstatSync, openSync, readFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { Redactor } from "../secrets/redact.js";
import { parseRef, SecretStore } from "../secrets/store.js";
import type { AuditContext } from "./context.js";
import type { Check } from "./finding.js";

/**
 * Secrets: a config file that holds a credential itself (instead of a
 * reference), references that would not resolve when a session starts, and
 * password-manager commands found through PATH (which a directory earlier in
 * PATH can shadow). No value is ever printed: a finding names the file and
 * the line.
 */
const MAX_FILE = 1 << 20;

function literalLines(path: string): number[] {
  let text: string;
  try {
    // Not through a link at the last component, and bounded: a repository chooses these files.
    const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.size > MAX_FILE) return [];
      text = readFileSync(fd, "utf8");
    } finally {
      closeSync(fd);
    }
  } catch {
    return [];
  }
  const r = new Redactor();
  return text.split("\n").slice(0, 100_000).flatMap((line, i) => (r.text(line) !== line ? [i + 1] : []));
}

export function secretChecks(ctx: AuditContext): Check[] {
  const out: Check[] = [];
  const files: [string, string][] = [[ctx.configPath, "your config"], ...[".vak/config.toml", ".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json"].map((f): [string, string] => [join(ctx.workspace, f), `this repository's ${f}`])];
  for (const [path, tier] of files) {
    const lines = literalLines(path);
    if (lines.length)
      out.push({ id: "secrets.literal", severity: "critical", path, fixable: false, title: `${tier} holds what looks like a credential`,
        detail: `${path}, line${lines.length > 1 ? "s" : ""} ${lines.slice(0, 10).join(", ")}: a credential's shape, written in the file itself`,
        fix: "store it with `vak secret set NAME` and refer to it as secret:NAME (or env:NAME), then rotate the credential: it was in a file" });
  }
  const cfg = ctx.config;
  if (!cfg) return out;
  let store: string[] | undefined;
  let storeError: string | undefined;
  try {
    store = new SecretStore(ctx.storePath).names();
  } catch (e) {
    storeError = (e as Error).message;
  }
  for (const [server, def] of Object.entries(cfg.mcp_servers)) {
    for (const s of def.secrets) {
      let problem: string | undefined;
      try {
        const ref = parseRef(s.ref);
        if (ref.kind === "secret") problem = storeError ? `the secret store cannot be read: ${storeError}` : store!.includes(ref.name) ? undefined : `no secret ${ref.name} in ${ctx.storePath}`;
        else if (ref.kind === "env") problem = ctx.env[ref.name] ? undefined : `this environment has no ${ref.name}`;
        else problem = cfg.secret_commands[ref.name] ? undefined : `no command ${ref.name} in [secret_commands]`;
      } catch (e) {
        problem = (e as Error).message;
      }
      if (problem)
        out.push({ id: "secrets.unresolved", severity: "warn", path: ctx.configPath, fixable: false, title: `a secret reference of the MCP server ${server} does not resolve`,
          detail: `mcp_servers.${server}.secrets: ${s.ref} (into ${s.env}): ${problem}; the server will not start`, fix: `add it (vak secret set NAME, or set the variable), or remove the reference` });
    }
  }
  for (const [name, argv] of Object.entries(cfg.secret_commands))
    if (!isAbsolute(argv[0]!))
      out.push({ id: "secrets.cmd-not-absolute", severity: "warn", path: ctx.configPath, fixable: false, title: `the secret command ${name} is found through PATH`,
        detail: `secret_commands.${name} runs "${argv[0]}": whichever directory of PATH has that name first gets to print the secret (and learns it is asked for)`, fix: `write its absolute path: secret_commands.${name} = ["/usr/bin/${argv[0]}", …]` });
  return out;
}
