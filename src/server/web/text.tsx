import type { Shown } from "../wire.js";

/**
 * Text from a model, a tool or a command, shown as text: Preact puts it in
 * text nodes, never in HTML. The server has redacted it and shown hidden
 * characters as escapes; if it was cut, the cut is said.
 */
export function ShownText({ value, block = true }: { value: Shown; block?: boolean }) {
  const cut = value.bytes - value.shownBytes;
  const body = block ? <pre class="untrusted">{value.text}</pre> : <span class="untrusted">{value.text}</span>;
  return (
    <>
      {body}
      {cut > 0 ? <p class="cut">… {cut.toLocaleString()} more bytes not shown here ({value.bytes.toLocaleString()} in all)</p> : null}
    </>
  );
}

export function time(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}
