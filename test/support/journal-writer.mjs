// Appends events as fast as it can and reports each acknowledged one on stdout,
// until it is killed. Used to prove that kill -9 loses no acknowledged event.
const { Journal } = await import(new URL("../../dist/journal/journal.js", import.meta.url).href);
const j = Journal.open({ path: process.argv[2] });
const s = j.startSession({ kind: "test", title: "burst" });
let n = 0;
for (;;) {
  const burst = Array.from({ length: 50 }, () => s.append("tool.result", { component: "writer" }, 1, { op: "burst", ok: true, n: ++n, pad: "x".repeat(200) }));
  for (const e of await Promise.all(burst)) process.stdout.write(`acked ${e.seq}\n`);
}
