import { realpathSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { describeSource, fromHostEnv, type Granted, type Source } from "../policy/compose.js";
import type { LaunchPlan } from "../policy/plan.js";
import { shownPath } from "../policy/profiles-file.js";
import { Redactor } from "../secrets/redact.js";
import type { ResolvedGrants } from "./exec-grants.js";
import { visible } from "../text/visible.js";
import { type Output } from "./output.js";

/**
 * `vak exec --print-plan` (or --dry-run): the whole resolved plan and where
 * each grant came from, without running anything. Nothing is launched, no
 * secret is resolved, and nothing is written to the journal (there is no
 * run to record); state directories a profile would create are listed, not
 * created.
 */
export interface PlanView {
  recorded: false;
  command: string[];
  workspace: string;
  mode: { value: string; from: string };
  sandbox: string;
  read: { path: string; from: string }[];
  write: { path: string; from: string }[];
  denyRead: { path: string; from: string }[];
  denyWrite: { path: string; from: string }[];
  /** A host tool's state: writable, with no link, FIFO, socket or device made there. */
  noLinks: { path: string; from: string }[];
  redacted: { path: string; removed: string[]; from: string }[];
  files: { path: string; from: string }[];
  network: { allow: { rule: string; from: string }[]; deny: { rule: string; from: string }[] } | null;
  env: { passed: { name: string; from: string }[]; set: { name: string; value: string; from: string }[]; path: string; pathDropped: string[] };
  secrets: { name: string; ref: string; from: string }[];
  limits: { name: string; value: number | string; from: string }[];
  profiles: { name: string; file: string }[];
  skipped: { entry: string; written: string; why: string; from: string }[];
  create: string[];
  held: { path: string; why: string }[];
  /** The host's credential stores a grant covers only as a parent: hidden, or never made. */
  hidden: { path: string; why: string }[];
  project: { path: string; trusted: boolean; sha256: string; notes: string[] } | null;
  runtime: string[];
}

function canon(p: string, workspace: string): string {
  const abs = isAbsolute(p) ? p : resolve(workspace, p);
  try {
    return realpathSync.native(abs);
  } catch {
    return abs;
  }
}

/** Where a canonical path of the plan came from: the entry (of those given) that resolves to it. */
function sourceOf(path: string, entries: Granted[], workspace: string, fallback: string): string {
  const g = entries.find((x) => canon(x.value, workspace) === path);
  return g ? from(g.source) : fallback;
}

const from = (s: Source): string => describeSource(s);

export function planView(plan: LaunchPlan, r: ResolvedGrants): PlanView {
  const c = r.composition;
  const L = c.lists;
  const ws = plan.workspace;
  const wsFrom = (p: string) => (p === ws ? `the workspace (${plan.mode})` : undefined);
  const limits: PlanView["limits"] = Object.entries(c.limits).map(([k, v]) => ({ name: k, value: v!.value, from: from(v!.source) }));
  if (!c.limits.max_procs && plan.sandbox !== "none") limits.push({ name: "max_procs", value: plan.defaultMaxProcs, from: "default (held where the host can)" });
  return {
    recorded: false,
    command: plan.command,
    workspace: ws,
    mode: { value: plan.mode, from: plan.mode === "full-access" ? "--full-access" : from(c.modeSource) },
    sandbox: plan.sandbox,
    read: plan.grants.read.map((p) => ({ path: p, from: wsFrom(p) ?? sourceOf(p, L.allow_read, ws, "--deny-write (made read-only)") })),
    write: plan.grants.write.map((p) => ({ path: p, from: wsFrom(p) ?? sourceOf(p, L.allow_write, ws, "?") })),
    denyRead: plan.grants.denyRead.map((p) => ({ path: p, from: sourceOf(p, L.deny_read, ws, "?") })),
    denyWrite: plan.grants.denyWrite.map((p) => ({ path: p, from: sourceOf(p, L.deny_write, ws, "?") })),
    noLinks: plan.grants.noLinks.map((p) => ({ path: p, from: sourceOf(p, [...L.state_dirs, ...L.state_files], ws, "?") })),
    redacted: r.redacted.map((x) => ({ path: x.path, removed: x.removed, from: `${from(x.source.source)}${x.includedBy ? `; included by ${x.includedBy}` : ""}` })),
    files: [...c.files].map(([path, g]) => ({ path, from: from(g.source) })),
    network: plan.network.kind === "gate"
      ? {
          allow: plan.network.grants.allow.map((rule) => ({ rule: rule.text, from: from(L.allow_net.find((g) => g.value === rule.text)?.source ?? { kind: "default" }) })),
          deny: plan.network.grants.deny.map((rule) => ({ rule: rule.text, from: from(L.deny_net.find((g) => g.value === rule.text)?.source ?? { kind: "default" }) })),
        }
      : null,
    env: {
      passed: L.allow_env.map((g) => ({ name: g.value, from: `${from(g.source)}${g.written ? ` (${g.written})` : ""}${plan.env[g.value] === undefined ? "; not set on the host" : ""}` })),
      // A value read from a host variable is shown as written: the plan is pasted into issues and logs, and the variable may hold a secret.
      set: [...c.setEnv].map(([name, g]) => (fromHostEnv(g) ? { name, value: g.written!, from: `${from(g.source)}; its value is the host's, not shown` } : { name, value: g.value, from: from(g.source) })),
      path: plan.env.PATH ?? "",
      pathDropped: plan.pathDropped,
    },
    secrets: L.secrets.map((g) => {
      const eq = g.value.indexOf("=");
      return { name: g.value.slice(0, eq), ref: g.value.slice(eq + 1), from: from(g.source) };
    }),
    limits,
    profiles: c.applied.filter((p) => p.origin !== "exec" && p.origin !== "project-exec").map((p) => ({ name: p.name, file: p.file })),
    skipped: c.skipped.map((s) => ({ entry: s.value, written: s.written ?? s.value, why: s.why, from: from(s.source) })),
    create: c.create.map((x) => x.path),
    held: plan.held.map((h) => ({ path: h.path, why: h.why })),
    hidden: plan.hidden.map((h) => ({ path: h.path, why: h.why })),
    project: r.project ? { path: r.project.path, trusted: r.project.config?.trusted ?? false, sha256: r.project.hash, notes: r.composition.ignored } : null,
    runtime: plan.mounts.filter((m) => m.why === "runtime" || m.why.startsWith("the Node.js")).map((m) => m.path),
  };
}

/** The plan for a person: one section per kind of grant, each line with where it came from. */
export function printPlan(v: PlanView, out: Output): void {
  const redactor = new Redactor();
  const t = (s: string) => visible(redactor.text(s));
  const lines: string[] = [];
  const row = (left: string, right: string) => lines.push(`  ${t(left).padEnd(46)} ${t(right)}`);
  const section = (title: string, rows: [string, string][]) => {
    if (!rows.length) return;
    lines.push(title);
    for (const [l, r] of rows) row(l, r);
  };
  lines.push("vak exec plan: nothing was run, and nothing is recorded in the journal");
  row("command", v.command.join(" "));
  row("workspace", v.workspace);
  row("mode", `${v.mode.value}   (${v.mode.from})`);
  row("sandbox", v.sandbox === "none" ? "NONE: --full-access runs without a sandbox" : v.sandbox);
  if (v.profiles.length) row("profiles", v.profiles.map((p) => p.name).join(", "));
  section("writable", v.write.map((x) => [shownPath(x.path), x.from]));
  section("read-only", v.read.map((x) => [shownPath(x.path), x.from]));
  section("shown with credentials removed", v.redacted.map((x) => [shownPath(x.path), `${x.from}; ${x.removed.length ? `removed: ${x.removed.join(", ")}` : "nothing to remove"}`]));
  section("hidden (--deny-read)", v.denyRead.map((x) => [shownPath(x.path), x.from]));
  section("hidden: the host's credential stores, which a grant covers only as a parent", v.hidden.map((x) => [shownPath(x.path), x.why]));
  section("never writable (--deny-write)", v.denyWrite.map((x) => [shownPath(x.path), x.from]));
  section("a host tool's state: only files and directories made there, no links", v.noLinks.map((x) => [shownPath(x.path), x.from]));
  section("files written into the view (never on the host)", v.files.map((x) => [x.path, x.from]));
  if (v.network) section("network, through the egress gate", [...v.network.allow.map((x): [string, string] => [`allow ${x.rule}`, x.from]), ...v.network.deny.map((x): [string, string] => [`deny ${x.rule}`, x.from])]);
  else if (v.sandbox !== "none") section("network", [["none", "no --allow-net: names do not resolve, nothing is reachable"]]);
  section("environment passed from the host", v.env.passed.map((x) => [x.name, x.from]));
  section("environment set", v.env.set.map((x) => [`${x.name}=${x.value}`, x.from]));
  if (v.sandbox !== "none") {
    section("PATH", [[v.env.path, "the host's PATH, less what the sandbox cannot see"]]);
    if (v.env.pathDropped.length) section("dropped from PATH (outside the view)", v.env.pathDropped.map((d) => [shownPath(d), `--allow-read ${shownPath(d)} keeps it`]));
  }
  section("secrets (by reference; values are resolved only when it runs)", v.secrets.map((x) => [`${x.name}=${x.ref}`, x.from]));
  section("limits", v.limits.map((x) => [`${x.name} ${x.value}`, x.from]));
  section("skipped", v.skipped.map((x) => [shownPath(x.entry), `${x.why}; ${x.from}`]));
  section("created before the run (state directories)", v.create.map((p) => [shownPath(p), "does not exist yet"]));
  if (v.held.length) section(`held read-only inside writable grants (${v.held.length}: what the host runs or reads)`, v.held.slice(0, 8).map((h): [string, string] => [shownPath(h.path), h.why]).concat(v.held.length > 8 ? [[`… and ${v.held.length - 8} more`, "--print-plan --json lists them all"]] : []));
  if (v.runtime.length) section("runtime (read-only)", [[v.runtime.join(" "), "what programs need to start"]]);
  if (v.project) section("repository config", [[shownPath(v.project.path), v.project.trusted ? `trusted (sha256 ${v.project.sha256.slice(0, 12)}…)` : "NOT trusted: only its deny rules, read-only mode and limits apply (vak trust)"], ...v.project.notes.map((n): [string, string] => ["", n])]);
  // Each line is Vak's own words with every value already redacted and neutralised (t() above).
  for (const l of lines) out.relayed(l);
}
