import { createHash, randomBytes } from "node:crypto";
import { VakError } from "../policy/errors.js";
import { canonicalJson, judge, type PinFile, type PinStore, type PinVerdict, textDigest, type ToolDefinition } from "./pins.js";
import { decideCall, listed, trustCommand, type ToolPolicy } from "./policy.js";

/**
 * The tools of one connection: what the server listed last, each with its pin
 * verdict; the filter applied to every tools/list answer; and the decision on
 * every tools/call (deny, withheld, ask, allow). A listing that changes
 * (`notifications/tools/list_changed`) makes the known set stale: the next
 * call waits until Vak has listed the tools again itself, so a call never
 * reaches a definition that was not checked.
 */
export interface ToolGateDeps {
  policy: ToolPolicy;
  pins: PinStore;
  command: readonly string[];
  /** Asks the server for one page of tools (Vak's own request, not the client's). */
  listPage(cursor: string | undefined): Promise<Record<string, unknown>>;
  /** Whether the client declared MCP elicitation (form mode). */
  canElicit(): boolean;
  /** Asks the client's user; resolves to the ElicitResult. */
  elicit(params: Record<string, unknown>): Promise<Record<string, unknown>>;
  record: {
    tools(payload: Record<string, unknown>): void;
    approval(kind: "approval.asked" | "approval.answered", payload: Record<string, unknown>): void;
  };
  warn(text: string): void;
}

export interface Known {
  definition: ToolDefinition;
  digest: string;
  verdict: PinVerdict;
}

export type CallVerdict =
  | { allowed: true; digest: string; asked: boolean }
  | { allowed: false; rule: string; reason: string; digest?: string };

/**
 * What one server can make Vak hold, store in its pins (on the host's disk, which the server cannot write
 * itself) and pass on: tools per listing, waiting for review, and the size of one definition. Past them a
 * tool is withheld and not stored.
 */
export const MAX_TOOLS = 512;
export const MAX_DEFINITION_BYTES = 64 * 1024;
const MAX_PAGES = 64;
const MAX_WARNINGS = 256;
/** A tool's name in a warning: the server chose it, and its length. */
const named = (name: string) => (name.length > 120 ? `${name.slice(0, 120)}…` : name);
const ASK_ARGS_CHARS = 1500;

export class ToolGate {
  private known = new Map<string, Known>();
  private building = new Map<string, Known>();
  private stale = true;
  private relisting: Promise<void> | undefined;
  /**
   * This identity's first listing, not yet complete: what it lists is pinned as first seen. Only the first: a
   * name that appears in a later listing of the same connection is new, and waits for review (bounded) like any.
   */
  private fresh: boolean;
  private readonly warned = new Set<string>();

  constructor(private readonly d: ToolGateDeps) {
    this.fresh = d.pins.load(d.policy.server) === undefined;
  }

  /** The server said its tools changed: nothing is called until they are checked again. */
  listChanged(): void {
    this.stale = true;
  }

  /** Filters one page of a tools/list answer; `first` when it answers a request without a cursor. */
  filterPage(result: Record<string, unknown>, first: boolean): Record<string, unknown> {
    const tools = (result.tools as ToolDefinition[] | undefined) ?? [];
    const page = this.judgePage(tools, first, !result.nextCursor);
    return { ...result, tools: page.filter((k) => listed(this.d.policy, String(k.definition.name), k.verdict)).map((k) => k.definition) };
  }

  private judgePage(tools: ToolDefinition[], first: boolean, last: boolean): Known[] {
    if (first) this.building = new Map();
    let file: PinFile | undefined;
    let pinError: VakError | undefined;
    try {
      file = this.d.pins.load(this.d.policy.server);
    } catch (e) {
      pinError = e as VakError;
    }
    const page: Known[] = [];
    const toPin: Known[] = [];
    const toHold: Known[] = [];
    let overCount = 0;
    for (const def of tools) {
      const name = String(def.name);
      const twice = this.building.get(name);
      if (!twice && this.building.size >= MAX_TOOLS) {
        overCount++;
        continue;
      }
      const text = canonicalJson(def);
      const digest = textDigest(text);
      if (Buffer.byteLength(text) > MAX_DEFINITION_BYTES) {
        // Only its name is kept: enough to refuse a call saying why.
        const k: Known = { definition: { name }, digest, verdict: "over-limit" };
        if (twice) twice.verdict = "duplicate";
        else this.building.set(name, k);
        page.push(k);
        this.warnOnce(`big\0${name}`, `tool ${named(name)}'s definition is over ${MAX_DEFINITION_BYTES} bytes; it is withheld`);
        continue;
      }
      // Unreadable pins: nothing can be compared, so everything is withheld.
      const verdict: PinVerdict = pinError ? "changed" : judge(file, this.fresh, def);
      const k: Known = { definition: def, digest, verdict };
      if (twice) {
        // One name, two definitions in one listing: neither is passed on or callable, and nothing is pinned.
        twice.verdict = "duplicate";
        k.verdict = "duplicate";
        for (const list of [toPin, toHold]) for (let i = list.length - 1; i >= 0; i--) if (String(list[i]!.definition.name) === name) list.splice(i, 1);
        page.push(k);
        this.warnOnce(`dup\0${name}`, `tool ${named(name)} is listed more than once with different definitions; it is withheld`);
        continue;
      }
      page.push(k);
      this.building.set(name, k);
      if (verdict === "first-sight") toPin.push(k);
      if (verdict === "changed" || verdict === "new") toHold.push(k);
    }
    if (overCount) this.warnOnce("many", `${this.d.policy.server} lists more than ${MAX_TOOLS} tools; the rest are withheld`);
    if (pinError) this.warnOnce("pins", `${pinError.message}; every tool is withheld`);
    if (toPin.length || toHold.length) this.store(toPin, toHold, page);
    for (const k of toHold) {
      const name = String(k.definition.name);
      this.warnOnce(`${name}\0${k.digest}`, `tool ${named(name)} ${k.verdict === "changed" ? "changed since you trusted it" : "is new"}; it is withheld until you review it with \`${trustCommand(this.d.policy.server)}\``);
    }
    const hidden = page.filter((k) => this.d.policy.deny.has(String(k.definition.name))).map((k) => String(k.definition.name));
    this.d.record.tools({
      server: this.d.policy.server,
      listed: page.filter((k) => listed(this.d.policy, String(k.definition.name), k.verdict)).map((k) => String(k.definition.name)),
      withheld: toHold.map((k) => ({ tool: String(k.definition.name), why: k.verdict, digest: k.digest })),
      pinned: toPin.map((k) => String(k.definition.name)),
      hidden,
      ...(overCount ? { overLimit: overCount } : {}),
    });
    if (last) {
      this.known = this.building;
      this.building = new Map();
      this.stale = false;
      this.fresh = false;
    }
    return page;
  }

  /** Writes first-sight pins and pending changes; if that fails, those tools are withheld too. */
  private store(toPin: Known[], toHold: Known[], page: Known[]): void {
    const now = new Date().toISOString();
    try {
      this.d.pins.update(this.d.policy.server, this.d.command, (f) => {
        let pinned = Object.keys(f.tools).length;
        for (const k of toPin) {
          const name = String(k.definition.name);
          // Only ever one listing's worth is pinned unreviewed; past MAX_TOOLS it is withheld and not stored.
          if (!Object.hasOwn(f.tools, name) && pinned++ >= MAX_TOOLS) {
            k.verdict = "over-limit";
            k.definition = { name };
            continue;
          }
          f.tools[name] ??= { digest: k.digest, definition: k.definition, at: now };
        }
        let waiting = Object.keys(f.pending).length;
        for (const k of toHold) {
          const name = String(k.definition.name);
          // Withheld either way; past MAX_TOOLS waiting, a new one is not stored (a server that lists fresh names at every listing would fill the disk).
          if (!Object.hasOwn(f.pending, name) && waiting++ >= MAX_TOOLS) continue;
          f.pending[name] = { digest: k.digest, definition: k.definition, at: now, why: k.verdict as "changed" | "new" };
        }
      });
    } catch (e) {
      for (const k of page) if (k.verdict === "first-sight") k.verdict = "new";
      this.warnOnce("pin-write", `${(e as Error).message}`);
    }
  }

  /** Each warning once; past MAX_WARNINGS (a server listing fresh names at every listing) one line says the rest are not shown. */
  private warnOnce(key: string, text: string): void {
    if (this.warned.has(key)) return;
    if (this.warned.size >= MAX_WARNINGS) {
      key = "\0more";
      if (this.warned.has(key)) return;
      text = `more than ${MAX_WARNINGS} warnings about ${this.d.policy.server}; the rest are not shown (\`${trustCommand(this.d.policy.server)}\` lists what is withheld)`;
    }
    this.warned.add(key);
    this.d.warn(text);
  }

  /**
   * The server's answer to initialize, with its instructions passed on only as pinned: a client puts them
   * before its model, so changing them is the same rug pull as changing a description. Returns whether
   * they were withheld.
   */
  initializeResult(result: Record<string, unknown>): { result: Record<string, unknown>; withheld: boolean } {
    const text = result.instructions;
    if (typeof text !== "string") return { result, withheld: false };
    const { instructions: _dropped, ...without } = result;
    const server = this.d.policy.server;
    const digest = textDigest(text);
    try {
      const pinned = this.d.pins.load(server)?.instructions;
      if (pinned?.digest === digest) return { result, withheld: false };
      if (Buffer.byteLength(text) > MAX_DEFINITION_BYTES) {
        this.warnOnce("instructions", `the instructions of ${server} are over ${MAX_DEFINITION_BYTES} bytes; they are withheld`);
        return { result: without, withheld: true };
      }
      const now = new Date().toISOString();
      const first = this.fresh && !pinned;
      this.d.pins.update(server, this.d.command, (f) => {
        if (first) f.instructions ??= { digest, text, at: now };
        else f.pendingInstructions = { digest, text, at: now, why: pinned ? "changed" : "new" };
      });
      if (first) return { result, withheld: false };
      this.warnOnce("instructions", `the instructions of ${server} ${pinned ? "changed since you trusted them" : "are new"}; they are withheld until you review them with \`${trustCommand(server)}\``);
    } catch (e) {
      this.warnOnce("instructions", `${(e as Error).message}; the server's instructions are withheld`);
    }
    return { result: without, withheld: true };
  }

  /** Lists every page itself, once at a time however many calls wait. */
  private refresh(): Promise<void> {
    this.relisting ??= (async () => {
      try {
        let cursor: string | undefined;
        for (let i = 0; i < MAX_PAGES; i++) {
          const r = await this.d.listPage(cursor);
          cursor = typeof r.nextCursor === "string" && r.nextCursor ? r.nextCursor : undefined;
          this.judgePage((r.tools as ToolDefinition[] | undefined) ?? [], i === 0, cursor === undefined);
          if (!cursor) return;
        }
        throw new VakError("bad-input", `the server listed more than ${MAX_PAGES} pages of tools`);
      } finally {
        this.relisting = undefined;
      }
    })();
    return this.relisting;
  }

  /** Decides one tools/call, listing the tools first if what is known may be out of date. */
  async decide(name: string, args: unknown): Promise<CallVerdict> {
    if (this.stale && !this.d.policy.deny.has(name)) {
      try {
        await this.refresh();
      } catch (e) {
        return { allowed: false, rule: "not-listed", reason: `the tools of ${this.d.policy.server} could not be checked (${(e as Error).message.slice(0, 300)}); the call was not passed on` };
      }
    }
    const k = this.known.get(name);
    const d = decideCall(this.d.policy, name, k?.verdict);
    if (d.action === "deny") return { allowed: false, rule: d.rule, reason: d.reason, ...(k ? { digest: k.digest } : {}) };
    if (d.action === "allow") return { allowed: true, digest: k!.digest, asked: false };
    return this.ask(name, args, k!);
  }

  private async ask(name: string, args: unknown, k: Known): Promise<CallVerdict> {
    const server = this.d.policy.server;
    if (!this.d.canElicit())
      return {
        allowed: false, rule: "ask", digest: k.digest,
        reason: `tool ${name} of ${server} needs your approval (--ask), and this MCP client cannot ask you (it did not declare elicitation); drop ${name} from --ask to allow it without asking`,
      };
    const nonce = randomBytes(12).toString("hex");
    const digest = createHash("sha256").update(`${server}\0${name}\0${k.digest}\0${JSON.stringify(args ?? {})}`).digest("hex");
    this.d.record.approval("approval.asked", { op: `mcp ${server} ${name}`, digest, nonce, tool: name, server });
    let answer = "deny";
    try {
      const r = await this.d.elicit(askParams(server, name, args, k.definition));
      const content = r.content as Record<string, unknown> | undefined;
      if (r.action === "accept" && content?.allow === true) answer = "allow";
      else answer = String(r.action ?? "decline");
    } catch (e) {
      answer = `error: ${(e as Error).message.slice(0, 200)}`;
    }
    this.d.record.approval("approval.answered", { nonce, answer, digest });
    if (answer === "allow") return { allowed: true, digest: k.digest, asked: true };
    return { allowed: false, rule: "ask", digest: k.digest, reason: `you did not approve the call of ${name} (${answer})` };
  }
}

/** The elicitation Vak sends for --ask: one boolean, false unless the user sets it. */
function askParams(server: string, name: string, args: unknown, def: ToolDefinition): Record<string, unknown> {
  let shown = JSON.stringify(args ?? {});
  if (shown.length > ASK_ARGS_CHARS) shown = `${shown.slice(0, ASK_ARGS_CHARS)}… (${shown.length} characters)`;
  const ann = def.annotations && typeof def.annotations === "object" ? JSON.stringify(def.annotations).slice(0, 300) : "none";
  return {
    mode: "form",
    message: `Vak: the MCP server ${server} wants to run its tool ${name} with ${shown}.\nAnnotations (the server's own claims, not checked): ${ann}.\nAllow this one call?`,
    requestedSchema: {
      type: "object",
      properties: { allow: { type: "boolean", title: "Allow this call", description: `run ${name} once`, default: false } },
      required: ["allow"],
    },
  };
}
