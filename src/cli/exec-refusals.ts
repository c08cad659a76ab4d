import { basename, dirname } from "node:path";
import { canonicalHost } from "../policy/address.js";
import { isWithin } from "../policy/paths.js";
import { describeSource, type Granted } from "../policy/compose.js";
import type { LaunchPlan } from "../policy/plan.js";
import { PROTECTED_PATHS } from "../policy/protected.js";
import type { EgressEvent } from "../net/egress-gate.js";
import { type PresetEntry, presetFor } from "./exec-hints.js";
import type { ResolvedGrants } from "./exec-grants.js";
import { clipped, fmt, own, type Text } from "./output.js";

/**
 * What the sandbox refused, printed as it happens (a command that hangs
 * retrying a refused host shows why at once, not at exit): one line for the
 * first refusal of each kind and place, with what would grant it, and at the
 * end how many more there were. Writes are grouped by directory and the hint
 * names the directory, not one file at a time. Bounded: past MAX_GROUPS kinds
 * and places only a count. Each line is a Text: Vak's words and the values
 * (a path, a host, the guard's reason) are separate segments, redacted and
 * neutralised one by one by the output module, so that a path ending in
 * `token` never makes Vak's own next words look like a credential.
 */
export const MAX_GROUPS = 12;

/** A name a grant could be written for, spelled as the grant would spell it. */
function isHostName(name: string): boolean {
  try {
    const h = canonicalHost(name);
    return (h.kind === "name" ? h.name : h.ip) === name;
  } catch {
    return false;
  }
}

/** A path, a host or a reason in a line is cut at this many characters (a 4 KB path, a 16 KB CONNECT target); the journal has it whole. */
const SHOWN_MAX = 600;
const c = (v: unknown) => clipped(v, SHOWN_MAX);

export interface Denial {
  op: string;
  path: string;
  reason: string;
}

interface Group {
  count: number;
  place: string;
  /** The names of the next few refused in the same place (for the count at the end), at most MORE_NAMES. */
  more: string[];
}

/** How many of the other names refused in one directory the count at the end says. */
export const MORE_NAMES = 3;

export class Refusals {
  private readonly groups = new Map<string, Group>();
  private overflow = 0;
  /** Egress refusals: every one (a summary event counts those it stands for), and those shown. */
  private egressTotal = 0;
  private egressShown = 0;
  private index: PresetEntry[] | undefined;

  constructor(
    private readonly plan: LaunchPlan,
    private readonly grants: ResolvedGrants | undefined,
    private readonly presets: () => PresetEntry[],
    private readonly out: (line: Text) => void,
  ) {}

  private presetsNow(): PresetEntry[] {
    return (this.index ??= this.presets());
  }

  private note(key: string, place: string, line: () => Text, name?: string): void {
    const g = this.groups.get(key);
    if (g) {
      g.count += 1;
      if (name !== undefined && g.more.length < MORE_NAMES && !g.more.includes(name)) g.more.push(name);
      return;
    }
    if (this.groups.size >= MAX_GROUPS) return void (this.overflow += 1);
    this.groups.set(key, { count: 1, place, more: [] });
    this.out(line());
  }

  /** A refusal the guard reported. */
  denied(d: Denial): void {
    const network = /^\[?[0-9a-f.:]+\]?:\d+$/i.test(d.path) && !d.path.startsWith("/");
    // Not a path ("(a new user namespace)", "(a TCP socket)"): one line per kind of call and reason.
    if (!d.path.startsWith("/") && !network) return this.note(`${d.op}\0${d.reason}`, `(${d.op})`, () => fmt`refused ${d.op} ${c(d.path)}: ${c(d.reason)}`);
    const place = network ? d.path : dirname(d.path);
    // One group per reason and directory. The one reason that names the refused path itself ("/etc/a is outside
    // every grant") is the same reason for /etc/b: its path is taken out of the key, and the line says the first.
    // Others name a grant or a rule ("/etc/ssl is granted read-only", "protected path /w/.env"), which stay apart.
    const kind = d.reason === `${d.path} is outside every grant` ? "outside every grant" : d.reason;
    this.note(`${kind}\0${place}`, network ? d.path : `in ${place}`, () => fmt`refused ${d.op} ${c(d.path)}: ${c(d.reason)}${this.hint(d, place, network)}`, network ? undefined : basename(d.path));
  }

  /** A request or connection the egress gate refused. */
  egress(e: EgressEvent): void {
    if (e.decision !== "denied") return;
    this.egressTotal += e.count ?? 1;
    if (e.count !== undefined) return;
    const key = `egress\0${e.asked}\0${e.reason}`;
    if (this.groups.has(key) || this.groups.size >= MAX_GROUPS) return;
    this.groups.set(key, { count: 0, place: e.asked, more: [] });
    this.egressShown += 1;
    this.out(fmt`refused ${e.method === "-" ? own("a connection") : fmt`${c(e.method)} ${c(e.asked)}`}: ${c(this.denySource(e.reason))}`);
  }

  /** The gate names a deny rule as its flag; one a profile or a config wrote is said as that, with its file and line. */
  private denySource(reason: string): string {
    const m = /^(.*) is denied by --deny-net (\S+)$/.exec(reason);
    const g = m ? this.grants?.composition.lists.deny_net.find((x) => x.value === m[2]) : undefined;
    return m && g && g.source.kind !== "flag" ? `${m[1]} is denied by deny_net ${m[2]}, from ${describeSource(g.source)}` : reason;
  }

  /** A name the sandbox's resolver was asked for: names resolve only at the egress gate. */
  dns(name: string): void {
    // The name is the command's own bytes: one that is no host name (spaces, flags, controls) is quoted and never offered as a grant.
    if (!isHostName(name))
      return this.note(`dns\0${name}`, name, () => fmt`a lookup of ${c(JSON.stringify(name))} inside the sandbox was answered "no such name": it is not a host name, and no grant can name it`);
    const gate = this.plan.network.kind === "gate";
    const p = gate ? undefined : this.presetsNow().find((x) => x.net.some((n) => n === name || (n.startsWith("*.") && name.endsWith(n.slice(1)))));
    this.note(`dns\0${name}`, name, () =>
      gate
        ? fmt`a lookup of ${name} inside the sandbox was answered "no such name": names resolve only at the egress gate; use the proxy (HTTPS_PROXY=${this.plan.env.HTTPS_PROXY ?? "http://127.0.0.1:3128"}), which most clients do by themselves`
        : fmt`a lookup of ${name} was answered "no such name": this sandbox has no network; --allow-net ${name} would reach it${p ? fmt` (or --profile ${p.name})` : own("")}`,
    );
  }

  /** At the end: how many more of each kind there were, and of kinds not shown. */
  finish(): void {
    for (const g of this.groups.values()) {
      if (g.count <= 1) continue;
      const names = g.more.length ? fmt`: ${c(g.more.join(", "))}${own(g.count - 1 > g.more.length ? ", …" : "")}` : own("");
      this.out(fmt`… and ${g.count - 1} more refused ${c(g.place)} (the same reason)${names}`);
    }
    if (this.overflow) this.out(fmt`… and ${this.overflow} more refusals of other kinds (all of them are in the journal)`);
    if (this.egressTotal > this.egressShown) this.out(fmt`… and ${this.egressTotal - this.egressShown} more egress refusals`);
  }

  private hint(d: Denial, dir: string, network: boolean): Text {
    const plan = this.plan;
    if (network) return plan.network.kind === "gate" ? own("") : fmt`; --allow-net ${c(d.path)} would reach it through the egress gate`;
    const readOnly = /^(.*) is granted read-only$/.exec(d.reason)?.[1];
    if (readOnly !== undefined) {
      if (plan.mode === "read-only" && readOnly === plan.workspace) {
        // Where the mode came from: an untrusted repository config's read-only holds against every flag, so
        // "use --mode workspace-write" would send the user in a circle.
        const src = this.grants?.composition.modeSource;
        if (src?.kind === "profile" && src.via === "untrusted") return fmt`; read-only by the ${describeSource(src)}, which no flag undoes`;
        if (src?.kind === "profile") return fmt`; read-only by ${describeSource(src)}; --mode workspace-write overrides it`;
        return own("; use --mode workspace-write to allow writes");
      }
      const p = presetFor(dir, this.presetsNow().map((x) => ({ ...x, read: [] })));
      return fmt`; grant the directory with --allow-write ${c(dir)}${p ? fmt`, or --profile ${p}` : own("")}`;
    }
    // A host tool's state (a profile's state_dirs): say which profile made it one.
    const state = /^(\/.*?) is a host tool's state: /.exec(d.reason)?.[1];
    if (state !== undefined) {
      const L = this.grants?.composition.lists;
      const g = L ? [...L.state_dirs, ...L.state_files].find((x) => x.value === state || isWithin(x.value, state) || isWithin(state, x.value)) : undefined;
      return g ? fmt` (${g.source.kind === "profile" ? "state_dirs" : "a state directory"}, from ${describeSource(g.source)})` : own("");
    }
    if (/ is outside every grant$/.test(d.reason)) return fmt`; it is in none of the granted paths (--allow-write ${c(dir)} if it is a host directory you mean to share)`;
    // A worktree's pointers, by a pattern rule or an absolute one: say what to do instead.
    if (/^protected path /.test(d.reason) && /\/\.git\/worktrees\/[^/]+\/(commondir|gitdir)$/.test(d.path))
      return own(" (git worktree add cannot run inside: its pointers would redirect the host's git. Make a clone on the host instead, `git clone --shared REPO DIR`, and run vak exec --workspace DIR --allow-read REPO/.git/objects)");
    const abs = /^protected path (\/.*)$/.exec(d.reason)?.[1];
    if (abs !== undefined) {
      const held = plan.hidden.find((h) => h.path === abs) ?? plan.held.find((h) => h.path === abs);
      if (held) return fmt` (${held.why})`;
      const from = this.sourceOf(abs);
      if (from) return fmt` (${from})`;
      return own(" (Vak's own state, or a path held read-only: never writable from a sandbox)");
    }
    const pattern = /^protected path ([^ /][^ ]*)/.exec(d.reason)?.[1];
    const why = pattern ? PROTECTED_PATHS.find((p) => p.pattern === pattern)?.why : undefined;
    return why ? fmt` (${why}; protected in every sandbox)` : own("");
  }

  /** Which deny rule holds an absolute path, said as its flag or profile line. */
  private sourceOf(abs: string): string | undefined {
    const L = this.grants?.composition.lists;
    if (!L) return this.plan.grants.denyWrite.includes(abs) ? "--deny-write" : this.plan.grants.denyRead.includes(abs) ? "--deny-read" : undefined;
    const find = (xs: Granted[], what: string) => {
      const g = xs.find((x) => x.value === abs || abs.endsWith(`/${x.value}`));
      return g ? `${what}, from ${describeSource(g.source)}` : undefined;
    };
    return find(L.deny_write, "deny_write") ?? find(L.deny_read, "deny_read") ?? (this.plan.grants.denyWrite.includes(abs) ? "--deny-write" : undefined);
  }
}
