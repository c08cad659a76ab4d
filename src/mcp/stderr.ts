import { StringDecoder } from "node:string_decoder";

/**
 * A server's stderr, passed on to vak's stderr a line at a time: each line
 * redacted, then neutralised (both functions come from the caller: the one
 * redactor and the one terminal neutraliser), cut at MAX_LINE, and prefixed
 * with the server's name so that it cannot pass for Vak's own words. A flood
 * is held to a byte budget that refills over time; what is over it is counted
 * and said once the flood stops, never buffered.
 */
export interface StderrOptions {
  name: string;
  write(text: string): void;
  redact(text: string): string;
  neutralise(text: string): string;
  /** Bytes per second the budget refills with, and the most it holds. */
  rate?: number;
  burst?: number;
  now?: () => number;
}

const MAX_LINE = 4096;

export class StderrRelay {
  private readonly decoder = new StringDecoder("utf8");
  private partial = "";
  private partialCut = false;
  private budget: number;
  private last: number;
  private dropped = 0;
  private droppedLines = 0;
  private readonly rate: number;
  private readonly burst: number;
  private readonly now: () => number;

  constructor(private readonly o: StderrOptions) {
    this.rate = o.rate ?? 64 * 1024;
    this.burst = o.burst ?? 256 * 1024;
    this.budget = this.burst;
    this.now = o.now ?? (() => performance.now());
    this.last = this.now();
  }

  push(chunk: Buffer): void {
    const text = this.decoder.write(chunk);
    let start = 0;
    for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
      this.add(text.slice(start, nl));
      this.line();
      start = nl + 1;
    }
    this.add(text.slice(start));
  }

  /** The stream ended: the last line, and what was not shown. */
  finish(): void {
    if (this.partial || this.partialCut) this.line();
    this.report();
  }

  private add(piece: string): void {
    if (this.partial.length + piece.length <= MAX_LINE) this.partial += piece;
    else {
      this.partial = (this.partial + piece).slice(0, MAX_LINE);
      this.partialCut = true;
    }
  }

  private line(): void {
    const raw = this.partial;
    const cut = this.partialCut;
    this.partial = "";
    this.partialCut = false;
    const t = this.now();
    this.budget = Math.min(this.burst, this.budget + ((t - this.last) / 1000) * this.rate);
    this.last = t;
    const cost = raw.length + 1;
    if (cost > this.budget) {
      this.dropped += cost;
      this.droppedLines += 1;
      return;
    }
    this.budget -= cost;
    this.report();
    const shown = this.o.neutralise(this.o.redact(raw.replace(/\r$/, "")));
    this.o.write(`${this.o.name}: ${shown}${cut ? " [line cut]" : ""}\n`);
  }

  private report(): void {
    if (!this.droppedLines) return;
    this.o.write(`${this.o.name}: [${this.droppedLines} line(s), ${this.dropped} bytes of the server's stderr not shown: over the rate limit]\n`);
    this.dropped = 0;
    this.droppedLines = 0;
  }
}
