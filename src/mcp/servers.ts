import { createHash } from "node:crypto";
import { canonicalJson } from "./pins.js";

export { type McpServerDef, McpServerSchema, SERVER_NAME } from "../policy/mcp-servers.js";

/** The digest a definition is approved under: the same definition, the same hash, wherever it was written. */
export function definitionHash(name: string, def: unknown): string {
  return createHash("sha256").update(canonicalJson({ name, definition: def })).digest("hex");
}
