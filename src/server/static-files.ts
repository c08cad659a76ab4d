import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative, sep } from "node:path";
import { VakError } from "../policy/errors.js";

/**
 * The web client's files (dist/web, built by Vite at install), read once at
 * start-up into memory: the server never maps a request path onto the file
 * system, so no path, link or `..` can reach another file.
 */
export interface StaticFile {
  body: Buffer;
  type: string;
  /** Hashed asset names never change content: cacheable for good. */
  immutable: boolean;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".woff2": "font/woff2",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
};

const MAX_FILES = 200;

export function loadStaticFiles(dir: string): Map<string, StaticFile> {
  if (!existsSync(join(dir, "index.html"))) throw new VakError("unsupported", `the web client is not built (${dir}/index.html is missing); run npm ci (or npm run build:js) in the Vak package`);
  const files = new Map<string, StaticFile>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && files.size < MAX_FILES) {
        const url = `/${relative(dir, p).split(sep).join("/")}`;
        files.set(url, { body: readFileSync(p), type: TYPES[extname(p)] ?? "application/octet-stream", immutable: url.startsWith("/assets/") });
      }
    }
  };
  walk(dir);
  files.set("/", files.get("/index.html")!);
  return files;
}
