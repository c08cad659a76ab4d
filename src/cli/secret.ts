import { openJournal } from "../journal/open.js";
import { VakError } from "../policy/errors.js";
import { loadUserConfig } from "../policy/config.js";
import { SECRET_NAME, SecretStore } from "../secrets/store.js";
import { fmt, own, padded, processOutput } from "./output.js";

/** Reads a value without echoing it: from a terminal with echo off, else all of stdin. */
async function readValue(name: string): Promise<string> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    let data = "";
    for await (const chunk of stdin) data += chunk;
    return data.replace(/\r?\n$/, "");
  }
  const { err } = processOutput();
  err.prompt(fmt`value for ${name} (not shown): `);
  stdin.setRawMode(true);
  stdin.resume();
  let value = "";
  try {
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        for (const ch of d.toString("utf8")) {
          if (ch === "\r" || ch === "\n") return (stdin.off("data", onData), resolve());
          if (ch === "\u0003") return (stdin.off("data", onData), reject(new VakError("bad-input", "cancelled")));
          if (ch === "\u007f") value = value.slice(0, -1);
          else value += ch;
        }
      };
      stdin.on("data", onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    err.line(own(""));
  }
  return value;
}

export async function secretSet(name: string): Promise<number> {
  if (!SECRET_NAME.test(name)) throw new VakError("bad-input", `"${name}" is not a valid secret name (letters, digits, _ . -)`);
  const store = new SecretStore();
  store.set(name, await readValue(name));
  processOutput().err.line(fmt`stored ${name} in ${store.path} (mode 0600); refer to it as secret:${name}`);
  return 0;
}

export function secretRemove(name: string): number {
  const store = new SecretStore();
  if (!store.remove(name)) throw new VakError("bad-input", `no secret named ${name} in ${store.path}`);
  processOutput().err.line(fmt`removed ${name}`);
  return 0;
}

/** Names, where each comes from, and who used it (from the journal); never a value. */
export async function secretList(opts: { json?: boolean }): Promise<number> {
  const store = new SecretStore();
  const config = loadUserConfig();
  const rows = [
    ...store.names().map((n) => ({ ref: `secret:${n}`, source: store.path })),
    ...Object.entries(config.secret_commands).map(([n, argv]) => ({ ref: `cmd:${n}`, source: `command: ${argv[0]}` })),
  ];
  const uses = new Map<string, Set<string>>();
  const journal = await openJournal({ config });
  try {
    for (const r of rows)
      for (const e of await journal.search(`"${r.ref}"`, { limit: 1000 })) {
        const p = e.payload as { name?: string; recipient?: string };
        if (e.kind !== "secret.used" || p.name !== r.ref) continue;
        const set = uses.get(r.ref) ?? new Set();
        set.add(`${e.actor.component} → ${p.recipient}`);
        uses.set(r.ref, set);
      }
  } finally {
    await journal.close();
  }
  const out = rows.map((r) => ({ ...r, usedBy: [...(uses.get(r.ref) ?? [])] }));
  const print = processOutput().out;
  if (opts.json) print.json(out);
  else if (!out.length) print.line(own("no secrets; add one with: vak secret set NAME (env:NAME references need none)"));
  else for (const r of out) print.line(fmt`${padded(r.ref, 30)} ${r.source}${r.usedBy.length ? fmt`${own(`\n${" ".repeat(31)}`)}used by ${r.usedBy.join(", ")}` : ""}`);
  return 0;
}
