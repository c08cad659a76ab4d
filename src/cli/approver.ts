import type { ApprovalGate, ApprovalRequest, Outcome } from "../approvals/approval-gate.js";
import { approvalScreen, FIRST_PAGE, notShownYet, PAGE } from "../approvals/approval-screen.js";
import { breakLine } from "../text/visible.js";
import { fmt, MARGIN, own, type Output } from "./output.js";
import { prefix } from "./transcript.js";

/**
 * Answers approval requests from a terminal, one at a time. The prompt shows
 * the whole op (the command, the input, or a diff of the file), a page at a
 * time: what is not shown yet is counted, never cut silently, and [v] shows
 * the next page. It says exactly what [a] would allow. Everything the op holds
 * is on margin lines; the prompt's own lines start at column 0, which nothing
 * a model or a command wrote can reach. The answer carries the request's
 * nonce, digest and generation back to the gate, which decides whether it
 * still counts.
 */
export class TerminalApprover {
  private queue: ApprovalRequest[] = [];
  private current: { request: ApprovalRequest; headline: string; scope: string; lines: string[]; shown: number } | undefined;
  /** The prompt another approver (the browser) answered just now: a y/a/n typed for it goes to the gate, which voids it. */
  private retracted: { request: ApprovalRequest; at: number } | undefined;

  constructor(
    private readonly gate: () => ApprovalGate,
    private readonly out: Output,
  ) {}

  get waiting(): boolean {
    return this.current !== undefined;
  }

  request = (r: ApprovalRequest): void => {
    this.queue.push(r);
    if (!this.current) this.next();
  };

  private next(): void {
    const r = this.queue.shift();
    if (!r) {
      this.current = undefined;
      return;
    }
    // The same screen the browser's card shows (approval-screen.ts), its lines broken to the terminal's width so that pages count what is seen.
    const screen = approvalScreen(r, (t) => this.out.redact(t));
    const width = Math.max(20, (this.out.stream.columns ?? 100) - MARGIN.length);
    this.current = { request: r, headline: screen.headline, scope: screen.scope, lines: screen.lines.flatMap((l) => breakLine(l, width)), shown: 0 };
    // The prompt's first line is drawn so that no hostile text can look like it: at column 0, and in reverse video on a terminal.
    const mark = this.out.isTTY ? "\u001b[7m ? \u001b[0m" : "?";
    this.out.line(fmt`\n${own(mark)} ${prefix(r.component)}${own(screen.headline)} ${r.target ?? ""}`);
    this.page(FIRST_PAGE);
  }

  private page(n: number): void {
    const c = this.current!;
    this.out.exact(c.lines.slice(c.shown, c.shown + n));
    c.shown = Math.min(c.lines.length, c.shown + n);
    const left = c.lines.length - c.shown;
    const more = notShownYet(c.lines, c.shown);
    if (more) this.out.line(own(`${more}: [v] shows the next ${Math.min(PAGE, left)}`));
    this.out.line(fmt`  [a] would allow, without asking: ${c.scope}`);
    this.out.prompt(own(`  allow? [y] once  [a] for this session  [n] no${left ? "  [v] more" : ""}: `));
  }

  /** A line the user typed while a request was open. */
  answer(line: string): void {
    const c = this.current;
    if (!c) return;
    const a = line.trim().toLowerCase();
    if (a === "v" && c.shown < c.lines.length) return this.page(PAGE);
    const answer = a === "y" || a === "yes" ? "allow" : a === "a" || a === "always" ? "allow-session" : a === "n" || a === "no" || a === "" ? "deny" : undefined;
    if (!answer) return this.out.prompt(own(`  y, a, n${c.shown < c.lines.length ? " or v" : ""}: `));
    const r = c.request;
    const res = this.gate().answer({ nonce: r.nonce, digest: r.digest, generation: r.generation, answer, by: "terminal" });
    if (!res.ok) this.out.line(fmt`  (that answer no longer counts: ${res.reason})`);
    this.next();
  }

  /** A request closed by another approver (the browser with `vak --serve`): the prompt says so and moves on. */
  settled(r: ApprovalRequest, o: Outcome): void {
    if (o.by === "terminal") return;
    if (this.current?.request.nonce === r.nonce) {
      this.out.line(fmt`\n  (answered from ${o.by === "web" ? own("the browser") : o.by}: ${own(o.answer)})`);
      this.retracted = { request: r, at: Date.now() };
    }
    this.forget();
  }

  /** A line typed just after its prompt was answered elsewhere: sent anyway, so that the gate records it void. */
  late(line: string): boolean {
    const a = line.trim().toLowerCase();
    const r = this.retracted;
    if (!r || Date.now() - r.at > 5000 || !["y", "yes", "a", "always", "n", "no"].includes(a)) return false;
    this.retracted = undefined;
    const res = this.gate().answer({ nonce: r.request.nonce, digest: r.request.digest, generation: r.request.generation, answer: a.startsWith("y") ? "allow" : a.startsWith("a") ? "allow-session" : "deny", by: "terminal" });
    if (!res.ok) this.out.line(fmt`  (that answer no longer counts: ${res.reason})`);
    return true;
  }

  /** Requests the gate closed by itself (timeout, cancel, policy change) leave the prompt. */
  forget(): void {
    const open = new Set(this.gate().pending().map((p) => p.nonce));
    this.queue = this.queue.filter((q) => open.has(q.nonce));
    if (this.current && !open.has(this.current.request.nonce)) this.next();
  }
}
