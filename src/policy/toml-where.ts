/**
 * Where a key is in a TOML file, for messages that name the line. smol-toml
 * gives positions for syntax errors only, so the lines of tables and keys are
 * found here by reading the text as TOML lays it out: `[table.name]` headers
 * (quoted parts unquoted), `key =` and dotted `a.b =` lines, with multi-line
 * strings skipped. Only for messages: nothing is decided on what this finds.
 */
export type Where = (path: readonly string[]) => number | undefined;

/** Splits a dotted TOML key (`profiles."my tools".allow_read`) into its parts. */
function keyParts(s: string): string[] {
  const parts: string[] = [];
  let cur = "";
  let quote: string | undefined;
  for (const ch of s.trim()) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else cur += ch;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === ".") {
      parts.push(cur.trim());
      cur = "";
    } else cur += ch;
  }
  parts.push(cur.trim());
  return parts;
}

/** The key part of a `key = value` line, if the line is one. */
function assignedKey(line: string): string | undefined {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (ch === "=") return line.slice(0, i);
    else if (ch === "#" || ch === "[" || ch === "{") return undefined;
  }
  return undefined;
}

/** Lines (1-based) of every table and key, by their full dotted path. */
export function tomlWhere(text: string): Where {
  return whereIn(tomlLines(text));
}

/** The lines tomlWhere finds, keyed by the path's parts joined with NUL (the build keeps the presets' as JSON). */
export function tomlLines(text: string): Map<string, number> {
  const lines = new Map<string, number>();
  let table: string[] = [];
  let inString: string | undefined;
  const all = text.split("\n");
  for (let i = 0; i < all.length; i++) {
    const line = all[i]!;
    if (inString) {
      if (line.split(inString).length % 2 === 0) inString = undefined;
      continue;
    }
    const header = /^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$/.exec(line);
    if (header) {
      table = keyParts(header[1]!);
      // [a.b] also defines a: its first line names a too.
      for (let n = 1; n <= table.length; n++) {
        const k = table.slice(0, n).join("\0");
        if (!lines.has(k)) lines.set(k, i + 1);
      }
      continue;
    }
    const key = assignedKey(line);
    if (key !== undefined && key.trim() !== "") {
      const path = [...table, ...keyParts(key)];
      for (let n = table.length + 1; n <= path.length; n++) {
        const k = path.slice(0, n).join("\0");
        if (!lines.has(k)) lines.set(k, i + 1);
      }
    }
    for (const q of ['"""', "'''"]) if (line.split(q).length % 2 === 0) inString = q;
  }
  return lines;
}

/** A Where over lines found by tomlLines: a path's line, or its nearest enclosing table's. */
export function whereIn(lines: ReadonlyMap<string, number>): Where {
  return (path) => {
    // The key itself, else the nearest enclosing table or key that was found.
    for (let n = path.length; n > 0; n--) {
      const found = lines.get(path.slice(0, n).join("\0"));
      if (found !== undefined) return found;
    }
    return undefined;
  };
}
