import { ModelError, type ModelTurn } from "./types.js";

/**
 * How much one model reply may hold. A provider (or whatever answers at its
 * URL) chooses the size of what it streams: the clients stop reading at these
 * bounds (checkStreamed, as the reply comes in, so that memory stays bounded),
 * and the agent loop checks every turn again whatever the client
 * (checkTurn), with an error that says which bound was passed.
 */
export const REPLY_BOUNDS = {
  /** The reply's text, in UTF-8 bytes. */
  textBytes: 1024 * 1024,
  /** Tool calls in one reply. */
  toolCalls: 64,
  /** One call's arguments as sent (a write of the largest file an op may carry, with JSON's escaping). */
  argsBytes: 5 * 1024 * 1024,
  /** Text and every call's arguments together. */
  totalBytes: 8 * 1024 * 1024,
  /** A tool's name. */
  nameChars: 128,
} as const;

const tooLarge = (what: string, bound: number, unit: string) =>
  new ModelError("too-large", `the model's reply was stopped: ${what} more than ${bound} ${unit} (a bound on what a model may send in one reply)`);

/** Counts a reply as it streams in; throws a "too-large" ModelError at the first bound passed. */
export class ReplyMeter {
  private text = 0;
  private total = 0;
  private readonly args = new Map<number, number>();
  private readonly names = new Map<number, number>();

  addText(delta: string): void {
    const n = Buffer.byteLength(delta);
    this.text += n;
    this.total += n;
    if (this.text > REPLY_BOUNDS.textBytes) throw tooLarge("its text is", REPLY_BOUNDS.textBytes, "bytes");
    this.checkTotal();
  }

  addCall(index: number, namePiece = "", argsPiece = ""): void {
    if (!this.args.has(index)) {
      this.args.set(index, 0);
      if (this.args.size > REPLY_BOUNDS.toolCalls) throw tooLarge("it made", REPLY_BOUNDS.toolCalls, "tool calls");
    }
    const name = (this.names.get(index) ?? 0) + namePiece.length;
    this.names.set(index, name);
    if (name > REPLY_BOUNDS.nameChars) throw tooLarge("a tool's name is", REPLY_BOUNDS.nameChars, "characters");
    const n = Buffer.byteLength(argsPiece);
    const a = this.args.get(index)! + n;
    this.args.set(index, a);
    this.total += n;
    if (a > REPLY_BOUNDS.argsBytes) throw tooLarge("one tool call's arguments are", REPLY_BOUNDS.argsBytes, "bytes");
    this.checkTotal();
  }

  private checkTotal(): void {
    if (this.total > REPLY_BOUNDS.totalBytes) throw tooLarge("its text and arguments together are", REPLY_BOUNDS.totalBytes, "bytes");
  }
}

/** The same bounds over a whole turn, from any client (one an application wrote too). */
export function checkTurn(turn: ModelTurn): void {
  const m = new ReplyMeter();
  m.addText(turn.text);
  turn.toolCalls.forEach((c, i) => m.addCall(i, c.name, typeof c.args === "string" ? c.args : (JSON.stringify(c.args) ?? "")));
}
