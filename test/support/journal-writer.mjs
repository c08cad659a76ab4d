// A Vak host's journal writer, as a process of its own: appends events to its
// sessions as fast as it can and reports each acknowledged one on stdout
// ("acked SESSION SESSION_SEQ N"), until it has written LIMIT events (then it
// ends its sessions and says "done") or is killed. Used to prove that kill -9
// loses no acknowledged event and that hosts sharing a journal lose and
// reorder nothing. argv: TARGET (a SQLite path or a postgres:// URL) NAME [SESSIONS] [LIMIT]
const { openJournal } = await import(new URL("../../dist/journal/open.js", import.meta.url).href);
const [target, name, sessionCount = "1", limitText = "0"] = process.argv.slice(2);
const limit = Number(limitText);
const j = await openJournal(target.startsWith("postgres") ? { url: target, ingest: false } : { path: target, ingest: false });
const sessions = Array.from({ length: Number(sessionCount) }, (_, i) => j.startSession({ kind: "test", title: `${name} ${i}` }));
let n = 0;
while (!limit || n < limit) {
  const burst = [];
  for (const s of sessions) for (let k = 0; k < 25; k++) burst.push(s.append("tool.result", { component: name }, 1, { op: "burst", ok: true, writer: name, n: ++n, pad: "x".repeat(200) }));
  const stored = await Promise.all(burst);
  process.stdout.write(stored.map((e) => `acked ${e.session} ${e.sessionSeq} ${e.payload.n}\n`).join(""));
}
await Promise.all(sessions.map((s) => s.end("ok")));
await j.close();
process.stdout.write("done\n");
