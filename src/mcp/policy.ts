import type { PinVerdict } from "./pins.js";

/**
 * Per-tool policy for one server, decided in pure functions. `--deny-tool`
 * hides a tool and refuses its calls; `--ask` puts each call to the user
 * first. A tool whose definition is not the pinned one is withheld until
 * trusted. Annotations (readOnlyHint and the rest) come from the server: they
 * may be shown to the user, and never decide anything here.
 */
export interface ToolPolicy {
  server: string;
  deny: ReadonlySet<string>;
  ask: ReadonlySet<string> | "all";
}

export type CallDecision =
  | { action: "allow" }
  | { action: "ask" }
  | { action: "deny"; rule: "deny-tool" | "not-listed" | "withheld"; reason: string };

/** How `vak mcp trust NAME` is written for this server, quoted for a shell when it needs to be. */
export function trustCommand(server: string): string {
  return /^[A-Za-z0-9._@/:=-]+$/.test(server) ? `vak mcp trust ${server}` : `vak mcp trust '${server.replace(/'/g, "'\\''")}'`;
}

/** Whether a listed tool is passed on to the client. */
export function listed(p: ToolPolicy, name: string, verdict: PinVerdict): boolean {
  return !p.deny.has(name) && (verdict === "pinned" || verdict === "first-sight");
}

/**
 * Decides one tools/call. `verdict` is the tool's pin verdict from the
 * server's latest listing, undefined when the server has not listed it.
 */
export function decideCall(p: ToolPolicy, name: string, verdict: PinVerdict | undefined): CallDecision {
  if (p.deny.has(name)) return { action: "deny", rule: "deny-tool", reason: `tool ${name} of ${p.server} is refused by --deny-tool` };
  if (verdict === undefined)
    return { action: "deny", rule: "not-listed", reason: `tool ${name} is not among the tools ${p.server} lists; only listed, pinned tools can be called` };
  if (verdict === "duplicate")
    return { action: "deny", rule: "withheld", reason: `tool ${name} is listed more than once by ${p.server}, with different definitions; it is withheld` };
  if (verdict === "over-limit")
    return { action: "deny", rule: "withheld", reason: `tool ${name} of ${p.server} is withheld: its definition is larger than Vak keeps` };
  if (verdict === "changed" || verdict === "new")
    return {
      action: "deny", rule: "withheld",
      reason: `tool ${name} of ${p.server} is withheld: its definition ${verdict === "changed" ? "changed since you trusted it" : "is new since you trusted this server"}; review it with \`${trustCommand(p.server)}\``,
    };
  if (p.ask === "all" || p.ask.has(name)) return { action: "ask" };
  return { action: "allow" };
}
