import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { DEFAULT_APPROVAL_RULES, needsApproval, type ApprovalRules } from "../../src/approvals/approval-rules.js";
import type { Op } from "../../src/protocol/ops.js";
import { ROOT } from "../support/paths.js";

// Fail closed by construction: a new op kind, or a new effect, does not build
// until every decider over it decides. Each case type-checks src/ (as `npm
// run build:js` does) with one module's text changed in memory, and names the
// files whose deciders must then fail to compile.

const OPS = join(ROOT, "src/protocol/ops.ts");
const MOVE_OP = `  z.object({ kind: z.literal("move"), from: Path, to: Path }).strict(),\n]);`;

const config = ts.getParsedCommandLineOfConfigFile(join(ROOT, "tsconfig.build.json"), { noEmit: true }, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
/** Parsed declaration files (lib, @types/node, zod), shared by every case: only src/ is parsed again. */
const parsed = new Map<string, ts.SourceFile>();

/** The compiler's errors over src/ with some files' text replaced, as "file: message" lines. */
function typecheck(patch: (file: string, text: string) => string): string[] {
  if (!config) throw new Error("tsconfig.build.json does not parse");
  const host = ts.createCompilerHost(config.options);
  const read = host.readFile.bind(host);
  const src = join(ROOT, "src");
  host.readFile = (f) => {
    const text = read(f);
    return text === undefined || !f.startsWith(src) ? text : patch(f, text);
  };
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (f, lang, onError, fresh) => {
    if (f.startsWith(src)) return getSourceFile(f, lang, onError, fresh);
    let sf = parsed.get(f);
    if (!sf) {
      sf = getSourceFile(f, lang, onError, fresh);
      if (sf) parsed.set(f, sf);
    }
    return sf;
  };
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, host });
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file ? relative(ROOT, d.file.fileName) : "?"}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`);
}

const only = (target: string, edit: (text: string) => string) => (file: string, text: string) => (file === target ? edit(text) : text);
const filesOf = (errors: string[]) => [...new Set(errors.map((e) => e.slice(0, e.indexOf(":"))))].sort();

describe("fail closed by construction", { timeout: 180_000 }, () => {
  it("src/ as it is type-checks (the control for the cases below)", () => {
    expect(typecheck((_f, t) => t)).toEqual([]);
  });

  it("an op kind added to the schema alone does not build: its traits and every decider over op kinds must name it", () => {
    const errors = typecheck(only(OPS, (t) => t.replace(/\n\]\);/, `\n${MOVE_OP}`)));
    expect(filesOf(errors)).toEqual(["src/approvals/approval-rules.ts", "src/broker/approval-request.ts", "src/broker/broker.ts", "src/broker/op-record.ts", "src/broker/registry.ts", "src/protocol/ops.ts", "src/server/approval-card.ts", "src/worker/main.ts"]);
    expect(errors.find((e) => e.startsWith("src/protocol/ops.ts"))).toMatch(/Property 'move' is missing/);
  });

  it("an op kind with its traits declared still does not build until the approval summary, scope and view, the capability, the record, the command, the worker and the browser's approval card decide it", () => {
    const errors = typecheck(only(OPS, (t) => t.replace(/\n\]\);/, `\n${MOVE_OP}`).replace("  tool: { effect: \"exec\", creates: false },", "  tool: { effect: \"exec\", creates: false },\n  move: { effect: \"write\", creates: true },")));
    expect(filesOf(errors)).toEqual(["src/approvals/approval-rules.ts", "src/broker/approval-request.ts", "src/broker/broker.ts", "src/broker/op-record.ts", "src/server/approval-card.ts", "src/worker/main.ts"]);
    expect(errors.every((e) => /not assignable to parameter of type 'never'/.test(e))).toBe(true);
  });

  it("a new effect does not build until the approval rules have a rule for it and needsApproval decides it", () => {
    const errors = typecheck(only(OPS, (t) => t.replace('export type Effect = "read" | "write" | "exec" | "net";', 'export type Effect = "read" | "write" | "exec" | "net" | "device";')));
    expect(filesOf(errors)).toContain("src/approvals/approval-rules.ts");
    expect(errors.some((e) => e.startsWith("src/approvals/approval-rules.ts") && /Property 'device' is missing/.test(e))).toBe(true);
    expect(errors.some((e) => e.startsWith("src/approvals/approval-rules.ts") && /'never'/.test(e))).toBe(true);
  });

  it("a new journal event kind does not build until `vak journal show`, its transcript view and the browser's calls view have a line for it (and say whether it is a refusal)", () => {
    const events = join(ROOT, "src/journal/events.ts");
    const errors = typecheck(only(events, (t) => t.replace('  "journal.pruned": ["before", "events"],', '  "journal.pruned": ["before", "events"],\n  "server.started": ["port"],')));
    expect(filesOf(errors)).toEqual(["src/cli/journal-transcript.ts", "src/cli/journal.ts", "src/server/journal-view.ts"]);
  });

  it("needsApproval asks about a kind it does not know, even when every rule says allow", () => {
    const allowAll: ApprovalRules = { write: "allow", exec: "allow" };
    for (const kind of ["move", "delete", "", "__proto__", "constructor", "toString"])
      expect(needsApproval(allowAll, { kind } as unknown as Op)).toBe(true);
    const read: Op = { kind: "read", path: "/x" };
    const write: Op = { kind: "write", path: "/x", content: "" };
    const edit: Op = { kind: "edit", path: "/x", old: "a", new: "b" };
    expect(needsApproval(allowAll, read)).toBe(false);
    expect(needsApproval(DEFAULT_APPROVAL_RULES, write)).toBe(true);
    // A rule that is neither "ask" nor "allow" (a bad config) asks.
    expect(needsApproval({ write: "sometimes", exec: "allow" } as unknown as ApprovalRules, edit)).toBe(true);
  });
});
