import { realpathSync } from "node:fs";
import { basename } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isWithin } from "../policy/paths.js";

/**
 * A client's roots never widen what a server can reach: the server is told
 * the intersection of the roots and the grants its sandbox holds. A root
 * inside a grant is kept (as its canonical path); a root that contains grants
 * becomes those grants; a root outside every grant, one that does not exist,
 * and anything but a local file: URI are dropped. The sandbox enforces the
 * grants whatever the server is told; this keeps what it is told true.
 */
export interface Root {
  uri: string;
  name?: string;
  _meta?: Record<string, unknown>;
}

/** The host directories the server's sandbox can read (the workspace and path grants, deny rules applied), canonical. */
export interface Reach {
  paths: readonly string[];
  denied: readonly string[];
}

function rootPath(uri: string): string | undefined {
  if (!uri.startsWith("file://")) return undefined;
  try {
    const p = fileURLToPath(uri); // refuses a host other than localhost
    return realpathSync.native(p);
  } catch {
    return undefined;
  }
}

export function intersectRoots(roots: readonly Root[], reach: Reach): Root[] {
  const out = new Map<string, Root>();
  const add = (path: string, like: Root, name?: string) => {
    if (reach.denied.some((d) => isWithin(path, d)) || out.has(path)) return;
    const r: Root = { uri: pathToFileURL(path).href };
    const n = name ?? like.name;
    if (n !== undefined) r.name = n;
    if (like._meta !== undefined) r._meta = like._meta;
    out.set(path, r);
  };
  for (const root of roots) {
    const p = rootPath(root.uri);
    if (p === undefined) continue;
    if (reach.paths.some((g) => isWithin(p, g))) add(p, root);
    else for (const g of reach.paths) if (isWithin(g, p)) add(g, root, root.name === undefined ? basename(g) : `${root.name} (${basename(g)})`);
  }
  return [...out.values()];
}
