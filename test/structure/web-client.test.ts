import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/paths.js";

// The web client renders what a model, a tool or a command chose as text,
// never as HTML, and loads nothing from anywhere but its own server. These
// hold the source and the built bundle to it (the browser tests try it).

const WEB = join(ROOT, "src/server/web");
const BUILT = join(ROOT, "dist/web");
const sources = readdirSync(WEB).filter((f) => /\.(tsx?|html|css)$/.test(f)).map((f) => [f, readFileSync(join(WEB, f), "utf8")] as const);

describe("the web client", () => {
  it.each([
    ["dangerouslySetInnerHTML", /dangerouslySetInnerHTML/],
    ["innerHTML / outerHTML", /\.(inner|outer)HTML\b/],
    ["insertAdjacentHTML", /insertAdjacentHTML/],
    ["document.write", /document\.write/],
    ["eval or new Function", /\beval\(|new Function\(/],
    ["a string given to setTimeout", /setTimeout\(\s*["'`]/],
    ["DOMParser or createContextualFragment", /DOMParser|createContextualFragment/],
    ["javascript: URLs", /javascript:/i],
  ])("never uses %s", (_what, pattern) => {
    for (const [file, text] of sources) expect(pattern.test(text), file).toBe(false);
  });

  it("its pages load their own module scripts only: no inline script, no external font, stylesheet or CDN", () => {
    for (const page of ["index.html", "terminal.html"]) {
      const html = readFileSync(join(BUILT, page), "utf8");
      for (const tag of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) expect(tag, page).toMatch(/^<script type="module" crossorigin src="\/assets\/[\w.-]+\.js"><\/script>$/);
      expect(html, page).not.toMatch(/\s(src|href)="(https?:)?\/\//);
      expect(html, page).not.toMatch(/\son[a-z]+=/);
    }
  });

  it("its bundle fetches nothing from another origin (no @import, no remote url())", () => {
    for (const f of readdirSync(join(BUILT, "assets"))) {
      const text = readFileSync(join(BUILT, "assets", f), "utf8");
      expect(text, f).not.toMatch(/@import\s/);
      expect(text, f).not.toMatch(/url\(\s*["']?(https?:)?\/\//);
      expect(text, f).not.toMatch(/fonts\.googleapis|cdn\.jsdelivr|unpkg\.com|cdnjs/);
    }
  });
});
