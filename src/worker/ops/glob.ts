import { cut, type OpResult } from "./result.js";
import { globToRegExp, walk } from "./walk.js";

const MAX_MATCHES = 2000;

/** Files under path whose relative path matches pattern (a pattern without '/' matches the file name at any depth). */
export function glob(op: { pattern: string; path: string }): OpResult {
  const re = globToRegExp(op.pattern.includes("/") ? op.pattern : `**/${op.pattern}`);
  const found: string[] = [];
  for (const rel of walk(op.path)) {
    if (!re.test(rel)) continue;
    found.push(rel);
    if (found.length >= MAX_MATCHES) break;
  }
  found.sort();
  const more = found.length >= MAX_MATCHES;
  return { ...cut(found.join("\n") + (more ? `\n[... stopped at ${MAX_MATCHES} matches ...]` : "")), data: { matches: found.length, more } };
}
