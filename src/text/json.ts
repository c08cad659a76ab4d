/**
 * JSON for output that a person's terminal may show (`--json`, `vak journal
 * export`): the same value JSON.stringify gives, with every character the
 * neutraliser would escape written as a \u escape too. JSON.stringify already
 * escapes C0 controls and lone surrogates; it leaves DEL, the C1 controls
 * (U+0080–U+009F), bidi and zero-width characters and U+2028/U+2029 raw, and
 * a terminal obeys those. Outside strings JSON is ASCII, so replacing them in
 * the text changes no value.
 */
const RAW_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\u115f\u1160\u180b-\u180f\u3164\uffa0]/gu;

const u = (unit: number) => `\\u${unit.toString(16).padStart(4, "0")}`;

export function jsonText(value: unknown, space?: number): string {
  const text = JSON.stringify(value, undefined, space) ?? "null";
  // A character past U+FFFF is two UTF-16 units: each is written as its own escape.
  return text.replace(RAW_IN_JSON, (c) => [...Array(c.length).keys()].map((i) => u(c.charCodeAt(i))).join(""));
}
