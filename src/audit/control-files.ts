import { lstatSync, readdirSync, type Stats } from "node:fs";
import { dirname, join } from "node:path";
import { trustFilePath } from "../policy/trust.js";
import { runningDir } from "../workload/running.js";
import type { AuditContext } from "./context.js";
import { type Check, octal } from "./finding.js";

/**
 * Vak's control files: its config, the secret store, the journal, the spool,
 * the MCP pins and approvals, and the TLS and CA files the config names. Each
 * must be a plain file or directory (not a link someone could repoint), the
 * user's own, closed to everyone else, outside folders a sync client copies
 * elsewhere, under parents nobody else can rename it out of.
 */
interface ControlPath {
  path: string;
  what: string;
  /** Vak's own files are 0600/0700: closed to group and others. Files the user points at (certificates) need only not be writable by others. */
  own: boolean;
  /** Readable by others is critical (a key), not only a warning. */
  secret?: boolean;
}

/** Folders that sync clients copy to another machine or a cloud. */
const SYNCED = /\/(?:Dropbox|OneDrive(?: - [^/]+)?|Google ?Drive|My Drive|iCloud ?Drive|Library\/Mobile Documents|Library\/CloudStorage|Nextcloud|ownCloud|pCloud ?Drive|Box|Sync|MEGA|SynologyDrive|Seafile|Resilio Sync)(?:\/|$)/i;

function statOf(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** The paths audited: what exists of them is checked; nothing missing is a finding. */
export function controlPaths(ctx: AuditContext): ControlPath[] {
  const p: ControlPath[] = [
    { path: ctx.dirs.config, what: "Vak's config directory", own: true },
    { path: ctx.configPath, what: "the user config", own: true },
    { path: ctx.storePath, what: "the secret store", own: true, secret: true },
    { path: ctx.dirs.state, what: "Vak's state directory", own: true },
    { path: dirname(ctx.journalPath), what: "the journal's directory", own: true },
    { path: ctx.journalPath, what: "the journal", own: true, secret: true },
    { path: `${ctx.journalPath}-wal`, what: "the journal's write-ahead log", own: true, secret: true },
    { path: `${ctx.journalPath}-shm`, what: "the journal's shared memory file", own: true },
    { path: ctx.spoolDir, what: "the journal spool", own: true },
    { path: dirname(ctx.pinsDir), what: "the MCP state directory", own: true },
    { path: ctx.pinsDir, what: "the MCP tool pins", own: true },
    { path: ctx.approvedPath, what: "the MCP approvals", own: true },
    { path: trustFilePath(ctx.env), what: "the repository trust records", own: true },
    { path: join(dirname(ctx.journalPath), "workloads"), what: "the running workloads' records", own: true },
    { path: runningDir(dirname(ctx.journalPath)), what: "the running workloads' records", own: true },
  ];
  for (const name of safeList(ctx.pinsDir).filter((n) => n.endsWith(".json"))) p.push({ path: join(ctx.pinsDir, name), what: "an MCP pin file", own: true });
  for (const name of safeList(ctx.spoolDir)) p.push({ path: join(ctx.spoolDir, name), what: "a spool file", own: true, secret: true });
  const server = ctx.config?.server;
  if (server?.tls_cert) p.push({ path: server.tls_cert, what: "vak serve's TLS certificate", own: false });
  if (server?.tls_key) p.push({ path: server.tls_key, what: "vak serve's TLS key", own: true, secret: true });
  for (const ca of ctx.config?.egress.ca_files ?? []) p.push({ path: ca, what: "a CA file the egress gate trusts", own: false });
  const seen = new Set<string>();
  return p.filter((c) => (seen.has(c.path) ? false : (seen.add(c.path), true)));
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir).sort().slice(0, 10_000);
  } catch {
    return [];
  }
}

export function controlFileChecks(ctx: AuditContext): Check[] {
  const out: Check[] = [];
  for (const c of controlPaths(ctx)) {
    const st = statOf(c.path);
    if (!st) continue;
    if (st.isSymbolicLink()) {
      out.push({ id: "control.symlink", severity: "warn", path: c.path, fixable: false, title: `${c.what} is a symbolic link`,
        detail: `${c.path} is a link: whoever can change the link, or what it points through, chooses what Vak reads and writes there`, fix: `replace the link with the file or directory itself (mv its target to ${c.path})` });
      continue;
    }
    if (st.uid !== ctx.uid) {
      out.push({ id: "control.owner", severity: "critical", path: c.path, fixable: false, title: `${c.what} belongs to another user`,
        detail: `${c.path} is owned by uid ${st.uid}, and Vak runs as uid ${ctx.uid}: that user can change it`, fix: `chown ${ctx.uid} ${c.path} (as root), or remove it` });
    }
    const mode = st.mode & 0o7777;
    const dir = st.isDirectory();
    if (mode & 0o022) {
      const bits = c.own ? 0o077 : 0o022;
      out.push({ id: "control.writable", severity: "critical", path: c.path, fixable: true, remove: [{ path: c.path, bits, dir }], title: `${c.what} is writable by others`,
        detail: `${c.path} has mode ${octal(mode)}: ${mode & 0o002 ? "anyone" : "its group"} can change it`, fix: `chmod ${octal(mode & ~bits)} ${c.path} (vak audit --fix does this)` });
    } else if (c.own && mode & 0o077) {
      out.push({ id: "control.readable", severity: c.secret ? "critical" : "warn", path: c.path, fixable: true, remove: [{ path: c.path, bits: 0o077, dir }], title: `${c.what} is open to others`,
        detail: `${c.path} has mode ${octal(mode)}; Vak's own ${dir ? "directories are 0700" : "files are 0600"}`, fix: `chmod ${octal(mode & ~0o077)} ${c.path} (vak audit --fix does this)` });
    }
    if (SYNCED.test(c.path)) {
      out.push({ id: "control.synced", severity: "warn", path: c.path, fixable: false, title: `${c.what} is in a synced folder`,
        detail: `${c.path} lies in a folder a sync client copies to other machines or a cloud, which can also write it back`, fix: "move it out (set XDG_CONFIG_HOME / XDG_STATE_HOME, or VAK_JOURNAL, to a local directory)" });
    }
  }
  out.push(...parentChecks(ctx));
  return out;
}

/**
 * A parent anyone can write to (without the sticky bit) lets them rename a
 * control file away and put their own in its place, whatever its mode.
 */
function parentChecks(ctx: AuditContext): Check[] {
  const out: Check[] = [];
  const seen = new Set<string>();
  for (const c of controlPaths(ctx)) {
    if (!statOf(c.path)) continue;
    for (let d = dirname(c.path); !seen.has(d); d = dirname(d)) {
      seen.add(d);
      const st = statOf(d);
      if (st && !st.isSymbolicLink() && st.mode & 0o002 && !(st.mode & 0o1000)) {
        const mine = st.uid === ctx.uid;
        out.push({ id: "control.parent-writable", severity: "critical", path: d, fixable: mine, remove: mine ? [{ path: d, bits: 0o002, dir: true }] : undefined,
          title: "a parent of Vak's control files is writable by anyone",
          detail: `${d} has mode ${octal(st.mode)} without the sticky bit: anyone can rename ${c.what} (${c.path}) away and put their own in its place`,
          fix: mine ? `chmod o-w ${d} (vak audit --fix does this)` : `chmod o-w ${d} as its owner (uid ${st.uid}), or move Vak's directories elsewhere` });
      }
      if (d === "/") break;
    }
  }
  return out;
}
