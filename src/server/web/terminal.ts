import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import "./style.css";

/**
 * The web terminal's page: xterm.js over /api/sessions/ID/terminal. The
 * shell runs in the session's sandbox with its grants; what it prints is a
 * terminal's bytes, which xterm.js interprets inside this page only. Links it
 * would open (OSC 8, URLs) are not opened, and nothing writes the clipboard.
 * Keystrokes go as binary frames, a resize as a text frame.
 */
/**
 * xterm.js styles its rows by inserting <style> elements, which the server's
 * CSP (style-src 'self', no 'unsafe-inline') blocks. Rather than loosen the
 * policy, each such element's rules are mirrored into a constructed
 * stylesheet, which is this page's own code applying its own library's CSS.
 */
function mirrorInsertedStyles(): void {
  const sheets = new Map<HTMLStyleElement, CSSStyleSheet>();
  const sync = (el: HTMLStyleElement) => {
    let sheet = sheets.get(el);
    if (!sheet) {
      sheet = new CSSStyleSheet();
      sheets.set(el, sheet);
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
      new MutationObserver(() => sync(el)).observe(el, { childList: true, characterData: true, subtree: true });
    }
    sheet.replaceSync(el.textContent ?? "");
  };
  new MutationObserver((muts) => {
    for (const m of muts) for (const n of m.addedNodes) if (n instanceof HTMLStyleElement) sync(n);
  }).observe(document, { childList: true, subtree: true });
}
mirrorInsertedStyles();

const id = location.hash.slice(1);
const status = document.getElementById("status")!;
if (!/^[0-9a-z]{1,16}-[0-9a-f]{10}$/.test(id)) status.textContent = "No session named in the URL.";
else {
  const term = new Terminal({ cursorBlink: true, convertEol: false, scrollback: 5000, linkHandler: { activate: () => undefined, allowNonHttpProtocols: false } });
  term.open(document.getElementById("term")!);
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${proto}//${location.host}/api/sessions/${id}/terminal`);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  const size = () => {
    const cols = Math.max(20, Math.floor((document.getElementById("term")!.clientWidth || 800) / 9));
    const rows = Math.max(8, Math.floor((innerHeight - 60) / 17));
    term.resize(cols, rows);
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols, rows }));
  };
  ws.onopen = () => {
    status.textContent = `A shell in session ${id}'s sandbox, with its grants. Closing this page ends it.`;
    size();
    term.focus();
  };
  ws.onmessage = (e) => term.write(typeof e.data === "string" ? e.data : new Uint8Array(e.data as ArrayBuffer));
  ws.onclose = (e) => {
    status.textContent = `The terminal closed${e.reason ? `: ${e.reason}` : ""}.`;
  };
  term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)));
  addEventListener("resize", size);
}
