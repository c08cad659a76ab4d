// Embedding Vak: a workload with a harness and two tool components, each with
// its own grants, run with a scripted model (swap in a real one with
// `model: "openai:gpt-4.1"`). Run it: node examples/library.mjs
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHost, ScriptedClient } from "vak";

// A throwaway project: docs/ the notes tool may read, and private/ no tool may.
const project = mkdtempSync(join(tmpdir(), "vak-example-"));
mkdirSync(join(project, "docs"));
mkdirSync(join(project, "private"));
writeFileSync(join(project, "docs", "guide.md"), "Deploys happen on Tuesdays.\n");
writeFileSync(join(project, "private", "salaries.csv"), "alice,100\n");

const spec = {
  version: 1,
  name: "example-notes",
  workspace: project,
  harness: { instructions: "Answer questions about the project's docs." },
  tools: {
    // Reads docs/ and nothing else; keeps notes in its own store.
    notes: { builtin: ["read_file", "list_dir", "grep"], read: ["docs"], stores: ["notes"] },
    // Runs a command: here, counting words. No files, no network.
    counter: {
      command: ["node", "-e", "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.parse(s).text.split(/\\s+/).filter(Boolean).length))"],
      input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      approval: { exec: "ask" },
    },
  },
};

// A scripted model stands in for a real one: it reads the guide, tries the
// private folder, counts words, and saves a note.
const model = new ScriptedClient({
  turns: [
    { tool_calls: [{ name: "notes__read_file", args: { path: "docs/guide.md" } }] },
    { tool_calls: [{ name: "notes__read_file", args: { path: "private/salaries.csv" } }] },
    { tool_calls: [{ name: "counter", args: { text: "Deploys happen on Tuesdays." } }] },
    { tool_calls: [{ name: "notes__store", args: { action: "put", store: "notes", key: "deploy-day", value: "Tuesday" } }] },
    { text: "Deploys happen on Tuesdays (4 words in the guide's sentence). I could not read private/." },
  ],
});

const host = await createHost(spec, {
  model,
  // The application decides approvals; it can say yes or no, never widen a grant.
  onApproval: (req) => {
    console.log(`approval asked by ${req.component}: ${req.summary} -> yes`);
    return true;
  },
  onEvent: (e) => {
    if (e.type === "tool-call") console.log(`call   ${e.name} ${JSON.stringify(e.args)}`);
    if (e.type === "denial") console.log(`denied ${e.name}: ${e.text.split("\n")[0]}`);
  },
});

try {
  const session = host.session();
  const result = await session.send("When do deploys happen?");
  console.log(`\n${result.outcome}: ${result.text}`);
  console.log(`refused: ${result.refused.length}; the record: vak journal show ${session.id}`);
  await session.close();
} finally {
  await host.close();
  rmSync(project, { recursive: true, force: true });
}
