/**
 * What `vak ARGS` means before commander sees it, for the two forms commander
 * cannot tell apart by itself:
 *
 * - `vak help [COMMAND...]` is `vak [COMMAND...] --help` (the root takes a
 *   message, so commander would hand it "help" as one).
 * - `vak [OPTIONS] -- MESSAGE...`: everything after `--` is the agent's first
 *   message, even when it starts with a command's name (`vak -- exec the
 *   tests and fix what fails`). Without `--`, a first word that is a command
 *   runs that command.
 *
 * Pure: the caller says which root options take a value.
 */
export interface Routed {
  argv: string[];
  /** The first message given after `--`, if any. */
  message?: string[] | undefined;
}

export function routeArgv(argv: readonly string[], takesValue: ReadonlySet<string>): Routed {
  let i = 0;
  while (i < argv.length) {
    const a = argv[i]!;
    if (a === "--") return { argv: argv.slice(0, i), message: argv.slice(i + 1) };
    if (!a.startsWith("-") || a === "-") break;
    i += takesValue.has(a) ? 2 : 1;
  }
  if (argv[i] === "help") return { argv: [...argv.slice(i + 1), "--help"] };
  return { argv: [...argv] };
}

/** Edit distance, for "did you mean": a one-word message that is nearly a command's name is more likely a typo than a request. */
export function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

/** The command a lone word was probably meant to be, if it is within two edits of one. */
export function likelyCommand(words: readonly string[], commands: readonly string[]): string | undefined {
  if (words.length !== 1) return undefined;
  const w = words[0]!.toLowerCase();
  if (w.length < 3 || /\s/.test(w)) return undefined;
  let best: { name: string; d: number } | undefined;
  for (const c of commands) {
    const d = distance(w, c);
    if (d <= (c.length <= 4 ? 1 : 2) && (!best || d < best.d)) best = { name: c, d };
  }
  return best?.name;
}
