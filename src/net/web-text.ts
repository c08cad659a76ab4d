import { hiddenReplaced } from "../text/visible.js";

/**
 * A fetched page reduced to text for a model: what a reader would see, not
 * markup. Scripts, styles, templates, SVG, comments and the head are dropped
 * whole; block elements become line breaks; links keep their target in
 * brackets; entities are decoded; runs of blank space collapse. The input is
 * hostile: this is one linear scan of the string (no DOM, no evaluation, no
 * backtracking regular expression over the page), and the output is bounded.
 * The result is still untrusted text: the caller fences it. Characters that
 * could hide text or drive a terminal (controls, format, bidi, zero-width, tag
 * characters, invisible fillers) become spaces: the neutraliser's set
 * (src/text/visible.ts), so there is one list of them.
 */
const DROP = new Set(["script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas", "title"]);
const BLOCK = new Set([
  "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6",
  "pre", "blockquote", "br", "hr", "dd", "dt", "dl", "figure", "figcaption", "form", "fieldset", "body", "html",
]);
const NAMED: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", mdash: "—", ndash: "–", hellip: "…", copy: "©", reg: "®", laquo: "«", raquo: "»", rsquo: "’", lsquo: "‘", rdquo: "”", ldquo: "“" };

function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,8});/gi, (m, e: string) => {
    if (e[0] !== "#") return NAMED[e.toLowerCase()] ?? m;
    const code = e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
    if ((code < 0x20 && code !== 0x0a && code !== 0x09) || (code >= 0x7f && code < 0xa0) || (code >= 0xd800 && code < 0xe000) || code > 0x10ffff) return " ";
    return String.fromCodePoint(code);
  });
}

function attr(tag: string, name: string): string | undefined {
  const m = new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s>]+))`, "i").exec(tag);
  return m ? (m[1] ?? m[2] ?? m[3] ?? "").trim() : undefined;
}

export function htmlToText(html: string, maxChars = 100_000): string {
  const src = html.length > 4 * maxChars + 1_000_000 ? html.slice(0, 4 * maxChars + 1_000_000) : html;
  const lower = src.toLowerCase();
  const out: string[] = [];
  // The title, wherever it is (usually in the head, which is dropped whole below).
  let title = "";
  const ts = lower.indexOf("<title");
  const tgt = ts < 0 ? -1 : src.indexOf(">", ts);
  const te = tgt < 0 ? -1 : lower.indexOf("</title", tgt);
  if (te > 0) title = src.slice(tgt + 1, Math.min(te, tgt + 1 + 2000));
  let href: string | undefined;
  let i = 0;
  while (i < src.length) {
    const lt = src.indexOf("<", i);
    if (lt < 0) {
      out.push(src.slice(i));
      break;
    }
    out.push(src.slice(i, lt));
    if (src.startsWith("<!--", lt)) {
      const end = src.indexOf("-->", lt + 4);
      i = end < 0 ? src.length : end + 3;
      continue;
    }
    const gt = src.indexOf(">", lt + 1);
    if (gt < 0) break; // an unterminated tag: nothing after it is text
    const tag = src.slice(lt, gt + 1);
    const m = /^<\/?([a-zA-Z][a-zA-Z0-9-]*)/.exec(tag);
    i = gt + 1;
    if (!m) {
      out.push(" ");
      continue;
    }
    const name = m[1]!.toLowerCase();
    const closing = tag[1] === "/";
    if (!closing && DROP.has(name)) {
      const end = lower.indexOf(`</${name}`, i);
      const close = end < 0 ? -1 : src.indexOf(">", end);
      i = close < 0 ? src.length : close + 1;
      out.push(" ");
      continue;
    }
    if (name === "a") {
      if (!closing) {
        const h = attr(tag, "href");
        href = h && !/^(javascript|data|vbscript):/i.test(h) ? h : undefined;
      } else if (href !== undefined) {
        out.push(` [${href}]`);
        href = undefined;
      }
      continue;
    }
    out.push(BLOCK.has(name) ? "\n" : " ");
  }
  let s = hiddenReplaced(decodeEntities(out.join("")), " ");
  s = s.replace(/[ \t\f\r]+/g, " ").replace(/ *\n */g, "\n").replace(/\n{3,}/g, "\n\n").trim();
  const t = hiddenReplaced(decodeEntities(title.replace(/<[^>]*>/g, " ")), " ").replace(/\s+/g, " ").trim();
  const text = t ? `${t}\n\n${s}` : s;
  return text.length > maxChars ? `${text.slice(0, maxChars)}\n…[${text.length - maxChars} more characters cut]` : text;
}
